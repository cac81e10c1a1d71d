"""The preflight verdict: which spec covers the deployment, the free-parameter analysis at its numbers, the remedy.

:func:`evaluate` maps a deployment onto the library spec for its release
(:mod:`.releases`), scales the page size (:mod:`.mapping`), and runs the
explorer with ``prompt_tokens`` symbolic (``check --free prompt_tokens
--minimize prompt_tokens``), so one run covers every prompt length.  SAFE
only when that run exhausts the instance; a deployment no spec models is
NOT COVERED with the reason, never SAFE.
"""

from __future__ import annotations

import dataclasses
import enum
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from ownership.core.progress import PhasedProgress, ProgressFn
from ownership.errors import Code, ExitCode, OwnershipError
from ownership.library import library_dir
from ownership.preflight import admission, releases
from ownership.preflight.mapping import Limit, Mapped, context_to_close, spec_params
from ownership.preflight.readers import NodeConfig

SPECS = library_dir()
"""The library the release table's specs are read from (installed with the package, or a checkout's ``specs/``)."""
_ATOM = re.compile(r"prompt_tokens (>=|<) (\w+)")


class Status(enum.Enum):
    """The verdict line and the exit status a deploy gate reads."""

    SAFE = ExitCode.OK
    UNSAFE = ExitCode.VIOLATION
    UNKNOWN = ExitCode.INCONCLUSIVE
    NOT_COVERED = ExitCode.NOT_COVERED


@dataclass(frozen=True)
class Deployment:
    """The nodes read, and the engine version with where it came from."""

    prefill: NodeConfig
    decode: NodeConfig | None
    version: str | None
    version_from: str


@dataclass(frozen=True)
class Analysis:
    """One run of the explorer at a deployment's numbers."""

    verdict: str
    states: int
    transitions: int
    seconds: float
    region: str | None
    reproduce: str
    derived: dict[str, int] = field(default_factory=dict)
    violated: str | None = None
    fired: tuple[str, ...] = ()
    """The spec's actions that took a step in the analysis."""
    unfired: tuple[str, ...] = ()
    """The spec's actions that never did: a SAFE with some is said to be so, not passed silently."""


@dataclass(frozen=True)
class Remedy:
    """One change that makes the deployment safe, and the analysis that re-checked it."""

    action: str
    """What to do, in the operator's terms (``restart both nodes with --context-length 681280``)."""
    kind: str
    """``upgrade``, ``context_length``, ``no_auto_truncate`` or ``kv_checksum`` (the JSON key)."""
    value: str | int | None
    checked: Analysis | None
    """The same analysis with the change applied (None when re-checking was turned off)."""


