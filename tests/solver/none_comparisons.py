"""Comparisons with None on state values: an optional reference, and an integer holding -1.

Not a protocol: a conformance check compares how the Python and the Z3
encoding read ``== None``, ``is None`` and the truth value of a reference.
"""

from ownership import Optional, Spec, safe

spec = Spec("none_comparisons", summary="state values compared with None", expect=safe())
spec.param("requests", 2)
Req = spec.domain("Req", "requests", names="AB")
spec.var("owner", Optional(Req), init=None)
spec.var("count", int, init=0)
spec.var("answer", bool, init=False)


@spec.action
def owner_equals_none(s):
    s.answer = s.owner == None  # noqa: E711 - the comparison under test


@spec.action
def count_equals_none(s):
    s.answer = s.count == None  # noqa: E711


@spec.action
def flag_equals_none(s):
    s.answer = s.answer == None  # noqa: E711


@spec.action
def owner_is_none(s):
    s.answer = s.owner is None


@spec.action
def owner_is_truthy(s):
    s.answer = bool(s.owner)


@spec.invariant
def small(s):
    return s.count < 100
