"""The preflight report: the terminal text and the JSON a deploy pipeline reads."""

from __future__ import annotations

import shlex
from typing import Any

from ownership.preflight import releases
from ownership.preflight.verdict import Analysis, Preflight, Status

#: Version of the JSON document's shape; bump when a field changes meaning.
SCHEMA_VERSION = 1


def _nodes(r: Preflight) -> list[tuple[str, Any]]:
    d = r.deployment
    return [("prefill", d.prefill), ("decode", d.decode)] if d.decode is not None else [("node", d.prefill)]


def reproduce_preflight(r: Preflight) -> str:
    """The ``ownership preflight`` command that gives this report."""
    d = r.deployment
    flags = ([f"--prefill {shlex.quote(d.prefill.file)}", f"--decode {shlex.quote(d.decode.file)}"]
             if d.decode is not None else [f"--node {shlex.quote(d.prefill.file)}"])
    if d.version_from == "--version":
        flags.append(f"--version {d.version}")
    return "ownership preflight " + " ".join(flags)


def _covered(a: Analysis, r: Preflight) -> str:
    m = r.mapped
    assert m is not None
    pages = m.pages
    scale = (f"page size {m.real_page_size:,} scaled to {m.page_size:,}" if m.page_size != m.real_page_size
             else f"page size {m.page_size:,}")
    return (f"{a.states:,} distinct states, {a.transitions:,} transitions (explore, prompt_tokens symbolic: every "
            f"prompt length up to the context at once; {scale}: prefill {pages[0]:,} pages, decode {pages[1]:,} pages), "
            f"{a.seconds:.1f}s; {_actions(a)}")


def _actions(a: Analysis) -> str:
    """Which actions fired: all of them, or the ones that did not, by name."""
    total = len(a.fired) + len(a.unfired)
    if not a.unfired:
        return f"all {total} actions fired"
    return f"{len(a.fired)} of {total} actions fired (never: {', '.join(a.unfired)})"


def _needed(r: Preflight) -> str:
    """What a NOT COVERED deployment would need for a verdict, in one clause."""
    d = r.deployment
    if d.prefill.engine == "vllm":
        held = "passed" if _vllm_pools_fit(r) else "failed"
        return f"a spec of vLLM's admission of over-long prompts (the library has none); its KV cache check {held}"
    if d.decode is None or d.prefill.role == "null":
        return "a spec of one SGLang node, which the library lacks; its specs model a prefill/decode pair (--prefill, --decode)"
    version = releases.parse_version(d.version or "")
    if version is not None and releases.release_for("sglang", version) is None:
        return f"a row of the release table for SGLang {d.version} (its code re-read and a spec that models it)"
    return "a spec of each path named below, or a deployment that does not take them"


def _vllm_pools_fit(r: Preflight) -> bool:
    """Each node's KV cache holds one request of its max_model_len: the condition vLLM checks before it starts."""
    return all(n.pool_tokens >= n.context_len for _, n in _nodes(r))


def headline(r: Preflight) -> str:
    """The report's first line: the verdict and what to do about it."""
    if r.status is Status.SAFE:
        line = "SAFE: deploy: at these numbers no prompt length up to the context leaks KV between requests"
        if r.release is not None and r.release.vulnerable:
            line += "; this release has the leak, so keep --context-length at most the smaller pool after any change"
        return line
    if r.status is Status.UNSAFE:
        remedies = [m.action.split(" (", 1)[0] for m in r.remedies]
        what = ", or ".join(remedies) if remedies else "no remedy found; see the leaking prompt range below"
        return f"UNSAFE: do not deploy: {what}"
    if r.status is Status.NOT_COVERED:
        return f"NOT COVERED: no verdict: needs {_needed(r)}"
    took = f" after {r.analysis.seconds:,.0f}s" if r.analysis is not None else ""
    return f"UNKNOWN: no verdict: the analysis stopped{took}; run again with a larger --max-seconds"