@dataclass(frozen=True)
class Preflight:
    """Everything the report says; :mod:`.render` prints it as text or JSON."""

    status: Status
    deployment: Deployment
    reasons: tuple[str, ...] = ()
    spec: str | None = None
    release: releases.Release | None = None
    limits: tuple[Limit, Limit] | None = None
    mapped: Mapped | None = None
    analysis: Analysis | None = None
    leaking: tuple[int, int | None] | None = None
    """The leaking prompt lengths in real tokens, ``(lo, None)`` for every prompt of at least ``lo``."""
    formula: str | None = None
    mechanism: str | None = None
    """How the leaking prompts leak, in the engine's terms."""
    remedies: tuple[Remedy, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def context_length(self) -> int | None:
        """The ``--context-length`` remedy, if one was found."""
        return next((int(r.value) for r in self.remedies if r.kind == "context_length" and r.value is not None), None)


def deployment(prefill: NodeConfig, decode: NodeConfig | None, version: str | None) -> Deployment:
    """Check the nodes fit together and settle the version (``--version`` or what the JSON says)."""
    nodes = [n for n in (prefill, decode) if n is not None]
    if decode is not None:
        for node, role in ((prefill, "prefill"), (decode, "decode")):
            if node.engine == "sglang" and node.role != role:
                raise OwnershipError(Code.PREFLIGHT_CONTRADICTORY, f"given as the {role} node, but its "
                                     f"disaggregation_mode is {node.role!r}", node.file, node.lines.get("disaggregation_mode"))
        if prefill.engine != decode.engine:
            raise OwnershipError(Code.PREFLIGHT_CONTRADICTORY, f"the prefill node runs {prefill.engine}, the decode "
                                 f"node {decode.engine}", decode.file)
    found = {n.version: n for n in nodes if n.version is not None}
    if len(found) > 1:
        a, b = list(found.values())[:2]
        raise OwnershipError(Code.PREFLIGHT_CONTRADICTORY, f"version {b.version} here but {a.version} in {a.file}: "
                             "both nodes must run one release", b.file, b.lines.get("version") or b.lines.get("vllm_version"))
    if version is not None:
        if releases.parse_version(version) is None:
            if not releases.is_prerelease(version):
                raise OwnershipError(Code.PREFLIGHT_VERSION, f"--version {version!r} is not a version such as 0.5.20 "
                                     "or 0.5.4.post2")
        for n in found.values():
            if not _same_version(n.version or "", version):
                raise OwnershipError(Code.PREFLIGHT_CONTRADICTORY, f"the file says version {n.version}, --version "
                                     f"says {version}", n.file, n.lines.get("version") or n.lines.get("vllm_version"))
        return Deployment(prefill, decode, version, "--version")
    if found:
        n = next(iter(found.values()))
        if n.version is not None and releases.parse_version(n.version) is None and not releases.is_prerelease(n.version):
            raise OwnershipError(Code.PREFLIGHT_VERSION, f"version {n.version!r} is not readable", n.file, n.lines.get("version"))
        return Deployment(prefill, decode, n.version, n.where("version") if "version" in n.lines else n.where("vllm_version"))
    raise OwnershipError(Code.PREFLIGHT_VERSION, "the startup log does not say which SGLang release runs (only "
                         "GET /server_info does): pass --version, e.g. --version 0.5.20", prefill.file)


#: Pages of the largest scaled pool past which the analysis is not attempted (it would not finish).
MAX_ANALYSED_PAGES = 16


def _same_version(a: str, b: str) -> bool:
    """Two spellings of one version (``0.5.20`` and ``v0.5.20.post0``; pre-releases compared as written)."""
    pa, pb = releases.parse_version(a), releases.parse_version(b)
    if pa is not None and pb is not None:
        return pa == pb
    return a.strip().lstrip("v") == b.strip().lstrip("v")


def switches(dep: Deployment, row: releases.Release) -> dict[str, int]:
    """The spec's 0/1 parameters for the nodes' settings that change the path a prompt takes."""
    p, d = dep.prefill, dep.decode
    assert d is not None
    out = {"prefill_auto_truncate": int(p.allow_auto_truncate), "decode_auto_truncate": int(d.allow_auto_truncate)}
    if row.kv_checksum:
        # decode verifies only when both nodes compute checksums (prefill writes it into the metadata buffer)
        out["kv_checksum"] = int(p.kv_checksum and d.kv_checksum and checksum_compares(dep))
    return out


def checksum_compares(dep: Deployment) -> bool:
    """Whether decode compares the two nodes' KV checksums at all (0.5.23 skips it across layouts).

    Read conservatively: the same tensor-parallel width and no pipeline
    stages on either node; a layout the signature might tell apart counts as
    a skipped check, never as a verified one.
    """
    p, d = dep.prefill, dep.decode
    assert d is not None
    version = releases.parse_version(dep.version or "") or ()
    if version < releases.KV_CHECKSUM_SAME_LAYOUT_FROM:
        return True
    return p.tp_size == d.tp_size and p.pp_size == d.pp_size == 1


def evaluate(dep: Deployment, max_seconds: float | None = None, check_remedy: bool = True,
             progress: PhasedProgress | None = None) -> Preflight:
    """The verdict for ``dep``; ``progress`` is told each phase and gets the explorer's reports."""
    p, d = dep.prefill, dep.decode
    if p.engine == "vllm":
        return Preflight(Status.NOT_COVERED, dep, reasons=(_vllm_reason(p, d),))
    if d is None or p.role == "null":
        return Preflight(Status.NOT_COVERED, dep, reasons=(
            "a single-node SGLang deployment: the library's specs of the rejected-prompt path model prefill/decode "
            "disaggregation (pass --prefill and --decode); no spec in the release table covers one node",))
    reasons = []
    if p.page_size != d.page_size:
        reasons.append(f"the nodes use different page sizes ({p.page_size:,} and {d.page_size:,} tokens); the spec models one")
    for node in (p, d):
        if (node.transfer_backend or "mooncake") != "mooncake":
            reasons.append(f"{node.where('disaggregation_transfer_backend')}: transfer backend "
                           f"{node.transfer_backend!r}: the spec models Mooncake's transfer")
    assert dep.version is not None
    row = releases.release_for("sglang", releases.parse_version(dep.version) or ())
    if row is None and releases.is_prerelease(dep.version):
        reasons.append(f"SGLang {dep.version} is a pre-release: its code is not any release's, and the table "
                       "(ownership/preflight/releases.py) covers releases only; run preflight on the release")
    elif row is None:
        reasons.append(f"SGLang {dep.version}: no row of the release table (ownership/preflight/releases.py) covers "
                       f"it; covered: {', '.join(releases.describe(r) for r in releases.SGLANG_DISAGG)}")
    formula = admission.formula_for(releases.parse_version(dep.version) or ())
    if row is not None and formula is None:
        reasons.append(f"SGLang {dep.version}: no admission formula of ownership/preflight/admission.py covers it")
    for node in (p, d):
        if formula is not None and formula.sharded and node.unprinted_limit_terms and node.max_req_input_len is None:
            reasons.append(f"{node.file}: {', '.join(node.unprinted_limit_terms)} changes the admission limit by a "
                           "number no log prints (page_interleave_shard_size, the dLLM block size); give the node's "
                           "GET /server_info JSON, which reports max_req_input_len")
    if reasons:
        return Preflight(Status.NOT_COVERED, dep, reasons=tuple(reasons))
    assert row is not None and formula is not None
    if progress is not None:
        progress.phase(f"mapping onto specs/{row.spec}")
    limits = (Limit.of(p, formula=formula), Limit.of(d, formula=formula))
    flags = switches(dep, row)
    mapped = spec_params(limits[0].tokens, limits[1].tokens, p.page_size or 1, switches=flags)
    base = Preflight(Status.UNKNOWN, dep, spec=row.spec, release=row, limits=limits, mapped=mapped)
    if max(mapped.pages) > MAX_ANALYSED_PAGES:
        return _replace(base, reasons=(
            f"with --allow-auto-truncate the verdict turns on page rounding, and at these limits "
            f"({limits[0].tokens:,} and {limits[1].tokens:,} tokens, page size {p.page_size}) no page size the "
            f"explorer can cover keeps it ({max(mapped.pages)} pages); check by hand whether "
            f"ceil(prefill limit / page size) * page size is below decode's limit",))
    spec_path = SPECS / row.spec
    if progress is not None:
        progress.phase("free-parameter analysis")
    analysis = analyse(spec_path, mapped, max_seconds, progress)
    base = _replace(base, status=Status.SAFE, analysis=analysis)
    if analysis.verdict == "UNKNOWN":
        return _replace(base, status=Status.UNKNOWN, reasons=("the analysis stopped before it was complete",))
    if analysis.verdict != "VIOLATED":
        return base
    leaking, region = _leaking(analysis, mapped)
    remedies = _remedies(dep, row, formula, mapped, max_seconds, check_remedy, progress)
    return _replace(base, status=Status.UNSAFE, leaking=leaking, formula=region,
                    mechanism=_mechanism(leaking, limits, flags), remedies=remedies)


def _mechanism(leaking: tuple[int, int | None] | None, limits: tuple[Limit, Limit], flags: dict[str, int]) -> str:
    """How the leaking prompts leak, in the engine's terms."""
    if flags.get("prefill_auto_truncate") and (leaking is None or leaking[0] > limits[0].tokens):
        return ("prefill truncates them to its limit and sends only those pages, decode keeps more of the prompt "
                "(its limit is longer) and reads the pages prefill never wrote, which hold earlier requests' KV "
                "(or garbage); nothing is rejected, so the client gets HTTP 200")
    return ("prefill rejects them and sends one placeholder page, decode admits them and reads its other reserved "
            "pages, which hold earlier requests' KV; the client gets HTTP 200")


def _remedies(dep: Deployment, row: releases.Release, formula: admission.Formula, mapped: Mapped,
              max_seconds: float | None, check: bool, progress: PhasedProgress | None = None) -> tuple[Remedy, ...]:
    """Each change that would close the leak, re-checked by the same analysis (kept only if it does)."""
    p, d = dep.prefill, dep.decode
    assert d is not None
    candidates: list[tuple[str, str, str | int | None, Path, Mapped]] = []
    target = next((r for r in releases.SGLANG_DISAGG if r.first > row.last and not r.vulnerable), None)
    if target is not None:
        # the same numbers on the later release's spec; its KV checksum starts off, as an upgrade leaves it
        up = dataclasses.replace(mapped, params={k: v for k, v in mapped.params.items() if k != "kv_checksum"})
        first = releases.show_version(target.first)
        candidates.append((f"upgrade both nodes to SGLang >= {first}", "upgrade", first, SPECS / target.spec, up))
    n = context_to_close(p, d, formula)
    if n is not None:
        flags = {k: v for k, v in mapped.params.items() if k.endswith(("_truncate", "checksum"))}
        lowered = spec_params(Limit.of(p, n, formula).tokens, Limit.of(d, n, formula).tokens, p.page_size or 1,
                              switches=flags)
        candidates.append((f"restart both nodes with --context-length {n}", "context_length", n,
                           SPECS / row.spec, lowered))
    if mapped.params.get("prefill_auto_truncate") or mapped.params.get("decode_auto_truncate"):
        off = dataclasses.replace(mapped, params={**mapped.params, "prefill_auto_truncate": 0, "decode_auto_truncate": 0})
        candidates.append(("restart both nodes without --allow-auto-truncate", "no_auto_truncate", None,
                           SPECS / row.spec, off))
    if row.kv_checksum and mapped.params.get("kv_checksum") == 0 and checksum_compares(dep):
        on = dataclasses.replace(mapped, params={**mapped.params, "kv_checksum": 1})
        candidates.append(("restart both nodes with --disaggregation-enable-kv-checksum (a mismatch is answered "
                           "with HTTP 500 instead of the other tenants' data)", "kv_checksum", None, SPECS / row.spec, on))
    out = []
    for action, kind, value, spec_path, params in candidates:
        if check and progress is not None:
            progress.phase(f"remedy re-check: {action}")
        checked = analyse(spec_path, params, max_seconds, progress) if check else None
        if checked is None or checked.verdict == "PROVED":
            out.append(Remedy(action, kind, value, checked))
    return tuple(out)


def _replace(base: Preflight, **changes: object) -> Preflight:
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def _leaking(analysis: Analysis, mapped: Mapped) -> tuple[tuple[int, int | None] | None, str | None]:
    """The leaking prompt lengths from the spec's own description of the region, in real tokens.

    ``(lo, hi)`` for ``lo <= prompt_tokens <= hi``, ``(lo, None)`` for every
    prompt of at least ``lo`` tokens.  The formulas are evaluated at the real
    page size (a formula without ``page_size`` is the same at both).
    """
    region = analysis.region
    if region is None or not region.startswith("unsafe exactly when "):
        return None, region
    condition = region.removeprefix("unsafe exactly when ")
    head = region.split(" (", 1)[0]  # the condition, before the formulas' definitions
    atoms = _ATOM.findall(head)
    values = analysis.derived
    lows = [values.get(n) for op, n in atoms if op == ">="]
    highs = [values.get(n) for op, n in atoms if op == "<"]
    if len(lows) != 1 or len(highs) > 1 or len(atoms) != 1 + len(highs) or head.count(" and ") != len(highs):
        return None, condition
    lo, hi = lows[0], (highs[0] if highs else None)
    if lo is None or (highs and (hi is None or lo >= hi)):
        return None, condition
    return (lo, None if hi is None else hi - 1), condition


def derived_values(spec: object, params: dict[str, int]) -> dict[str, int]:
    """The spec's ``spec.derived`` formulas evaluated at ``params`` (those that do not need ``prompt_tokens``)."""
    out: dict[str, int] = {}
    for d in getattr(spec, "derived_values", {}).values():
        try:
            value = eval(d.formula, {"__builtins__": {}, "min": min, "max": max,  # noqa: S307 - the spec's own formula
                                     "ceil_div": lambda a, b: -(-a // b)}, dict(params))
        except Exception:  # noqa: BLE001, S112 - a formula over the free parameter: not a limit
            continue
        if isinstance(value, int):
            out[d.name] = value
    return out


def analyse(spec_path: Path, mapped: Mapped, max_seconds: float | None,
            progress: ProgressFn | None = None) -> Analysis:
    """``check SPEC --free prompt_tokens`` at the mapped parameters; the explorer reports to ``progress``."""
    from ownership.core.limits import limited
    from ownership.core.result import Verdict
    from ownership.engines.paramexplore import ParamOptions, explore_params
    from ownership.lang.instance import Instance
    from ownership.lang.loader import load_spec

    spec = load_spec(spec_path)
    start = time.perf_counter()
    # No --minimize: the region's description (proved equivalent by Z3) gives both ends, and
    # optimising over it costs more than the search (13 s of 24 at the incident's numbers).
    options = ParamOptions(free=("prompt_tokens",), where=("prompt_tokens <= context_len",), max_seconds=max_seconds)
    inst = Instance(spec, {**mapped.params, "prompt_tokens": 1})
    try:
        with limited(max_seconds):
            result = explore_params(inst, options, progress)
    except KeyboardInterrupt:
        return Analysis("UNKNOWN", 0, 0, time.perf_counter() - start, None, reproduce_check(spec_path, mapped))
    region = next((n for n in result.notes if n.startswith("unsafe ")), None)
    verdict = "VIOLATED" if result.verdict is Verdict.VIOLATED else (
        "PROVED" if result.verdict is Verdict.PROVED else "UNKNOWN")
    real = {**mapped.params, "page_size": mapped.real_page_size}
    return Analysis(verdict, result.stats.states, result.stats.transitions, time.perf_counter() - start,
                    region, reproduce_check(spec_path, mapped), derived_values(spec, real), result.violated,
                    fired=tuple(a.name for a in result.actions if a.fired),
                    unfired=tuple(a.name for a in result.actions if not a.fired))


def reproduce_check(spec_path: Path, mapped: Mapped) -> str:
    """The ``ownership check`` command that runs the same analysis."""
    try:
        shown = spec_path.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        shown = spec_path
    # requests is the spec's default, and a setting switched off is the spec's default too
    params = " ".join(f"--param {k}={v}" for k, v in mapped.params.items()
                      if k != "requests" and not (k.endswith(("_truncate", "_checksum")) and v == 0))
    return (f"ownership check {shown} --free prompt_tokens "
            f"--where 'prompt_tokens <= context_len' {params}")


def _vllm_reason(p: NodeConfig, d: NodeConfig | None) -> str:
    """What was checked of a vLLM deployment, whether it passed, and what no spec covers."""
    nodes = [n for n in (p, d) if n is not None]
    fits = all(n.pool_tokens >= n.context_len for n in nodes)
    pools = "; ".join(f"{n.where('pool_tokens')}: KV cache {n.pool_tokens:,} tokens, max_model_len {n.context_len:,}"
                      for n in nodes)
    outcome = "passed" if fits else "failed: vLLM 0.33.0 refuses to start so configured; is this the running node's log?"
    return ("vLLM's admission of prompts longer than it can serve (no library spec models it, so nothing here says "
            "whether such a prompt can read or write KV another request owns). Checked: each KV cache holds one "
            "request of max_model_len tokens, the condition vLLM 0.33.0 checks before it starts (v1/core/"
            f"kv_cache_planning.py check_enough_kv_cache_memory; {pools}): {outcome}")
