"""A page released while a write into it is in flight: only the release step's flag says so.

``release`` clears the write along with the page, so every reachable state
satisfies ``no_release_while_writing``; the step itself is flagged
(``s.flag``), which every checking engine counts as a violation.  The state
it leads to (``lost``) is reached by no other step.  A model-based test of an
implementation that does the same must fail, and the graph export must show
the flagged step.  Expected: violates no_release_while_writing (take, write,
release).
"""

from ownership import Spec, require, violates

spec = Spec("left_flagged_release", summary="release a page with a write in flight; only the step's flag tells",
            expect=violates("no_release_while_writing"))
spec.var("held", bool, init=False)
spec.var("writing", bool, init=False)
spec.var("lost", bool, init=False, doc="the last release dropped a write (no invariant reads it)")


@spec.action
def take(s):
    """Take the page."""
    require(not s.held)
    s.held = True


@spec.action
def write(s):
    """Post a write into the held page."""
    require(s.held and not s.writing)
    s.writing = True


@spec.action
def land(s):
    """The write lands."""
    require(s.writing)
    s.writing = False


@spec.action
def release(s):
    """Give the page back; a write still in flight is dropped with it."""
    require(s.held)
    s.flag("no_release_while_writing", s.writing)
    s.lost = s.writing
    s.held = False
    s.writing = False


@spec.invariant
def no_release_while_writing(s) -> bool:
    """A page is not released while a write into it is in flight."""
    return s.held or not s.writing
