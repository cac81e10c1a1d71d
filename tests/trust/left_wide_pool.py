"""A pool whose size is a parameter: ``pages=100`` is wider than the default instance-size limit.

The command line refuses it (OWN017) unless ``--max-domain`` is raised; the
Python API and the pytest plugin must refuse it the same way and name their
own way to raise the limit (``max_domain=``, ``ownership_max_domain``).
At the defaults it is small and safe.
"""

from ownership import Spec, require, safe

spec = Spec("left_wide_pool", summary="a pool of N pages, each taken at most once", expect=safe())
spec.param("pages", 2, min=1)
Page = spec.domain("Page", "pages", symmetric=True)
spec.var("taken", bool, per=Page, init=False)


@spec.action
def take(s, p: Page):
    """Take a free page."""
    require(not s.taken[p])
    s.taken[p] = True


@spec.action
def give_back(s, p: Page):
    """Return a taken page."""
    require(s.taken[p])
    s.taken[p] = False


@spec.invariant
def taken_is_bool(s) -> bool:
    """Every page is either taken or free."""
    return all(s.taken[p] in (True, False) for p in s.all(Page))
