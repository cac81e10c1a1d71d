"""vLLM MooncakeConnector P/D prefill: a request whose transfer_id is already active is rejected before it gets blocks (PR #49796).

Written as the patch on top of ``vllm_mooncake_transfer_id_reuse_buggy``;
compare with the proposed change (vllm PR #49796, open at the time of
writing; mooncake_connector.py and its scheduler side):

* "Scheduler rejects requests whose transfer_id is already active,
  neutralizing the collision before blocks are allocated": a transfer id is
  active from the request that carries it being admitted until its
  ``finished_sending`` (a pull or the expiry sweep), and a second request
  naming it meanwhile is finished with an error, holding nothing;
* the second layer of the PR ("Worker detects overwrites and frees the old
  request's blocks as defense-in-depth") is not modelled: with the first,
  no overwrite is left for it to detect.

So every entry of ``reqs_need_send`` names the one request that holds
blocks under its transfer id (``held_requests_are_tracked``, the safety
form of the leak), and ``pages_return`` holds on every fair path: the
expiry sweep is weakly fair and frees whatever the entry names, as in the
base spec; D's pull and the clients' choice of ids stay unfair.
"""

import vllm_mooncake_transfer_id_reuse_buggy as base
from vllm_mooncake_transfer_id_reuse_buggy import Req, ReqId, Status, Xfer, XferId, abort_timeout, own, pool

from ownership import Source, require, safe

spec = base.spec.derive(
    "vllm_mooncake_transfer_id_reuse_fixed",
    summary="vLLM Mooncake P/D prefill: a request whose transfer_id is still active is rejected before it gets blocks",
    models=Source(
        "vLLM",
        "PR #49796",
        where=(
            "distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py MooncakeConnectorScheduler "
            "(active transfer ids: a duplicate is rejected before allocation)",
        ),
        links=("vllm PR #49796",),
    ),
    expect=safe(),
)


@spec.helper
def transfer_id_active(s, x):
    """FIX: some admitted request still waits for the finished_sending of transfer id x."""
    return any(s.status[o] == Status.DELAY_FREE and s.xfer_of[o] == x for o in s.all(Req))


@spec.replace
def p_prefill(s, r: ReqId, x: XferId):
    """A request with do_remote_decode and transfer_id x arrives; FIX: rejected if x is active, else as before."""
    require(s.status[r] == Status.NEW or s.status[r] == Status.FREED or s.status[r] == Status.REJECTED)
    s.xfer_of[r] = x
    if transfer_id_active(s, x):
        s.emit("reply", req=r, status=400)  # FIX: duplicate transfer_id: rejected before any block is allocated
        s.status[r] = Status.REJECTED
        return
    blocks = pool.alloc(s, r, s.params.prompt_pages)
    pool.write(s, r, blocks)
    s.send_owner[x] = r
    abort_timeout.arm(s, x)
    s.status[r] = Status.DELAY_FREE


@spec.invariant
def blocks_held_only_for_the_pull(s) -> bool:
    """A request holds its prompt's blocks while they wait for D's pull, and none before or after."""
    return all(
        pool.held(s, r) == (s.params.prompt_pages if s.status[r] == Status.DELAY_FREE else 0) for r in s.all(Req)
    )


@spec.invariant
def held_requests_are_tracked(s) -> bool:
    """FIX: a request whose blocks wait for D's pull is the one its transfer id's send entry names."""
    return all(
        s.status[r] != Status.DELAY_FREE or any(s.xfer_of[r] == x and s.send_owner[x] == r for x in s.all(Xfer))
        for r in s.all(Req)
    )


own.invariants("no_read_of_unwritten", spec=spec)  # D is sent KV the prefill wrote
