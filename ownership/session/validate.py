"""One validation of one event log against one spec: load both, size the instance from the header, search.

The command line and the tests call :func:`validate`; it refuses (OWN089, at
the log's header) a spec without ``spec.log_ids`` and a log whose header does
not fit the spec: a node the spec does not name, or sizes outside the
parameters' ranges.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from ownership.errors import Code, OwnershipError
from ownership.lang.instance import Instance
from ownership.lang.logmap import log_ids, log_rules
from ownership.validate.eventlog import EventLog, read_log
from ownership.validate.search import ValidateOptions, ValidationResult, Validator


def _misfit(log: EventLog, message: str) -> OwnershipError:
    return OwnershipError(Code.LOG_MISFIT, message, log.path, 1)


def validate(spec_path: Path, log_path: Path, options: ValidateOptions | None = None,
             params: Mapping[str, int] | None = None,
             progress: Callable[[int, int], None] | None = None) -> ValidationResult:
    """Validate the log at ``log_path`` against the spec at ``spec_path`` (``params`` override the header's)."""
    from ownership.lang.loader import load_spec

    spec = load_spec(spec_path)
    log = read_log(log_path)
    ids = log_ids(spec)
    if ids is None:
        raise _misfit(log, f"spec {spec.name} declares no spec.log_ids(...): it says nothing about how a log's ids "
                           "map onto it (see docs/validate.md)")
    nodes = log.header.nodes
    node = ids.node
    if node is None:
        if len(nodes) != 1:
            raise _misfit(log, f"the header names {len(nodes)} nodes ({', '.join(nodes)}) and spec {spec.name} "
                               "does not say which one it models (log_ids(node=...))")
        node = next(iter(nodes))
    elif node not in nodes:
        raise _misfit(log, f"spec {spec.name} models node {node!r}, which the header does not name "
                           f"(nodes: {', '.join(nodes)})")
    values = dict(ids.params(nodes[node])) if ids.params is not None else {}
    values.update(params or {})
    try:
        inst = Instance(spec, values)
    except OwnershipError as exc:
        if exc.code in (Code.BAD_PARAM, Code.UNKNOWN_PARAM):
            raise _misfit(log, f"the header does not fit spec {spec.name}: {exc.message}") from None
        raise
    want = nodes[node].usable
    have = inst.sizes[ids.pages.name]
    if have != want:
        raise _misfit(log, f"node {node!r} has {want} usable pages ({nodes[node].pages} minus reserved "
                           f"{list(nodes[node].reserved)}), but the instance's {ids.pages.name} has {have} "
                           f"({inst.describe_params()})")
    return Validator(inst, ids, log_rules(spec), log, node, options or ValidateOptions()).run(progress)
