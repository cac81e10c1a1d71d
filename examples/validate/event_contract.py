"""The event-log contract as a spec: pages held by requests, their content keys, the prefix cache.

``docs/event-log.md`` says what each logged event means; this spec says the
same with actions, and its guards are the contract's online checks, so
``ownership validate examples/validate/event_contract.py run.jsonl`` re-checks
a recorded run independently of the monitor that wrote it (the same answer,
located at the same line, from a different implementation):

* ``alloc`` takes a page nobody holds (``no_double_alloc``); its old content
  is stale and its cache entry evicted;
* ``share`` takes one more reference to a page cached under exactly the
  logged key (``no_wrong_cache_hit``);
* ``write`` needs the page held by the writer alone (``no_unowned_access``,
  ``no_write_to_shared``) and, if published, writes the published key;
* ``cache`` publishes a held page under a key: its KV may still be partial
  (vLLM's scheduler caches a block once its tokens are scheduled, before
  the forward pass writes them; a partial page's key is not the full one's);
* ``transfer`` copies a held page's content into another held page;
* ``read`` needs the page held and holding the expected key
  (``no_foreign_read``: stale, overwritten or never written content fails);
* ``free`` drops a reference the request has (``no_foreign_free``);
* ``finish`` needs the request to hold nothing (``no_leak_at_finish``).

Any holder is a request, the engine's own structures included (SGLang's
radix tree holds the pages it caches under the id ``radix-tree``).  One node
(KV pool) per log; a log's requests and content keys bind to elements when
first seen, so ``requests`` and ``keys`` bound how many are live at once
(``--param requests=N``).  Nothing runs unlogged: every action is an event.

This is not a model of an engine: ``specs/vllm_block_pool.py`` (the free
queue's order, the hash table) and ``specs/sglang_paged_allocator.py`` are.
The SGLang allocator spec models prompts of two pages from a fixed table, so
it cannot explain a real run's events; this spec can.
"""

from typing import Annotated

from ownership import Element, Int, Optional, Spec, require, safe

spec = Spec(
    "event_contract",
    summary="the ownership event-log contract: references, content keys and the prefix cache of one KV pool",
    expect=safe(),
)

spec.param("requests", 2, "requests (holders) live at once", min=1, max=256)
spec.param("pages", 2, "usable pages of the node", min=1, max=4096)
spec.param("keys", 2, "content keys live at once", min=1, max=4096)
spec.param("max_refs", 2, "most references one request holds on one page (keeps a check finite)", min=1, max=4096)

Req = spec.domain("Req", "requests", symmetric=True, names=lambda i: f"R{i}", doc="request ids (holders)")
Page = spec.domain("Page", "pages", symmetric=True, names=lambda i: f"P{i + 1}", doc="usable pages, id = index + 1")
Key = spec.domain("Key", "keys", symmetric=True, names=lambda i: f"k{i}", doc="content keys")
ReqId = Annotated[Element, Req]
PageId = Annotated[Element, Page]
KeyId = Annotated[Element, Key]

spec.var("refs", Int, per=(Req, Page), init=0, doc="references the request holds on the page")
spec.var("content", Optional(Key), per=Page, init=None, doc="the key of the KV the page holds (None: nothing valid)")
spec.var("cached", Optional(Key), per=Page, init=None, doc="the prefix-cache entry of the page (None: not cached)")


def holders(s, p) -> int:
    """How many requests hold ``p``."""
    return sum(1 for r in s.all(Req) if s.refs[r, p] > 0)


@spec.action
def alloc(s, r: ReqId, p: PageId):
    """alloc: a page nobody holds; its old content is stale and its cache entry goes."""
    require(holders(s, p) == 0)  # no_double_alloc
    s.refs[r, p] = 1
    s.content[p] = None
    s.cached[p] = None


@spec.action
def share(s, r: ReqId, p: PageId, k: KeyId):
    """share: a cache hit takes one more reference to a page cached under exactly this key."""
    require(s.cached[p] == k)  # no_wrong_cache_hit
    require(s.refs[r, p] < s.params.max_refs)  # a bound of the model, not of the contract
    s.refs[r, p] += 1


@spec.action
def write(s, r: ReqId, p: PageId, k: KeyId):
    """write: the sole holder writes its KV; the page's content becomes the key."""
    require(s.refs[r, p] > 0)  # no_unowned_access
    require(holders(s, p) == 1)  # no_write_to_shared
    require(s.cached[p] == None or s.cached[p] == k)  # noqa: E711 - published KV is only the published key's
    s.content[p] = k


@spec.action
def cache(s, r: ReqId, p: PageId, k: KeyId):
    """cache: a held page is published under a key (its KV may still be partial or unwritten: vLLM publishes
    a full block when it is scheduled, before the forward pass writes its last tokens)."""
    require(s.refs[r, p] > 0)
    s.cached[p] = k


@spec.action
def transfer(s, r: ReqId, p: PageId, src: PageId):
    """transfer: KV copied from a held page into another held, unpublished page."""
    require(s.refs[r, p] > 0 and s.refs[r, src] > 0)  # no_unowned_access
    require(holders(s, p) == 1)  # no_write_to_shared
    require(s.cached[p] == None)  # noqa: E711
    require(s.content[src] != None)  # noqa: E711 - copying nothing is no transfer
    s.content[p] = s.content[src]


@spec.action
def read(s, r: ReqId, p: PageId, k: KeyId):
    """read: attention reads a held page expecting this key."""
    require(s.refs[r, p] > 0)  # no_unowned_access
    require(s.content[p] == k)  # no_foreign_read


@spec.action
def free(s, r: ReqId, p: PageId):
    """free: the request drops one of its references."""
    require(s.refs[r, p] > 0)  # no_foreign_free
    s.refs[r, p] -= 1


@spec.invariant
def shared_pages_are_published(s) -> bool:
    """A page two requests hold is in the prefix cache (a second reference is only ever a cache hit)."""
    return all(holders(s, p) < 2 or s.cached[p] != None for p in s.all(Page))  # noqa: E711


@spec.invariant
def refs_never_negative(s) -> bool:
    """No reference count below zero."""
    return all(s.refs[r, p] >= 0 for r in s.all(Req) for p in s.all(Page))


# -- reading logs ----------------------------------------------------------------------------------
# Every live key is some page's content or cache entry, plus the event's own: 2 * usable + 1.
# A header does not say how many requests run at once: 16, or --param requests=N.
spec.log_ids(pages=Page, req=Req, content=Key,
             params=lambda node: {"pages": node.usable, "keys": 2 * node.usable + 1, "requests": 16, "max_refs": 4096},
             internal=())
spec.logs("alloc", "alloc", per_page=True, args={"r": "req", "p": "page"}, changes="refs")
spec.logs("share", "share", per_page=True, args={"r": "req", "p": "page", "k": "content"})
spec.logs("write", "write", per_page=True, args={"r": "req", "p": "page", "k": "content"})
spec.logs("cache", "cache", per_page=True, args={"r": "req", "p": "page", "k": "content"})
spec.logs("transfer", "transfer", per_page=True, args={"r": "req", "p": "page", "src": "src_page"},
          where=lambda s, e: s.content[e.page] == e.content)
spec.logs("read", "read", per_page=True, args={"r": "req", "p": "page", "k": "content"})
spec.logs("free", "free", per_page=True, args={"r": "req", "p": "page"})
spec.logs("finish", where=lambda s, e: all(s.refs[e.req, p] == 0 for p in s.all(Page)))  # no_leak_at_finish
