"""What one transition did when re-run: the ``if`` outcomes of the action's own code and the state cells it read."""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap
from dataclasses import dataclass
from types import CodeType, FrameType
from typing import Any

from ownership.analysis.explain.graph import Transition
from ownership.errors import Code, OwnershipError
from ownership.lang.declarations import Action
from ownership.lang.instance import Instance


@dataclass(frozen=True)
class Branch:
    """An ``if`` in an action's code: its line, the first line of its body, its text."""

    line: int
    body: int
    source: str


def branches(act: Action) -> list[Branch]:
    """The ``if`` statements in the action's own code (not in helpers it calls), with absolute lines."""
    try:
        lines, first = inspect.getsourcelines(act.fn)
    except (OSError, TypeError):
        return []
    try:
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except SyntaxError:
        return []
    out: list[Branch] = []
    fn = tree.body[0] if tree.body else None
    if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
        return []
    for node in ast.walk(fn):
        if isinstance(node, ast.If):
            line = first + node.lineno - 1
            out.append(Branch(line, first + node.body[0].lineno - 1, lines[node.lineno - 1].strip()))
    return out


def trace_run(inst: Instance, t: Transition, state: tuple[Any, ...]) -> tuple[frozenset[int], frozenset[int]]:
    """Re-run one transition; the lines of the action's own code it executed and the cells it read."""
    code: CodeType = t.ai.action.fn.__code__
    executed: set[int] = set()

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            executed.add(frame.f_lineno)
        return local

    def global_(frame: FrameType, event: str, arg: Any) -> Any:
        return local if frame.f_code is code else None

    # The instance's non-recording evaluator: the diagnosis re-runs many transitions, events are not needed.
    evaluator = inst.evaluator(recording=False)
    previous = sys.gettrace()
    sys.settrace(global_)
    try:
        sc, reads = evaluator.run_reading(state, t.ai, t.picks)
    finally:
        sys.settrace(previous)
    if sc is None:  # pragma: no cover - the graph's own transition always re-runs
        raise OwnershipError(Code.INTERNAL_REPLAY, f"transition {t.ai.label} does not re-run", inst.spec.file)
    return frozenset(executed), reads
