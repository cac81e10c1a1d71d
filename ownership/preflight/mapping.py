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

from ownership.preflight.admission import FORMULAS, INPUT_RESERVE, Formula, max_req_input_len
from ownership.preflight.readers import NodeConfig

#: Pages of the largest pool in the scaled instance (4 keeps an incident-sized check to seconds).
MAX_PAGES = 4


@dataclass(frozen=True)
class Limit:
    """A node's admission limit in tokens and how it was obtained."""

    tokens: int
    how: str

    @staticmethod
    def of(node: NodeConfig, context_len: int | None = None, formula: Formula | None = None) -> Limit:
        """The node's ``max_req_input_len``, at its own context length or at ``context_len``.

        ``formula`` is the node's release's (:mod:`.admission`); without one,
        the formula every release up to 0.5.16 uses.
        """
        ctx = node.context_len if context_len is None else context_len
        formula = formula or FORMULAS[0]
        computed = max_req_input_len(formula, ctx, node.pool_tokens, node.dcp_size)
        if node.max_req_input_len is not None and context_len is None:
            return Limit(node.max_req_input_len, f"max_req_input_len {node.max_req_input_len:,} "
                         f"({node.where('max_req_input_len')})")
        if node.max_req_input_len is not None:  # the reserve the node reported, applied at the new context
            at_own = max_req_input_len(formula, node.context_len, node.pool_tokens, node.dcp_size)
            computed -= at_own - node.max_req_input_len
        where = sorted({node.where("context_len"), node.where("max_total_num_tokens")})
        pool = f"max_total_num_tokens {node.pool_tokens:,}"
        if formula.times_dcp and node.dcp_size != 1:
            pool += f" * dcp_size {node.dcp_size}"
        return Limit(computed, f"min(context_len {ctx:,} - 1, {pool} - 1) - {INPUT_RESERVE} = {computed:,} "
                     f"({', '.join(where)}; the release's pool term: {formula.pool_term}, {formula.where})")


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


def spec_params(lp: int, ld: int, real_page_size: int, max_pages: int = MAX_PAGES,
                switches: dict[str, int] | None = None) -> Mapped:
    """Parameters of the sglang_disagg specs whose limits are ``lp`` (prefill) and ``ld`` (decode).

    ``switches`` are the spec's 0/1 parameters for the nodes' settings
    (``prefill_auto_truncate``, ``decode_auto_truncate``, ``kv_checksum``).
    With prefill truncating, whether decode can need more pages than a
    truncated prompt fills turns on page rounding (``ceil(Lp / page) *
    page`` against decode's longest length); the page size is scaled only
    when the scaled size keeps that comparison as the real one decides it.
    """
    switches = dict(switches or {})
    s = scaled_page_size(real_page_size, lp, ld, max_pages)
    if switches.get("prefill_auto_truncate") and s != real_page_size:
        longest_decode = ld if switches.get("decode_auto_truncate") else ld - 1

        def needs_more(size: int) -> bool:
            return -(-lp // size) * size < longest_decode

        if needs_more(real_page_size) and not needs_more(s):
            s = _rounding_divisor(lp, real_page_size, min(lp, ld)) or real_page_size
        elif needs_more(s) and not needs_more(real_page_size):
            s = -(-s // real_page_size) * real_page_size  # a multiple of the real page rounds up at least as far
    params = {
        "requests": 2,
        "page_size": s,
        "context_len": max(lp, ld) + 1,
        "prefill_pool_tokens": lp + 1,
        "decode_pool_tokens": ld + 1,
        # the earlier request, whose KV the long one may read: one page, admitted by both nodes
        "short_prompt_tokens": max(1, min(s, min(lp, ld) - 1)),
        **switches,
    }
    return Mapped(params, real_page_size, s)


def _rounding_divisor(lp: int, real: int, below: int) -> int | None:
    """The largest page size under ``below`` at which ``lp`` tokens round up to the same end as at ``real``.

    A divisor ``s`` of ``R = ceil(lp / real) * real`` with ``s > R - lp``
    rounds ``lp`` up to exactly ``R``; the largest gives the fewest pages.
    """
    end = -(-lp // real) * real
    divisors: set[int] = set()
    i = 1
    while i * i <= end:
        if end % i == 0:
            divisors.update((i, end // i))
        i += 1
    fits = [s for s in divisors if end - lp < s < below and s >= real]
    return max(fits, default=None)


def context_to_close(prefill: NodeConfig, decode: NodeConfig, formula: Formula | None = None) -> int | None:
    """The largest ``--context-length`` (at most the current one) at which both nodes admit the same prompts.

    The spec's unsafe prompts lie between the two limits (rejected by one node,
    admitted by the other); that gap is empty exactly when the limits are
    equal, which holds once the context is at most the smaller pool, and
    stays so below.  None when no context of at least 2 tokens closes it.
    """
    lo, hi = 2, min(prefill.context_len, decode.context_len)

    def closed(c: int) -> bool:
        return Limit.of(prefill, c, formula).tokens == Limit.of(decode, c, formula).tokens

    if closed(hi):
        return hi
    if not closed(lo):
        return None
    while lo + 1 < hi:  # closed(lo) and not closed(hi)
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if closed(mid) else (lo, mid)
    return lo
