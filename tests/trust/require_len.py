"""``require(len(xs) - 1)``: a number where a condition was meant.

The guard is true for every count but 1, so ``take`` runs with an empty
queue (the count goes negative); the author meant ``require(len(xs) > 1)``.
Expected: refused with OWN065 at the require line.
"""

from ownership import Spec, require

spec = Spec("require_len", summary="a guard that is a number")
spec.var("queued", int, init=2)


@spec.action
def take(s):
    require(s.queued - 1)  # meant: s.queued > 0
    s.queued = s.queued - 1


@spec.invariant
def never_negative(s):
    return s.queued >= -5
