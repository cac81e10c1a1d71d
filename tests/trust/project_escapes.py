"""A module of the "user's project" whose helpers keep history where the data snapshot does not look.

Each answers True for its first two calls only.  An action that calls one
and only acts on the answer after a few steps sees the history nowhere the
audit re-runs: only a static refusal catches them.
"""

import array
import sys


def funcattr_ok():
    funcattr_ok.n = getattr(funcattr_ok, "n", 0) + 1
    return funcattr_ok.n <= 2


def globals_ok():
    g = globals()
    g["_G"] = g.get("_G", 0) + 1
    return g["_G"] <= 2


def sysmod_ok():
    m = sys.modules[__name__]
    setattr(m, "_S", getattr(m, "_S", 0) + 1)  # noqa: B010 - the point: module state through setattr
    return m._S <= 2


def _answers():
    yield True
    yield True
    while True:
        yield False


_ANSWERS = _answers()


def gen_ok():
    return next(_ANSWERS)


def arr_ok(a=array.array("i", [0])):  # noqa: B008 - the point: a default that keeps history
    a[0] += 1
    return a[0] <= 2
