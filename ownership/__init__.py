"""ownership: a model checker for KV-cache page ownership protocols.

Write a protocol as a spec (see ``docs/spec-guide.md``), then check it with
``ownership check SPEC``.  This package's top level holds what spec modules
import; engines live in :mod:`ownership.engines` and load their solvers
lazily, so importing a spec stays fast.
"""

from ownership.lang.declarations import Domain, Expect, Params, Source, Values, ceil_div, safe, violates
from ownership.lang.elements import Element
from ownership.lang.guard import Disabled, require
from ownership.lang.model import Spec
from ownership.lang.types import Bool, Enum, Int, Optional, SetOf
from ownership.vocab.pool import Ownership, PagePool, transfer
from ownership.vocab.refcount import all_of, any_of, none_of, not_

__all__ = [
    "Bool",
    "Disabled",
    "Domain",
    "Element",
    "Enum",
    "Expect",
    "Int",
    "Optional",
    "Ownership",
    "PagePool",
    "Params",
    "SetOf",
    "Source",
    "Spec",
    "Values",
    "all_of",
    "any_of",
    "ceil_div",
    "none_of",
    "not_",
    "require",
    "safe",
    "transfer",
    "violates",
]

__version__ = "0.1.0"
