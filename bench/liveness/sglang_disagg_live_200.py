"""The verdict cross-check of bench/liveness_bench.py: a temporal property that must be broken.

``sglang_disagg_live`` with one more property per request,
``every_request_gets_200``: ``started(r) ~> http[r] = 200``.  It is false: a
prompt at or over a node's limit is answered 400 (0.5.21 retires it at the
door), and a transfer that times out is answered 400 too; a fair path then
ends with that request never streamed a 200.  Both the explorer and TLC
(``EveryRequestGets200`` in ``SglangDisagg21.tla``) must report it broken.
"""

import sglang_disagg_live as live
from sglang_disagg_v0_5_19 import HTTP, Req

from ownership import violates

spec = live.spec.derive(
    "sglang_disagg_v0_5_21_live_200",
    summary="every request streamed a 200: broken by any rejected or timed-out request",
    expect=violates("every_request_gets_200"),
)


def got_200(s, r) -> bool:
    """The client was streamed HTTP 200."""
    return s.http[r] == HTTP.OK_200


spec.leads_to(live.started, got_200, each=Req, name="every_request_gets_200")
