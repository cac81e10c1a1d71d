"""SGLang 0.5.21 PD disaggregation with its liveness stated: answered requests and returned pages.

The incident model ``specs/sglang_disagg_v0_5_21.py`` unchanged (every action,
parameter and invariant), with two temporal properties per request, the
vocabulary's built-ins (``own.properties``, ``docs/liveness.md``):

* ``requests_finish``: ``started(r) ~> ended(r)``: a request that arrived
  eventually gets its answer (HTTP 200 streamed, or a 400/500 error);
* ``pages_return``: ``ended(r) ~> r holds no page``: once the client has its
  answer, every page the request holds on the prefill node or the decode node
  is eventually freed (decode still holds its pages between the 200 and
  ``decode_finish``; prefill still holds a forwarded request's pages after
  decode's transfer timeout answered 400, until ``prefill_transfer_failed``).

Fairness: weak on every step the engine takes by itself (both nodes' queue
pops, forward passes, send, the receiver's waiting timeout, the release
after a failed transfer); none on ``arrive``, the client's request. Beyond
that, as always, a path does not stop while some action can run.

The project is moving these properties into the incident model itself
(``sglang_disagg_v0_5_20``, inherited by 0.5.21, with the same ``started``,
``ended`` and fairness): when the base states them, this spec keeps the
base's and registers nothing; otherwise it registers them.  Either way
``bench/liveness_bench.py`` checks that the fairness and properties are the
ones ``SglangDisagg21.tla`` in this folder states.

The base lives in specs/, which is not this file's folder: it is loaded with
``load_spec`` (which runs 0.5.19 and 0.5.20 under their plain names, as
0.5.21 imports them), so the names below are the very objects its Spec uses.
"""

from pathlib import Path

from ownership import safe
from ownership.lang.loader import load_spec

base = load_spec(Path(__file__).resolve().parents[2] / "specs" / "sglang_disagg_v0_5_21.py")

from sglang_disagg_v0_5_19 import HTTP, DecodeQ, PrefillQ, own  # noqa: E402 - the modules load_spec just ran

spec = base.derive(
    "sglang_disagg_v0_5_21_live",
    summary="SGLang 0.5.21 PD disaggregation: every request is answered and its pages come back",
    expect=safe(),
)

ENGINE_STEPS = (
    "decode_pop_preallocated",
    "decode_pop_transferred",
    "decode_forward",
    "decode_finish",
    "decode_transfer_timeout",
    "prefill_pop_bootstrapped",
    "prefill_forward",
    "prefill_send",
    "prefill_transfer_failed",
)
for _action in ENGINE_STEPS:
    spec.fair(_action, "weak")


def started(s, r) -> bool:
    """The request arrived (the router sent it to both nodes: neither queue is IDLE any more)."""
    return s.p_queue[r] != PrefillQ.IDLE or s.d_queue[r] != DecodeQ.IDLE


def ended(s, r) -> bool:
    """The client has its answer: HTTP 200 streamed, or a 400 or 500."""
    return s.http[r] != HTTP.NONE


if not {"pages_return", "requests_finish"} & set(base.properties):
    own.properties(ended=ended, started=started, spec=spec)
