"""Decode reserves ceil(prompt_tokens / page_size) pages from a pool of
`pages` pages without checking the budget; more than the pool holds is an
overflow.  Known boundary: the smallest overflowing prompt is
pages * page_size + 1 tokens."""

from ownership import Spec, ceil_div, require, violates

spec = Spec("reserve_overflow", summary="reservation without a budget check", expect=violates("within_pool"))
spec.param("page_size", 4, min=1)
spec.param("pages", 3, min=1)
spec.param("prompt_tokens", 5, min=1)
spec.var("reserved", int, init=0)
spec.var("admitted", bool, init=False)


@spec.action
def admit(s):
    require(not s.admitted)
    s.reserved = ceil_div(s.params.prompt_tokens, s.params.page_size)
    s.admitted = True


@spec.invariant
def within_pool(s):
    return s.reserved <= s.params.pages
