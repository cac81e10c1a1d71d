"""Adversarial: counts and sizes declared without ``min=``, run with negative values.

``-p prompt_tokens=-3`` made a prompt need ``ceil_div(-3, 2) == -1`` pages, so
``grow`` (declared possibly dead for one-page prompts) never fired and the
checker said PROVED about an instance that cannot exist; ``-p page_size=-2``
likewise.  A parameter is a count or a size unless declared otherwise: the
values are refused at the declaration (OWN011).
"""

from ownership import Ownership, Spec, ceil_div, require, safe

spec = Spec("lang_negative_params", summary="counts and sizes without a declared min", expect=safe())
spec.param("requests", 2, "concurrent requests")
spec.param("page_size", 2, "tokens per page")
spec.param("prompt_tokens", 3, "prompt length in tokens")
Req = spec.domain("Req", "requests", symmetric=True, names="AB")
own = Ownership(spec, requests=Req)
pool = own.pool("kv", 4)
spec.var("held", int, per=Req, init=0)


@spec.action
def start(s, r: Req):
    require(s.held[r] == 0)
    pool.write(s, r, pool.alloc(s, r, 1))
    s.held[r] = 1


@spec.action(may_be_dead="a prompt that fits in one page never grows")
def grow(s, r: Req):
    require(0 < s.held[r] < ceil_div(s.params.prompt_tokens, s.params.page_size))
    pool.write(s, r, pool.alloc(s, r, 1))
    s.held[r] = s.held[r] + 1


@spec.action
def finish(s, r: Req):
    require(s.held[r] > 0)
    pool.read(s, r, pool.pages_of(s, r))
    pool.free(s, r)
    s.held[r] = 0


own.invariants("no_foreign_read", "no_double_ownership")
