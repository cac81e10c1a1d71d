"""Mooncake Store: a Get whose transfer outlasts the object's lease returns another object's data.

Models one Mooncake Store master and its clients' Get and Put of objects in
memory replicas, before Mooncake PR #778 (mooncake-store/):

* ``MasterService::GetReplicaList`` (reached by ``Client::Query``): the
  master grants the object a lease (``default_kv_lease_ttl``, 5 s at the
  time) and returns the replica descriptors: the buffers the client reads;
* ``Client::Get`` -> ``TransferRead``: the transfer engine reads those
  buffers (RDMA READ) into the client's slices and the Get returns OK;
* ``MasterService`` eviction (``BatchEvict``) and ``Remove``: an object
  whose lease has expired is no longer protected and its buffers go back to
  the allocator; the next ``PutStart`` may be given them and ``TransferWrite``
  fills them with another object.

Known bug (PR #778, "Check If Get Completed Within Lease"; issue #850, "Avoid
data corruption in slow Get"): the lease protects the object for a fixed
time, not for the duration of the transfer.  A Get delayed by the network,
a huge object or thread scheduling can still be reading when the lease runs
out; the object is evicted, its buffer reused, and the Get returns the new
object's bytes as if they were its own.  ``no_foreign_read`` fails when the
late read lands (7 steps).

Time is two :class:`~ownership.vocab.clock.Deadline` s per object, both armed
by the query: the client's own time point ``start + lease_ttl`` (which this
version of the client never looks at) and the master's lease, which can end
only after the client's time point has passed (the client takes its start
time before it asks, the master grants the lease when it answers), unless
``--param lease_starts_after_query=0``.  Simplified: one replica per object,
one buffer per object; Put is one step (PutStart, TransferWrite, PutEnd);
eviction and Remove are one action; lease renewal by a second query of the
same object is left out (a Get is not started while the previous one runs).
"""

from typing import Annotated

from ownership import Element, Enum, Ownership, Source, Spec, require, violates
from ownership.vocab.clock import Deadline
from ownership.vocab.reads import InflightReads

spec = Spec(
    "mooncake_get_outlives_lease_buggy",
    summary="Mooncake Store: a slow Get reads a buffer the master evicted and reused after the lease expired",
    models=Source(
        "Mooncake",
        "before PR #778",
        where=(
            "mooncake-store/src/master_service.cpp MasterService::GetReplicaList (GrantLease), BatchEvict, Remove",
            "mooncake-store/src/client.cpp Client::Query, Client::Get, TransferRead",
            "mooncake-store/src/client.cpp Client::Put (PutStart, TransferWrite, PutEnd)",
        ),
        links=("Mooncake PR #778", "Mooncake issue #850", "Mooncake PR #374", "Mooncake PR #3996"),
    ),
    expect=violates("no_foreign_read"),
)

spec.param("objects", 2, "object keys modelled", min=1, max=4)
spec.param("buffers", 1, "replica buffers in the mounted segments", min=1)
spec.param("lease_starts_after_query", 1,
           "1: the master's lease ends no earlier than the client's start + lease_ttl; 0: in any order", min=0, max=1)

Key = spec.domain("Key", "objects", symmetric=True, names="ABCD")
KeyId = Annotated[Element, Key]  # the type of an action argument drawn from Key
own = Ownership(spec, requests=Key)  # whose data a buffer holds: the object key's
segment = own.pool("segment", "buffers", prefix="S")
rdma = InflightReads(segment, "get", doc="a Get's TransferRead of the buffer for the object is posted, not complete")
query_deadline = Deadline(spec, "query", per=Key, doc="the client's start time + lease_ttl_ms for the object's query")
kv_lease = Deadline(spec, "kv_lease", per=Key, after="the client's start + lease_ttl passes",
                    assumed="lease_starts_after_query", doc="the master's lease on the object (GrantLease)")

Obj = Enum("Obj", "ABSENT COMPLETE")
GetS = Enum("GetS", "IDLE READING")

spec.var("obj", Obj, per=Key, init=Obj.ABSENT, doc="the object in the master's metadata")
spec.var("get", GetS, per=Key, init=GetS.IDLE, doc="a client's Get of the object")


# -- clients -------------------------------------------------------------------------------
@spec.action
def put(s, k: KeyId):
    """Client::Put: PutStart allocates a buffer, TransferWrite fills it, PutEnd completes the object."""
    require(s.obj[k] == Obj.ABSENT)
    buf = segment.alloc(s, k, 1)  # not enabled while the segments are full
    segment.write(s, k, buf)
    s.obj[k] = Obj.COMPLETE


@spec.action
def get_start(s, k: KeyId):
    """Client::Query (GetReplicaList grants the lease), then Get submits TransferRead of the replica's buffer."""
    require(s.obj[k] == Obj.COMPLETE and s.get[k] == GetS.IDLE)
    kv_lease.arm(s, k)  # GrantLease(default_kv_lease_ttl)
    query_deadline.arm(s, k)  # the client's own clock: start + lease_ttl
    rdma.post(s, k)  # the replica descriptor names the buffer
    s.get[k] = GetS.READING


@spec.action
def get_done(s, k: KeyId):
    """TransferRead completes and Get returns OK with what the buffer holds now."""
    require(s.get[k] == GetS.READING)
    rdma.land(s, k)
    s.get[k] = GetS.IDLE


# -- time ------------------------------------------------------------------------------------
@spec.action
def client_deadline_passes(s, k: KeyId):
    """The client's start + lease_ttl passes; from now on the master's lease may end too."""
    query_deadline.fire(s, k)
    kv_lease.allow(s, k)


@spec.action
def lease_expires(s, k: KeyId):
    """The master's lease on the object runs out: it is no longer protected from eviction."""
    kv_lease.fire(s, k)


# -- master ----------------------------------------------------------------------------------
@spec.action
def evict(s, k: KeyId):
    """BatchEvict (or Remove) of an object without a live lease: its buffer returns to the allocator."""
    require(s.obj[k] == Obj.COMPLETE and not kv_lease.running(s, k))
    rdma.free(s, k)  # a Get that outlived the lease may still be reading it
    s.obj[k] = Obj.ABSENT


own.invariants("no_foreign_read", "no_read_of_unwritten", "no_double_ownership")
