"""The other vocabulary modules' encoded operations driven directly, for the property test of the encodings.

In-flight writes freed (``InflightWrites.free``), a prefix index's choice
of an entry (``PrefixIndex._choose_node``, through eviction and alone), the
conditional write every vocabulary module uses (``_set_if``, on cells and
on a condition from the state) and a block table's choice of a free block
(``BlockTables._take_free``, through ``allocate`` and alone).  Returned
values are stored in the state.
"""

from ownership import Optional, Ownership, Spec, safe
from ownership.vocab.inflight import InflightWrites
from ownership.vocab.prefix import PrefixIndex, _set_if
from ownership.vocab.refcount import BlockTables

spec = Spec("enc_inputs_more", summary="each encoded operation outside the pool on chosen arguments", expect=safe())
spec.param("requests", 2, min=1)
spec.param("pages", 2, min=1)
Req = spec.domain("Req", "requests", symmetric=True, names="ABC")
own = Ownership(spec, requests=Req)
pool = own.pool("kv", "pages")
Page = pool.Page
writes = InflightWrites(pool, "dma")
writes.invariant()
index = PrefixIndex(pool, "trie", {"x": None, "xy": "x"})
blocks = BlockTables(spec, Req, 2, 2, name="blk")
spec.var("seen", int, per=Req, init=0, doc="what the last call returned")
spec.var("node", Optional(index.Node), per=Req, init=None, doc="the entry the last choice named")
spec.var("block", Optional(blocks.Block), per=Req, init=None, doc="the block the last choice named")
spec.var("cond", bool, per=Req, init=False, doc="the condition of the conditional write")


@spec.action
def free_with_writes(s, r: Req):
    pages = writes.free(s, r)
    s.seen[r] = len(pages)


@spec.action
def evict(s):
    index.evict_one(s)


@spec.action
def choose_node(s, r: Req):
    s.node[r] = index._choose_node(s, "any entry")


@spec.action
def set_if_cell(s, r: Req, p: Page):
    _set_if(s, s.kv_free, p, s.cond[r], s.kv_free[p] + 1)


@spec.action
def set_if_reference(s, r: Req, p: Page):
    _set_if(s, s.kv_content, p, s.cond[r], None)


@spec.action
def allocate(s, r: Req):
    s.block[r] = blocks.allocate(s, r)


@spec.action
def take_free(s, r: Req):
    s.block[r] = blocks._take_free(s)


own.invariants("no_foreign_read", "no_unowned_write", "no_double_ownership", "no_read_of_unwritten")
