"""From a deployment's real numbers to the parameters of the library spec, with the page size scaled.

**Admission limits.**  An SGLang node rejects a prompt of at least
``max_req_input_len`` tokens (``managers/utils.py validate_input_length``).
The server-info JSON reports that number; from a log it is computed the way
the scheduler's worker computes it, ``min(context_len - 1,
max_total_num_tokens - 1) - 5`` (``managers/tp_worker.py get_worker_info``:
0.5.20 tp_worker.py:543-556, 0.5.21 :544-548, 0.5.23 :568-572; the
``dllm`` block reserve and decode context parallelism are not read).  The
spec's limits are ``min(context_len - 1, prefill_pool_tokens - 1)`` and
``min(context_len - 1, decode_pool_tokens - 1)``; preflight sets
``context_len = max(Lp, Ld) + 1``, ``prefill_pool_tokens = Lp + 1`` and
``decode_pool_tokens = Ld + 1`` for the real limits ``Lp`` and ``Ld``, so
the spec's two limits *are* the deployment's, and ``prompt_tokens`` is
measured in real tokens.

**Why the page size may be scaled.**  The spec reads token counts in two ways
only: (1) comparisons of a prompt length with the two limits (``arrive``)
and of an input length with the prefill pool (``prefill_pop_bootstrapped``),
none of which involve the page size; and (2) page counts, ``ceil(n /
page_size)``, of the one-token placeholder, the short prompt, the long
prompt and the pools.  So the scaled instance rejects and admits exactly the
same prompt lengths on each node.  What page counts decide is whether a
prompt that prefill replaced with the placeholder (one page sent) but decode
admitted makes decode reserve a page the transfer never writes: that needs
``ceil(L / page_size) >= 2``.  Every such ``L`` is at least ``min(Lp, Ld)``;
at a real page size below ``min(Lp, Ld)`` (64 against limits of hundreds of
thousands in practice) that holds, and the scaled page size ``S`` is chosen
below ``min(Lp, Ld)`` so it holds for the same lengths.  A prompt admitted by both nodes
writes every page it reserves at any page size.  Each pool still holds one
prompt of any length its node admits (its tokens exceed its limit), which is
all the leaking interleaving needs (the earlier request finishes before the
long one reserves).  What scaling does not preserve is how many requests'
pages fit in a pool *at once*; the spec's verdict does not turn on it, and
``tests/test_preflight.py`` checks the claim where both sizes can be explored:
the scaled verdict and leaking range equal the unscaled ones.

``S`` is the real page size when that keeps every pool within
:data:`MAX_PAGES` pages or when the real page size is not below both limits
(then it decides by itself which rejected prompts span two pages: at page
size 4 and ``Lp = 4`` a 4-token prompt fits one page and does not leak),
else ``min(ceil(max pool / MAX_PAGES), min(Lp, Ld) - 1)``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ownership.preflight.readers import NodeConfig

#: Pages of the largest pool in the scaled instance (4 keeps an incident-sized check to seconds).
MAX_PAGES = 4
#: Tokens the scheduler keeps back from ``max_req_len`` (``max_req_input_len = max_req_len - 5``).
INPUT_RESERVE = 5


@dataclass(frozen=True)
class Limit:
    """A node's admission limit in tokens and how it was obtained."""

    tokens: int
    how: str

    @staticmethod
    def of(node: NodeConfig, context_len: int | None = None) -> Limit:
        """The node's ``max_req_input_len``, at its own context length or at ``context_len``."""
        ctx = node.context_len if context_len is None else context_len
        computed = min(ctx - 1, node.pool_tokens - 1) - INPUT_RESERVE
        if node.max_req_input_len is not None and context_len is None:
            return Limit(node.max_req_input_len, f"max_req_input_len {node.max_req_input_len:,} "
                         f"({node.where('max_req_input_len')})")
        if node.max_req_input_len is not None:  # the reserve the node reported, applied at the new context
            reserve = min(node.context_len - 1, node.pool_tokens - 1) - node.max_req_input_len
            computed = min(ctx - 1, node.pool_tokens - 1) - reserve
        where = sorted({node.where("context_len"), node.where("max_total_num_tokens")})
        return Limit(computed, f"min(context_len {ctx:,} - 1, max_total_num_tokens {node.pool_tokens:,} - 1) - "
                     f"{INPUT_RESERVE} = {computed:,} ({', '.join(where)})")


@dataclass(frozen=True)
class Mapped:
    """The spec parameters for a deployment (``prompt_tokens`` left free) and the scaling applied."""

    params: dict[str, int]
    real_page_size: int
    page_size: int

    @property
    def pages(self) -> tuple[int, int]:
        """Pages of the scaled prefill and decode pools."""
        s = self.page_size
        return -(-self.params["prefill_pool_tokens"] // s), -(-self.params["decode_pool_tokens"] // s)


def scaled_page_size(real: int, lp: int, ld: int, max_pages: int = MAX_PAGES) -> int:
    """The page size of the checked instance (see the module docstring for why it may differ from ``real``).

    Scaled only when the real page size is below both limits: then every
    prompt either node rejects spans at least two pages at both sizes.  A
    real page at least as large as a limit decides by itself which prompts
    span two pages, so it is kept, however many pages that makes.
    """
    largest = max(lp, ld) + 1
    if -(-largest // real) <= max_pages or real >= min(lp, ld):
        return real
    return max(real, min(-(-largest // max_pages), min(lp, ld) - 1))


def spec_params(lp: int, ld: int, real_page_size: int, max_pages: int = MAX_PAGES) -> Mapped:
    """Parameters of the sglang_disagg specs whose limits are ``lp`` (prefill) and ``ld`` (decode)."""
    s = scaled_page_size(real_page_size, lp, ld, max_pages)
    params = {
        "requests": 2,
        "page_size": s,
        "context_len": max(lp, ld) + 1,
        "prefill_pool_tokens": lp + 1,
        "decode_pool_tokens": ld + 1,
        # the earlier request, whose KV the long one may read: one page, admitted by both nodes
        "short_prompt_tokens": max(1, min(s, min(lp, ld) - 1)),
    }
    return Mapped(params, real_page_size, s)


def context_to_close(prefill: NodeConfig, decode: NodeConfig) -> int | None:
    """The largest ``--context-length`` (at most the current one) at which both nodes admit the same prompts.

    The spec's unsafe prompts lie between the two limits (rejected by one node,
    admitted by the other); that gap is empty exactly when the limits are
    equal, which holds once the context is at most the smaller pool, and
    stays so below.  None when no context of at least 2 tokens closes it.
    """
    lo, hi = 2, min(prefill.context_len, decode.context_len)

    def closed(c: int) -> bool:
        return Limit.of(prefill, c).tokens == Limit.of(decode, c).tokens

    if closed(hi):
        return hi
    if not closed(lo):
        return None
    while lo + 1 < hi:  # closed(lo) and not closed(hi)
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if closed(mid) else (lo, mid)
    return lo