def text(r: Preflight) -> list[str]:
    """The report as lines: what to do first, then the deployment, why, the remedy, what was covered, how to reproduce."""
    d = r.deployment
    what = f"  {d.prefill.engine} {d.version or '(version unknown)'}"
    what += " prefill/decode disaggregation" if d.decode is not None and d.prefill.role != "null" else ""
    out = [headline(r), what]
    for name, node in _nodes(r):
        page = f", page_size {node.page_size:,}" if node.page_size is not None else ""
        out.append(f"  {name}: {node.file}: context {node.context_len:,} tokens, KV pool {node.pool_tokens:,} "
                   f"tokens{page}")
    out.append(f"  version {d.version} from {d.version_from}" if d.version else "  version not given")
    out += [f"  not covered: {why}" for why in r.reasons if r.status is Status.NOT_COVERED]
    out += [f"  {why}" for why in r.reasons if r.status is not Status.NOT_COVERED]
    if r.limits is not None:
        out.append(f"  prefill rejects prompts of at least {r.limits[0].how}")
        out.append(f"  decode rejects prompts of at least {r.limits[1].how}")
    if r.status is Status.UNSAFE:
        a = r.analysis
        violated = a.violated if a is not None else None
        if r.leaking is not None:
            lo, hi = r.leaking
            span = f"of {lo:,} to {hi:,} tokens" if hi is not None else f"of {lo:,} tokens or more"
            out.append(f"  unsafe: prompts {span} ({violated}): {r.mechanism}")
        elif a is not None:
            out.append(f"  unsafe ({violated}) for some prompt lengths: {a.region or 'see the reproduce command'}")
        if r.formula and r.leaking is not None:
            out.append(f"  formula ({r.spec}): unsafe exactly when {r.formula}")
    if r.release is not None:
        state = "affected" if r.release.vulnerable else "fixed"
        out.append(f"  release: {releases.describe(r.release)} ({state}: {r.release.evidence}); spec specs/{r.spec}")
    if r.status is Status.UNSAFE:
        for i, remedy in enumerate(r.remedies):
            checked = "" if remedy.checked is None else f" (checked: SAFE, {remedy.checked.seconds:.1f}s)"
            out.append(f"  remedy: {'or ' if i else ''}{remedy.action}{checked}")
        if not r.remedies:
            out.append("  remedy: none of upgrading, a shorter --context-length, turning off --allow-auto-truncate or "
                       "the KV checksum makes the analysis safe; keep this deployment from serving")
    elif r.status is Status.SAFE and r.release is not None and r.release.vulnerable:
        out.append("  note: this release has the leak, but at these numbers no prompt is rejected by prefill and "
                   "admitted by decode; keep --context-length at most the smaller pool after every change")
    if r.analysis is not None:
        out.append(f"  covered: {_covered(r.analysis, r)}")
        out.append(f"  reproduce: {r.analysis.reproduce}")
    out.append(f"  reproduce: {reproduce_preflight(r)}")
    return out


def document(r: Preflight) -> dict[str, Any]:
    """The report as the ``--json`` document (``format: ownership-preflight``)."""
    d = r.deployment
    a = r.analysis
    remedy: dict[str, Any] | None = None
    if r.status is Status.UNSAFE:
        remedy = {m.kind: {"action": m.action, "value": m.value,
                           "checked": None if m.checked is None else m.checked.verdict} for m in r.remedies}
    return {
        "format": "ownership-preflight",
        "version": SCHEMA_VERSION,
        "verdict": r.status.name,
        "headline": headline(r),
        "exit_code": int(r.status.value),
        "engine": d.prefill.engine,
        "engine_version": d.version,
        "engine_version_from": d.version_from,
        "nodes": {name: {"file": n.file, "role": n.role, "context_len": n.context_len, "pool_tokens": n.pool_tokens,
                         "page_size": n.page_size, "max_req_input_len": n.max_req_input_len,
                         "transfer_backend": n.transfer_backend} for name, n in _nodes(r)},
        "reasons": list(r.reasons),
        "spec": None if r.spec is None else f"specs/{r.spec}",
        "release": None if r.release is None else {"covers": releases.describe(r.release),
                                                   "vulnerable": r.release.vulnerable, "evidence": r.release.evidence},
        "limits": None if r.limits is None else {"prefill": r.limits[0].tokens, "decode": r.limits[1].tokens},
        "leaking_prompt_tokens": None if r.leaking is None else {"min": r.leaking[0], "max": r.leaking[1]},
        "mechanism": r.mechanism,
        "formula": r.formula,
        "remedy": remedy,
        "spec_params": None if r.mapped is None else dict(r.mapped.params),
        "covered": None if a is None else {"engine": "explore", "free": ["prompt_tokens"], "verdict": a.verdict,
                                           "states": a.states, "transitions": a.transitions,
                                           "seconds": round(a.seconds, 3), "violated": a.violated,
                                           "actions_fired": list(a.fired), "actions_never_fired": list(a.unfired)},
        "reproduce": [x for x in (None if a is None else a.reproduce, reproduce_preflight(r)) if x],
    }
