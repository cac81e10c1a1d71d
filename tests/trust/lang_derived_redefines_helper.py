"""Adversarial: a derived spec redefines its base's plain helper ``release`` with a plain ``def``.

The intent is a version whose ``release`` forgets to free, which violates
``done_holds_nothing``.  But the base's ``finish`` looks ``release`` up in the
base's module and keeps calling the base's version, so the checker used to say
PROVED for the base protocol.  The loader refuses the redefinition (OWN008).
"""

import lang_base_plain_helper as base

from ownership import violates

spec = base.spec.derive(
    "lang_derived_redefines_helper", summary="release forgets to free", expect=violates("done_holds_nothing")
)


def release(s, r):  # BUG: meant to replace base.release, but nothing calls this one
    """Forget to give the pages back."""
