"""Mooncake Store: a Get that did not complete within its lease is refused (PR #778).

Written as the patch on top of ``mooncake_get_outlives_lease_buggy``;
compare with the upstream change (mooncake-store/):

* ``Client::Query`` returns a ``QueryResult``: the replica descriptors and
  ``lease_timeout``, the client's time point ``start + lease_ttl_ms``;
* ``Client::Get(key, query_result, slices)``: after ``TransferRead``
  completes, ``if (query_result.IsLeaseExpired())`` the Get fails with
  ``LEASE_EXPIRED`` and the caller drops what was read instead of using it.

The fix does not stop the master from evicting a buffer under a slow read
(``evict`` still frees it with the read in flight); it makes the client
refuse data read past a time point at which the object was still protected.
That is sound only if the client's time point comes no later than the end
of the master's lease: with ``--param lease_starts_after_query=0`` the lease
may end first and the check finds the foreign read again (6 steps: the
lease ends while the client's time point has not passed).  The same check was later found missing on the grouped
``BatchGet`` path (PR #3996).

Besides the base spec's invariants the fix is checked for what a Get
promises its caller: it returns (data or ``LEASE_EXPIRED``) only once its
TransferRead has completed, and every Get returns
(``reads_outstanding_exactly_while_getting``; the terminal predicate
``no_get_in_flight`` lets a check see a Get that never returns).

Expected: safe at every size the explorer can cover; ``ownership prove``
proves it for executions of any length.
"""

import mooncake_get_outlives_lease_buggy as base
from mooncake_get_outlives_lease_buggy import GetS, Key, KeyId, query_deadline, rdma

from ownership import Source, require, safe

spec = base.spec.derive(
    "mooncake_get_outlives_lease_fixed",
    summary="Mooncake Store: Get returns LEASE_EXPIRED instead of data read after the query's lease time",
    models=Source(
        "Mooncake",
        "PR #778",
        where=(
            "mooncake-store/include/client.h QueryResult (lease_timeout, IsLeaseExpired)",
            "mooncake-store/src/client.cpp Client::Query, Client::Get (LEASE_EXPIRED after TransferRead)",
        ),
        links=("Mooncake PR #778", "Mooncake issue #850", "Mooncake PR #3996"),
    ),
    expect=safe(),
)


@spec.replace
def get_done(s, k: KeyId):
    """TransferRead completes; FIX: past query_result.lease_timeout the Get fails with LEASE_EXPIRED."""
    require(s.get[k] == GetS.READING)
    if query_deadline.expired(s, k):
        rdma.discard(s, k)  # FIX: LEASE_EXPIRED: the bytes read are not returned
    else:
        rdma.land(s, k)
    s.get[k] = GetS.IDLE


@spec.terminal
def no_get_in_flight(s) -> bool:
    """No Get is running: every TransferRead has completed and its Get returned."""
    return all(s.get[k] == GetS.IDLE for k in s.all(Key))


@spec.invariant
def reads_outstanding_exactly_while_getting(s) -> bool:
    """A Get's TransferRead is outstanding exactly while the Get runs: it returns only after its read completed.

    Whether the bytes are kept (OK) or dropped (LEASE_EXPIRED), the read itself
    has ended when Get returns; a read left posted after it would land later
    into slices the caller already owns again.
    """
    return all((s.get[k] == GetS.READING) == (not rdma.drained(s, k)) for k in s.all(Key))
