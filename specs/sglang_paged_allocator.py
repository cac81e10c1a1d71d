"""SGLang paged KV allocator with the radix prefix cache: who owns each page.

Models SGLang 0.5.23 (python/sglang/srt/):

* ``mem_cache/allocator/paged.py`` ``PagedTokenToKVPoolAllocator``: the free
  list ``free_pages`` (page 0 is the padding page and is never handed out);
  ``alloc(need_size)`` takes pages off the free list or returns ``None`` when
  too few are free; ``free(free_index)`` / ``free_segment`` put pages back.
  The free list is a tensor: nothing stops a page from being in it twice.
  Only with ``SGLANG_DEBUG_MEMORY_POOL=1`` does ``free`` check for duplicates,
  *after* putting the pages back;
* ``mem_cache/radix_cache.py`` ``RadixCache``: ``match_prefix`` finds the
  longest cached page-aligned prefix (splitting a node when the match ends
  inside it), ``inc_lock_ref``/``dec_lock_ref`` pin and unpin the path from a
  node to the root, ``insert`` adds a key and returns the length that was
  already cached, ``evict`` frees unlocked leaves, least recently used first;
* ``mem_cache/common.py`` ``release_kv_cache``: with ``checkpoint`` the tree
  first takes the request's pages (``RadixCache.checkpoint`` ->
  ``_insert_cache``: insert, then ``free_segment`` the request's copies of
  pages the tree already had, ``kv_indices[cache_protected_len:prefix_len]``),
  then the row's unprotected rest is freed (``free_kv_row``) and the lock is
  released (``unlock`` -> ``dec_lock_ref``);
* the scheduler's admission (``PrefillAdder.add_one_req``,
  ``alloc_for_extend``): match the prompt, lock the matched node, allocate
  the rest.

The model counts in pages.  Prompts are two pages long and come from a fixed
table that shares the first page: ``XY`` and ``XZ``.  The radix tree is
modelled per page, as the trie of page prefixes ``X``, ``XY``, ``XZ``
(nodes N_X, N_XY, N_XZ); a real tree node may span several pages, which
matters for eviction (a node is evicted whole), so ``joined`` records when
N_XY or N_XZ shares one tree node with N_X.

Simplified: one request row per request (``ReqToTokenPool``), page-aligned
prompts, no decode tokens, no partial pages, no HiCache, no priorities, no
``cache_salt``/``extra_key``; the whole prompt may be a prefix hit (the
scheduler caps it one token short); eviction may pick any unlocked leaf (a
superset of least recently used); the allocator may hand out any free pages
(a superset of the ``free_pages`` order).

Expected: safe.  Every page is in exactly one place (the free list, the
tree, or one request's row), a request's cached prefix stays in the tree
while it runs, and lock counts match the running requests.
"""

from typing import Annotated

from ownership import Element, Enum, Int, Optional, Source, Spec, require, safe

spec = Spec(
    "sglang_paged_allocator",
    summary="SGLang paged allocator + radix cache: page ownership across prefix hits, release and eviction",
    models=Source(
        "SGLang",
        "0.5.23",
        where=(
            "srt/mem_cache/allocator/paged.py PagedTokenToKVPoolAllocator.alloc, free, free_segment",
            "srt/mem_cache/radix_cache.py RadixCache.match_prefix, insert, _insert_cache, checkpoint, evict, "
            "inc_lock_ref, dec_lock_ref, _split_node",
            "srt/mem_cache/common.py release_kv_cache",
        ),
    ),
    expect=safe(),
)

spec.param("requests", 2, "concurrent requests (ReqToTokenPool rows)", min=1, max=3)
spec.param("pages", 3, "KV pool size in pages (allocator size = pages * page_size tokens)", min=1, max=5)

# The prompt table: prompt k's page d is the trie node NODE_OF[k][d].
PROMPT_PAGES = 2
N_X, N_XY, N_XZ = 0, 1, 2
NODE_OF = ((N_X, N_XY), (N_X, N_XZ))

Req = spec.domain("Req", "requests", symmetric=True, names="ABC")
ReqId = Annotated[Element, Req]  # the type of an action argument drawn from Req
Page = spec.domain(
    "Page",
    "pages",
    symmetric=True,
    names=lambda i: f"P{i + 1}",
    doc="KV pages; page_id = index + 1 (page 0 is the padding page)",
)
Slot = spec.domain("Slot", lambda p: PROMPT_PAGES, names=lambda i: f"s{i}", doc="page slots of a request row")
Node = spec.domain("Node", lambda p: 3, names=["N_X", "N_XY", "N_XZ"], doc="radix tree nodes, one per page prefix")

