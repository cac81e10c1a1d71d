"""Which library spec models which engine release: the one table preflight reads.

Kept as data in one small module so it is easy to amend when the releases'
code is re-read.  Each row names the spec file (relative to the repository's
``specs/``), the releases it covers (inclusive), and the code evidence.
A release no row covers is NOT COVERED, never SAFE.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Release:
    """Releases ``first``..``last`` (inclusive) of ``engine`` behave as ``spec`` models."""

    engine: str
    first: tuple[int, ...]
    last: tuple[int, ...]
    spec: str
    vulnerable: bool
    evidence: str


# Evidence (read in /tmp/wheels/src/<version>/sglang/srt/):
# * <= 0.5.20: disaggregation/prefill.py PrefillBootstrapQueue.add and disaggregation/decode.py
#   DecodePreallocQueue.add / pop_preallocated never look at a pending rejection (`to_finish`,
#   set by managers/schedule_batch.py Req.set_finish_with_abort); the 0.5.20 sources are the
#   newest checked that way.  The lower bound is not verified release by release: the
#   `to_finish` path dates from SGLang PR #12312 (2025-10); the incident ran 0.5.11.
# * 0.5.21..0.5.23: PrefillBootstrapQueue.add and DecodePreallocQueue.add retire requests with
#   `is_unadmitted_reject` (disaggregation/{prefill,decode,utils}.py of 0.5.21 and 0.5.22; 0.5.23
#   is the version installed by scripts/real-engines.sh).  Newer releases are not covered until
#   someone reads their code and extends this row.
SGLANG_DISAGG: tuple[Release, ...] = (
    Release("sglang", (0, 5, 0), (0, 5, 20), "sglang_disagg_v0_5_20.py", True,
            "PrefillBootstrapQueue.add / DecodePreallocQueue.add admit a request whose rejection is "
            "parked in to_finish (no is_unadmitted_reject check)"),
    Release("sglang", (0, 5, 21), (0, 5, 23), "sglang_disagg_v0_5_21.py", False,
            "PrefillBootstrapQueue.add and DecodePreallocQueue.add retire is_unadmitted_reject requests"),
)

#: The first release with the fix: what "upgrade" means in a remedy.
SGLANG_FIXED_IN = "0.5.21"


def parse_version(text: str) -> tuple[int, ...] | None:
    """``"0.5.20"`` -> ``(0, 5, 20)``; a suffix such as ``.post1`` or ``rc1`` is ignored; None if not a version."""
    import re

    m = re.match(r"^v?(\d+)\.(\d+)(?:\.(\d+))?", text.strip())
    if m is None:
        return None
    return tuple(int(g) for g in m.groups(default="0"))


def release_for(engine: str, version: tuple[int, ...]) -> Release | None:
    """The row covering ``version`` of ``engine``'s disaggregated serving, or None."""
    for row in SGLANG_DISAGG:
        if row.engine == engine and row.first <= version <= row.last:
            return row
    return None


def describe(row: Release) -> str:
    """``SGLang 0.5.0 to 0.5.20``."""
    return f"SGLang {'.'.join(map(str, row.first))} to {'.'.join(map(str, row.last))}"
