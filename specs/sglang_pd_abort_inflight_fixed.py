"""SGLang PD disaggregation: deferred decode-side KV release for aborts mid-transfer (PR #35049).

Written as the patch on top of ``sglang_pd_abort_inflight_buggy``; compare
with the upstream diff (python/sglang/srt/disaggregation/):

* ``decode.py DecodeTransferQueue.pop_transferred``: a request that failed
  because decode aborted it (``kv_receiver.abort_notified``) is not released
  with ``release_kv_cache``; ``_defer_release`` parks it in
  ``_deferred_releases`` with its pages, req slot and metadata buffer;
* ``common/conn.py CommonKVManager`` and ``mooncake/conn.py``: the prefill
  answers ABORT with ABORT_ACK once the room has no outstanding transfer
  (at once when nothing was posted, else when the last chunk drains);
  decode records it (``note_abort_ack``);
* ``decode.py DecodeTransferQueue.resolve_deferred_releases``: a held request
  is released once ``is_abort_release_safe`` (every prefill rank acked), or
  when ``deferred_kv_release_timeout`` expires ("releasing anyway").

The timeout is the part a model without clocks must state as an assumption.
With ``deadline_covers_transfer=1`` (default) the deadline is taken to be
longer than an RDMA write can stay outstanding, so when it fires the write has
landed; the fix is then safe.  With ``--param deadline_covers_transfer=0`` the
timeout may fire first, and the check finds the use-after-free window that
PR #38961 reports for the timeout path (a lost or late ack): the fix is only
as safe as that assumption.

The model is the deferred path, on when
``SGLANG_DISAGGREGATION_DEFERRED_DECODE_KV_RELEASE`` is set and the backend
acks drains (Mooncake; NIXL from PR #35360); the PR merged it off by default.

Simplified as the shipped spec; in this model every Failed transfer is a
decode-initiated abort, so the immediate-release branch the patch keeps for
prefill-initiated failures is not reachable and not written.

Besides the invariants, the fix is checked for what it is for, as temporal
properties on every fair path: an aborted request's held pages do come back
(``pages_return``: once the client got its reply, 200 or an error, the
request holds no decode page; the base spec's ``pages_returned_when_idle``
is kept as the idle-state approximation), and every request decode admitted
gets its reply (``requests_finish``).  The engine's own steps are weakly fair
(the transfer, pop_transferred, the forward, the ack, the deferred release
and its timeout); admission (``decode_pop_preallocated``) and the client's
abort stay unfair.

Expected: safe at every size the explorer can cover; ``ownership prove``
proves it for executions of any length.
"""


import sglang_pd_abort_inflight_buggy as base
from sglang_pd_abort_inflight_buggy import HTTP, KV, DecodeQ, Req, ReqId, decode_pool, rdma

from ownership import Source, require, safe
from ownership.vocab.inflight import DeferredFrees

spec = base.spec.derive(
    "sglang_pd_abort_inflight_fixed",
    summary="SGLang PD: an aborted request's decode pages are held until prefill acks that its writes drained",
    models=Source(
        "SGLang",
        "PR #35049",
        where=(
            "disaggregation/decode.py DecodeTransferQueue.pop_transferred, _defer_release, resolve_deferred_releases",
            "disaggregation/common/conn.py CommonKVManager.note_abort_ack, is_abort_release_safe",
            "disaggregation/mooncake/conn.py ABORT_ACK after the room's transfers drain",
        ),
        links=("sglang PR #35049", "sglang PR #35360", "sglang PR #38961"),
    ),
    expect=safe(),
)
spec.param("deadline_covers_transfer", 1,
           "1: deferred_kv_release_timeout outlasts any outstanding RDMA write; 0: it may fire first", min=0, max=1)
deferred = DeferredFrees(decode_pool, spec=spec, writes=rdma)  # DecodeTransferQueue._deferred_releases
spec.var("abort_acked", bool, per=Req, init=False, doc="decode holds ABORT_ACK for the room (is_abort_release_safe)")


@spec.replace
def decode_pop_transferred(s, r: ReqId):
    """pop_transferred: a decode-aborted request is held (_defer_release), not released."""
    require(s.d_queue[r] == DecodeQ.TRANSFER and s.kv[r] in (KV.SUCCESS, KV.FAILED))
    if s.kv[r] == KV.FAILED:
        deferred.defer(s, r)  # FIX: pages, req slot and metadata buffer wait for the drain ack
        s.http[r] = HTTP.ERROR
        s.d_queue[r] = DecodeQ.DONE
        return
    s.d_queue[r] = DecodeQ.RUNNING


@spec.action(fair="weak")
def prefill_ack_abort(s, r: ReqId):
    """FIX: prefill sends ABORT_ACK once nothing is outstanding for the aborted room."""
    require(s.abort_sent[r] and not s.abort_acked[r])
    require(rdma.drained(s, r))  # no chunk of the room between dequeue and completion
    s.abort_acked[r] = True


@spec.action(fair="weak")
def resolve_deferred_releases(s, r: ReqId):
    """FIX: release a held request once every prefill rank acked (is_abort_release_safe)."""
    require(deferred.holding(s, r) and s.abort_acked[r])
    deferred.release(s, r)


@spec.action(fair="weak")
def deferred_release_timeout(s, r: ReqId):
    """FIX: deferred_kv_release_timeout expired without the ack: release anyway (with a warning)."""
    require(deferred.holding(s, r) and not s.abort_acked[r])
    if s.params.deadline_covers_transfer:
        require(rdma.drained(s, r))  # the assumption: by the deadline the write has landed
    deferred.release(s, r)


for _step in ("decode_pop_transferred", "decode_forward", "prefill_send", "prefill_transfer_done"):
    spec.fair(_step, "weak")  # the engine's own steps; decode_pop_preallocated and decode_abort stay unfair
base.own.properties("pages_return", "requests_finish", spec=spec,
                    ended=lambda s, r: s.http[r] != HTTP.NONE,  # the client got its reply (200 or an error)
                    started=lambda s, r: s.d_queue[r] != DecodeQ.IDLE)  # decode admitted it


@spec.terminal
def nothing_in_flight(s) -> bool:
    """Nothing in flight on either node and no release still deferred."""
    return base.nothing_in_flight(s) and deferred.empty(s)


# Mutants whose reachable states are the fix's own (only which action label reaches them differs).
_SAME_RELEASE = ("once the abort is acked, the timeout's release is exactly the release "
                 "resolve_deferred_releases performs (release itself requires a hold): same successor states")
spec.accept_mutant(
    "deferred_release_timeout delete-require: require(deferred.holding(s, r) and not s.abort_acked[r]) => pass",
    reason=_SAME_RELEASE,
)
spec.accept_mutant(
    "deferred_release_timeout swap-boolop: require(deferred.holding(s, r) and not s.abort_acked[r]) "
    "=> require((deferred.holding(s, r) or not s.abort_acked[r]))",
    reason=_SAME_RELEASE,
)
spec.accept_mutant(
    "deferred_release_timeout drop-call: deferred.release(s, r) => pass",
    reason="the timeout is a fallback: without it the ABORT_ACK path still releases every hold "
    "(a hold that could never be released is reported as stuck), so only the fallback's edges go",
)