Prompt = spec.domain("Prompt", lambda p: len(NODE_OF), names=["XY", "XZ"], doc="prompts; XY and XZ share page X")
PromptId = Annotated[int, Prompt]  # the type of an action argument drawn from Prompt
XY, XZ = 0, 1
Phase = Enum("Phase", "IDLE RUNNING")

spec.var("free", Int, per=Page, init=1, doc="times the page is in allocator.free_pages (2 = freed twice)")
spec.var("row", Optional(Page), per=(Req, Slot), init=None, doc="req_to_token row of the request, per page slot")
spec.var("phase", Phase, per=Req, init=Phase.IDLE, doc="IDLE, or RUNNING between admission and release")
spec.var("prompt", Prompt, per=Req, init=XY, doc="the running request's prompt")
spec.var("protected", Int, per=Req, init=0, doc="req.kv.cache_protected_len, in pages: the prefix the tree owns")
spec.var("last_node", Optional(Node), per=Req, init=None, doc="req.last_node, the locked node (None: the root)")
spec.var("value", Optional(Page), per=Node, init=None, doc="TreeNode.value: the node's KV page (None: not cached)")
spec.var("lock_ref", Int, per=Node, init=0, doc="TreeNode.lock_ref")
spec.var(
    "joined", bool, per=Node, init=False, doc="N_XY/N_XZ is one tree node with N_X (inserted together, never split)"
)


def parent(n: int) -> int | None:
    """TreeNode.parent in the page trie (None: the root)."""
    return None if n == N_X else N_X


def cached(s, n: int) -> bool:
    """The node holds KV (not evicted)."""
    return s.value[n] != None  # noqa: E711


# -- PagedTokenToKVPoolAllocator ----------------------------------------------------
def available_pages(s) -> int:
    """available_size() // page_size: the length of free_pages, duplicates included."""
    return sum(s.free[p] for p in s.all(Page))


def alloc(s, n: int) -> list[int]:
    """alloc(n * page_size): n pages off free_pages (the caller checked there are enough)."""
    taken: list[int] = []
    for i in range(n):
        options = [p for p in s.all(Page) if s.free[p] > 0 and p not in taken]
        p = s.choose(options, label=f"page for new slot {i}", domain=Page)
        s.free[p] -= 1
        taken.append(p)
    return taken


def free(s, page: int) -> None:
    """free(indices of page): the page goes back on free_pages (no ownership check)."""
    s.free[page] += 1


# -- RadixCache -----------------------------------------------------------------------
def split_at_x(s, prompt: int) -> None:
    """_split_node: a match or insert of ``prompt`` that leaves a joined node splits it after X."""
    for n in (N_XY, N_XZ):
        if s.joined[n] and n != NODE_OF[prompt][1]:
            s.joined[n] = False


def match_prefix(s, prompt: int) -> tuple[list[int], int | None]:
    """match_prefix: the cached pages of the prompt's longest cached prefix, and its last node."""
    pages: list[int] = []
    last = None
    for d in range(PROMPT_PAGES):
        n = NODE_OF[prompt][d]
        if not cached(s, n):
            break
        pages.append(s.value[n])
        last = n
    if pages:
        split_at_x(s, prompt)
    return pages, last


def inc_lock_ref(s, node: int | None) -> None:
    """inc_lock_ref: +1 on every node from ``node`` up to the root."""
    while node is not None:
        s.lock_ref[node] += 1
        node = parent(node)


def dec_lock_ref(s, node: int | None) -> None:
    """dec_lock_ref: -1 on every node from ``node`` up to the root (no check for 0)."""
    while node is not None:
        s.lock_ref[node] -= 1
        node = parent(node)


def insert(s, r: ReqId) -> int:
    """insert(key=prompt, value=row): new nodes take the row's pages; returns the cached prefix length."""
    prompt = s.prompt[r]
    prefix_len = 0
    created: list[int] = []
    for d in range(PROMPT_PAGES):
        n = NODE_OF[prompt][d]
        if cached(s, n):
            prefix_len = d + 1
        else:
            s.value[n] = s.row[r, d]
            created.append(n)
    if prefix_len > 0:
        split_at_x(s, prompt)
    if created == list(NODE_OF[prompt]):
        s.joined[NODE_OF[prompt][1]] = True  # one new node holds the whole key
    return prefix_len


