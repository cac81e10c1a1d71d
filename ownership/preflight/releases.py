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


# Evidence (each release's wheel, python/sglang/srt/; line numbers are that release's):
# * 0.5.5..0.5.19: Req.set_finish_with_abort parks the 400 in `to_finish` (SGLang PR #12312,
#   2025-10-30; 0.5.5 managers/schedule_batch.py:954), which `finished()` does not read;
#   PrefillBootstrapQueue.add (0.5.19 disaggregation/prefill.py:385) and DecodePreallocQueue.add /
#   pop_preallocated (decode.py:617, :1141) never look at it; prefill sends the one-token stub
#   (prefill.py:797) and turns the 400 into FINISH_LENGTH on Success (:931).  The incident ran
#   0.5.11.  0.5.4 and earlier set finished_reason instead (a different path, not modelled).
# * 0.5.20: process_batch_result_disagg_prefill retires a result with is_aborted(req) (reads
#   `to_finish`, disaggregation/utils.py:1707) through _retire_aborted_prefill_result
#   (prefill.py:781-786, :1096) before send_kv_chunk: decode never gets a Success for the stub
#   (SGLang PR #36988); decode still reserves the pages until its waiting timeout.
# * 0.5.21..0.5.23: PrefillBootstrapQueue.add and DecodePreallocQueue.add retire requests with
#   `is_unadmitted_reject` (SGLang PR #38935; 0.5.21 prefill.py:417-424, decode.py:750-752,
#   utils.py:1754; unchanged in 0.5.22 and 0.5.23).  Newer releases are not covered until
#   someone reads their code and extends this table.
# No release checks the transferred KV length against decode's reservation.
SGLANG_DISAGG: tuple[Release, ...] = (
    Release("sglang", (0, 5, 5), (0, 5, 19), "sglang_disagg_v0_5_19.py", True,
            "PrefillBootstrapQueue.add / DecodePreallocQueue.add admit a request whose rejection is "
            "parked in to_finish, and prefill sends its one-token placeholder (no is_aborted check)"),
    Release("sglang", (0, 5, 20), (0, 5, 20), "sglang_disagg_v0_5_20.py", False,
            "prefill retires a result whose rejection is parked in to_finish instead of sending it "
            "(PR #36988); decode still reserves pages for it until its waiting timeout"),
    Release("sglang", (0, 5, 21), (0, 5, 23), "sglang_disagg_v0_5_21.py", False,
            "PrefillBootstrapQueue.add and DecodePreallocQueue.add retire is_unadmitted_reject requests "
            "(PR #38935)"),
)

#: The first release with the fix: what "upgrade" means in a remedy.
SGLANG_FIXED_IN = "0.5.20"


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
    """``SGLang 0.5.5 to 0.5.19``, or ``SGLang 0.5.20`` for a row of one release."""
    first, last = ('.'.join(map(str, v)) for v in (row.first, row.last))
    return f"SGLang {first}" if first == last else f"SGLang {first} to {last}"
