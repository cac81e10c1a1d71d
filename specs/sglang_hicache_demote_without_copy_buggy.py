"""SGLang HiCache write-back eviction before PR #27108: a node is demoted although its host backup failed.

Models ``python/sglang/srt/mem_cache/unified_radix_cache.py``
(``UnifiedRadixCache``) with ``--enable-hierarchical-cache
--hicache-write-policy write_back``: a radix node's KV lives in device (GPU)
pages and, once backed up, in host (CPU) pages; the tree is the index.

* ``_evict_device_leaf``: a device leaf that is not ``backuped`` is first
  backed up (``write_backup(node, write_back=True)``, then
  ``writing_check(write_back=True)`` waits for the D->H copy), then demoted by
  ``_evict_to_host``: its device pages are freed and the node stays in the
  tree as an evicted node, to be served from host;
* ``write_backup``: if the host pool is short, ``evict_host`` frees host
  leaves that no operation holds (``host_lock_ref == 0``); the host pages are
  allocated by ``cache_controller.write(...)`` and committed to
  ``node.host_value``; when allocation fails it returns 0 and commits
  nothing;
* ``load_back`` (a later request matching the prefix): copies the host pages
  ``host_value`` names back to device; the request then attends over them;
* ``write_backup_storage`` (L3): holds ``host_lock_ref`` on the node while the
  storage backend reads its host pages.

The bug (SGLang PR #27108, part 1): ``_evict_device_leaf`` ignores
``write_backup``'s result.  When most host pages are locked, allocation fails,
nothing is committed, and ``_evict_to_host`` still frees the node's device
pages: the only copy of its KV is gone while the tree still serves the node
from host.  Upstream, ``_evict_to_host`` asserts ``node.backuped`` and the
scheduler crashes there ("eviction crash"); without that assertion a later hit
loads back a host copy that does not exist.  The model keeps going past the
demotion (``demote`` records the loss) so the consequence is visible: the
next hit's load-back reads the host copy the index claims, and finds none.

Simplified: one page per node, nodes are independent prefixes (no parent
chain); ``writing_check`` is folded into ``write_backup`` (the copy is atomic);
host eviction picks any unlocked host leaf (every LRU order); the L3 backup
is reduced to the host lock it holds.  Load-back under write-back keeps the
host copy, as upstream.
"""

from typing import Annotated

from ownership import Element, Ownership, Source, Spec, require, violates
from ownership.vocab.refcount import all_of
from ownership.vocab.tiers import Tiers

spec = Spec(
    "sglang_hicache_demote_without_copy_buggy",
    summary="SGLang HiCache write_back: evicting a node whose host backup failed drops its only copy",
    models=Source(
        "SGLang",
        "0.5.12",
        where=(
            "mem_cache/unified_radix_cache.py UnifiedRadixCache._evict_device_leaf, _evict_to_host",
            "mem_cache/unified_radix_cache.py UnifiedRadixCache.write_backup, evict_host, load_back",
        ),
        links=("sglang PR #27108", "sglang PR #27865 (cherry-pick to release/v0.5.13)"),
    ),
    expect=violates("tier_read_matches_index"),
)

spec.param("nodes", 2, "radix tree nodes (one page of KV each)", min=1, max=4)
spec.param("device_pages", 2, "device (GPU) KV pages", min=1)
spec.param("host_pages", 1, "host (CPU) KV pages (--hicache-size)", min=1)

Node = spec.domain("Node", "nodes", symmetric=True, names="ABCD")
NodeId = Annotated[Element, Node]  # the type of an action argument drawn from Node
own = Ownership(spec, requests=Node)
device = own.pool("device", "device_pages", prefix="D")
host = own.pool("host", "host_pages", prefix="H")
tiers = Tiers(own, device, host)

spec.var("in_tree", bool, per=Node, init=False, doc="the node is in the radix tree")
spec.var("evicted", bool, per=Node, init=False, doc="node.evicted: no device value, served from host")
spec.var("host_lock_ref", int, per=Node, init=0, doc="host_lock_ref: an L3 backup is reading the node's host pages")


def evict_host(s) -> None:
    """evict_host: free one host leaf (evicted, backed up, host_lock_ref == 0) and delete it."""
    victims = [m for m in s.all(Node) if all_of(s.evicted[m], tiers.holds(s, m, host), s.host_lock_ref[m] == 0)]
    if not victims:
        return
    m = s.choose(victims, label="host leaf to evict", domain=Node)
    tiers.drop(s, m, host)
    s.in_tree[m] = False
    s.evicted[m] = False


def write_backup(s, n) -> bool:
    """write_backup(write_back=True): make host room, copy D->H and commit host_value; false if that failed."""
    if host.available(s) < tiers.count(s, n, device):
        evict_host(s)
    return tiers.copy(s, n, device, host)


def evict_to_host(s, n) -> None:
    """_evict_to_host: free the device pages; the node stays in the tree, served from host."""
    tiers.demote(s, n, device, host)
    s.evicted[n] = True


@spec.action
def cache_finished_req(s, n: NodeId):
    """cache_finished_req / insert: a finished request's prefix joins the tree with its device KV."""
    require(not s.in_tree[n])
    device.write(s, n, device.alloc(s, n, 1))
    s.in_tree[n] = True


@spec.action
def evict_device_leaf(s, n: NodeId):
    """_evict_device_leaf (write_back): back up, then demote to host (BUG: even if the backup failed)."""
    require(s.in_tree[n] and not s.evicted[n])
    if not tiers.holds(s, n, host):  # not node.backuped
        write_backup(s, n)  # BUG: returns 0 when host allocation fails; ignored
    evict_to_host(s, n)


@spec.action
def match_prefix(s, n: NodeId):
    """A request matches n's prefix: load_back from host if evicted, then attention reads n's device KV."""
    require(s.in_tree[n])
    if s.evicted[n]:
        if not tiers.copy(s, n, host, device):  # load_back (H->D); the host copy is kept
            return
        s.evicted[n] = False
    tiers.read(s, n, device)


@spec.action
def backup_storage(s, n: NodeId):
    """write_backup_storage: an L3 backup starts reading n's host pages (inc_host_lock_ref)."""
    require(s.in_tree[n] and s.host_lock_ref[n] == 0 and tiers.holds(s, n, host))
    tiers.read(s, n, host)
    s.host_lock_ref[n] += 1


@spec.action
def backup_storage_done(s, n: NodeId):
    """The L3 backup is acknowledged (dec_host_lock_ref)."""
    require(s.host_lock_ref[n] > 0)
    s.host_lock_ref[n] -= 1


tiers.invariants("tier_read_matches_index")