def evictable_leaves(s) -> list[int]:
    """evictable_leaves: cached, unlocked tree nodes without cached children (a joined pair is one node)."""
    leaves = []
    for n in s.all(Node):
        if not cached(s, n) or s.lock_ref[n] != 0:
            continue
        if any(cached(s, c) and parent(c) == n for c in s.all(Node)):
            continue
        leaves.append(n)
    return leaves


# -- the scheduler and release_kv_cache -------------------------------------------------
@spec.action
def admit(s, r: ReqId, prompt: PromptId):
    """PrefillAdder.add_one_req + alloc_for_extend: match, lock the prefix, allocate the rest."""
    require(s.phase[r] == Phase.IDLE)
    prefix, last = match_prefix(s, prompt)
    require(available_pages(s) >= PROMPT_PAGES - len(prefix))  # else alloc returns None: the request waits
    inc_lock_ref(s, last)
    new = alloc(s, PROMPT_PAGES - len(prefix))
    for d, page in enumerate(prefix + new):
        s.row[r, d] = page
    s.prompt[r] = prompt
    s.protected[r] = len(prefix)
    s.last_node[r] = last
    s.phase[r] = Phase.RUNNING


@spec.action
def release_with_checkpoint(s, r: ReqId):
    """release_kv_cache(checkpoint=True): the tree keeps the prompt; duplicates are freed; unlock."""
    require(s.phase[r] == Phase.RUNNING)
    prefix_len = insert(s, r)  # RadixCache.checkpoint -> _insert_cache
    for d in range(s.protected[r], prefix_len):
        free(s, s.row[r, d])  # free_segment(kv_indices[cache_protected_len:prefix_len])
    dec_lock_ref(s, s.last_node[r])  # unlock(req.lock)
    for d in s.all(Slot):
        s.row[r, d] = None  # the tree owns the whole row now; req_to_token_pool.free(req)
    s.protected[r] = 0
    s.last_node[r] = None
    s.phase[r] = Phase.IDLE


@spec.action
def release_without_checkpoint(s, r: ReqId):
    """release_kv_cache(checkpoint=False): free the row past the protected prefix, unlock (abort path)."""
    require(s.phase[r] == Phase.RUNNING)
    for d in s.all(Slot):
        if d >= s.protected[r]:
            free(s, s.row[r, d])  # free_kv_row(req.kv, [(cache_protected_len, owned_kv_len)])
    dec_lock_ref(s, s.last_node[r])
    for d in s.all(Slot):
        s.row[r, d] = None
    s.protected[r] = 0
    s.last_node[r] = None
    s.phase[r] = Phase.IDLE


@spec.action
def evict(s):
    """RadixCache.evict(page_size tokens): free one unlocked leaf node (a joined pair at once)."""
    leaf = s.choose(evictable_leaves(s), label="leaf evicted (least recently used)", domain=Node)
    victims = [leaf, N_X] if s.joined[leaf] else [leaf]
    for n in victims:
        free(s, s.value[n])  # free_segment(x.value) + _delete_leaf
        s.value[n] = None
        s.joined[n] = False


# -- invariants -------------------------------------------------------------------------
def owners(s, page: int) -> int:
    """How many places hold ``page``: free-list entries, tree nodes, unprotected row slots."""
    count = s.free[page]
    count += sum(1 for n in s.all(Node) if s.value[n] == page)
    for r in s.all(Req):
        for d in s.all(Slot):
            if d >= s.protected[r] and s.row[r, d] == page:
                count += 1
    return count


@spec.invariant
def every_page_in_one_place(s) -> bool:
    """Every page is in exactly one place: the free list, the radix tree, or one request's own row."""
    return all(owners(s, p) == 1 for p in s.all(Page))


@spec.invariant
def running_prefix_stays_cached(s) -> bool:
    """A running request's cached prefix is still in the tree, on the pages its row points to."""
    for r in s.all(Req):
        if s.phase[r] != Phase.RUNNING:
            continue
        for d in s.all(Slot):
            if d < s.protected[r] and s.value[NODE_OF[s.prompt[r]][d]] != s.row[r, d]:
                return False
    return True


@spec.invariant
def lock_ref_counts_running_requests(s) -> bool:
    """Each node's lock_ref is the number of running requests whose locked path runs through it."""
    for n in s.all(Node):
        holders = 0
        for r in s.all(Req):
            node = s.last_node[r]
            while node is not None:
                if node == n:
                    holders += 1
                node = parent(node)
        if s.lock_ref[n] != holders:
            return False
    return True
