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
    """Releases ``first``..``last`` (inclusive) of ``engine`` behave as ``spec`` models.

    Versions are :func:`parse_version` keys, ``(major, minor, micro, post)``;
    a ``last`` of ``(0, 5, 19, LAST_POST)`` includes every ``0.5.19.postN``.
    ``vulnerable`` says whether the release leaks with its default settings
    (no ``--allow-auto-truncate``); preflight's verdict comes from the spec.
    """

    engine: str
    first: tuple[int, ...]
    last: tuple[int, ...]
    spec: str
    vulnerable: bool
    evidence: str
    kv_checksum: bool = False
    """Whether the release has ``--disaggregation-enable-kv-checksum`` (the spec's ``kv_checksum`` parameter)."""


#: The ``post`` part of a row's ``last`` that takes in every post release.
LAST_POST = 999

# Evidence (each release's wheel, python/sglang/srt/; line numbers are that release's):
# * 0.4.7..0.5.4.post1 (read: every release of that range on the index but 0.5.1.post1-2; the lines
#   are 0.5.4's): Req.set_finish_with_abort sets finished_reason = FINISH_ABORT(400) at once
#   (0.5.4 managers/schedule_batch.py:916-925) and the scheduler still queues the placeholder
#   (managers/scheduler.py:1268-1276 -> _add_request_to_queue, 1371); PrefillBootstrapQueue.add
#   (disaggregation/prefill.py:180) checks capacity only, process_batch_result_disagg_prefill sends it
#   (send_kv_chunk(last_chunk=True), :450) and overwrites the 400 with FINISH_LENGTH on Success (:525);
#   decode's pop_preallocated drops its own FINISH_ABORT requests (decode.py:422) and reserves the
#   whole prompt for the rest (_pre_alloc, :602); pop_transferred (:690) checks no length.
# * 0.5.4.post2..0.5.19: set_finish_with_abort parks the 400 in `to_finish` (SGLang PR #12312;
#   0.5.4.post2 schedule_batch.py:953, 0.5.5 :954), which `finished()` does not read;
#   PrefillBootstrapQueue.add (0.5.19 disaggregation/prefill.py:385) and DecodePreallocQueue.add /
#   pop_preallocated (decode.py:617, :1141) never look at it; prefill sends the one-token stub
#   (prefill.py:797) and turns the 400 into FINISH_LENGTH on Success (:931).  The incident ran
#   0.5.11.  Decode's own parked 400 is answered by the prebuilt step before any decode read.
# * 0.5.20: process_batch_result_disagg_prefill retires a result with is_aborted(req) (reads
#   `to_finish`, disaggregation/utils.py:1707) through _retire_aborted_prefill_result
#   (prefill.py:781-786, :1096) before send_kv_chunk: decode never gets a Success for the stub
#   (SGLang PR #36988); decode still reserves the pages until its waiting timeout.
# * 0.5.21..0.5.23: PrefillBootstrapQueue.add and DecodePreallocQueue.add retire requests with
#   `is_unadmitted_reject` (SGLang PR #38935; 0.5.21 prefill.py:417-424, decode.py:750-752,
#   utils.py:1754; unchanged in 0.5.22 and 0.5.23); the opt-in KV checksum
#   (--disaggregation-enable-kv-checksum, default off) answers 500 on a mismatch
#   (decode.py:3039-3070).  Newer releases are not covered until someone reads their code and
#   extends this table.
# Not covered: 0.4.6 (the rejection is no abort at all, and its Mooncake transfer does not cut
# prefill's pages to decode's: a prompt only decode rejects overruns decode's page list,
# mooncake/conn.py:37-60) and earlier releases, whose disaggregation/ has no working transfer.
# No release checks the transferred KV length against decode's reservation, so with
# --allow-auto-truncate and a longer decode limit every release reads pages prefill never sent.
SGLANG_DISAGG: tuple[Release, ...] = (
    Release("sglang", (0, 4, 7, 0), (0, 5, 4, 1), "sglang_disagg_v0_5_4.py", True,
            "set_finish_with_abort sets finished_reason, yet prefill forwards and sends the one-token placeholder "
            "(no abort check before send_kv_chunk) while decode reserves the whole prompt"),
    Release("sglang", (0, 5, 4, 2), (0, 5, 19, LAST_POST), "sglang_disagg_v0_5_19.py", True,
            "PrefillBootstrapQueue.add / DecodePreallocQueue.add admit a request whose rejection is "
            "parked in to_finish, and prefill sends its one-token placeholder (no is_aborted check)"),
    Release("sglang", (0, 5, 20, 0), (0, 5, 20, LAST_POST), "sglang_disagg_v0_5_20.py", False,
            "prefill retires a result whose rejection is parked in to_finish instead of sending it "
            "(PR #36988); decode still reserves pages for it until its waiting timeout"),
    Release("sglang", (0, 5, 21, 0), (0, 5, 23, LAST_POST), "sglang_disagg_v0_5_21.py", False,
            "PrefillBootstrapQueue.add and DecodePreallocQueue.add retire is_unadmitted_reject requests "
            "(PR #38935)", kv_checksum=True),
)



#: From this release decode skips the KV checksum, admitting the request unverified, when the prefill
#: node's layout signature (TP width, PP stage, page size) differs from its own
#: (0.5.23 disaggregation/decode.py:2580-2598 ``_kv_checksum_comparable``).
KV_CHECKSUM_SAME_LAYOUT_FROM = (0, 5, 23, 0)


def parse_version(text: str) -> tuple[int, ...] | None:
    """``"0.5.20"`` -> ``(0, 5, 20, 0)``, ``"0.5.4.post2"`` -> ``(0, 5, 4, 2)``; None if not a release.

    A pre-release or development build (``rc1``, ``a1``, ``.dev3``) is None:
    its code is not the release's, so no row may cover it.  A local version
    (``+cu128``) is the release it was built from.
    """
    import re

    m = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.(\d+))?(?:\.?post(\d+))?(?:\+[\w.]+)?", text.strip())
    if m is None:
        return None
    return tuple(int(g) for g in m.groups(default="0"))


def is_prerelease(text: str) -> bool:
    """``"0.5.21rc0"``, ``"0.5.21.dev3"``: a build whose code no row of the table was read from."""
    import re

    return re.fullmatch(r"v?\d+\.\d+(?:\.\d+)?(?:\.?post\d+)?[.-]?(?:a|b|rc|c|dev|alpha|beta|pre)\.?\d*(?:\+[\w.]+)?",
                        text.strip()) is not None


def show_version(version: tuple[int, ...]) -> str:
    """``(0, 5, 4, 2)`` -> ``"0.5.4.post2"``."""
    base = ".".join(map(str, version[:3]))
    return base + (f".post{version[3]}" if len(version) > 3 and version[3] not in (0, LAST_POST) else "")


def release_for(engine: str, version: tuple[int, ...]) -> Release | None:
    """The row covering ``version`` of ``engine``'s disaggregated serving, or None."""
    key = (tuple(version) + (0, 0, 0, 0))[:4]
    for row in SGLANG_DISAGG:
        if row.engine == engine and row.first <= key <= row.last:
            return row
    return None


def describe(row: Release) -> str:
    """``SGLang 0.5.5 to 0.5.19``, or ``SGLang 0.5.20`` for a row of one release."""
    first, last = show_version(row.first), show_version(row.last)
    return f"SGLang {first}" if first == last else f"SGLang {first} to {last}"
