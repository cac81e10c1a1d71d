"""The write check of every state variable: what a spec may store in a cell.

:func:`value_checker` builds, once per variable, the function every write
goes through (``s.var[i] = v``, ``s.scalar = v``): it returns the value to
store (an element's index, a set's bitmask) or raises a located OWN062, or
OWN060 for an int naming an element of a symmetric domain.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Collection, Mapping
from typing import Any

from ownership.errors import Code, OwnershipError
from ownership.lang.elements import (
    FILE_KINDS,
    TRUSTED,
    Element,
    ElementSet,
    checker_caller,
    spec_frame_location,
    symmetry_error,
)
from ownership.lang.types import BoolType, Enum, IntType, Ref, RefSet

_WRITE_ELEMENT = ("an int names one of them: write an element (an action argument, a loop over s.all(D), "
                  "s.choose(list(s.all(D)), domain=D)) or None, or declare the domain ordered "
                  "(`spec.domain(..., ordered=True)`) if the protocol really uses slot order")



def _describe_type(vtype: Any) -> str:
    if isinstance(vtype, Enum):
        return f"Enum {vtype.name} ({', '.join(vtype.members)})"
    if isinstance(vtype, Ref):
        return f"Optional({vtype.domain})" if vtype.optional else vtype.domain
    if isinstance(vtype, RefSet):
        return f"SetOf({vtype.domain})"
    return "bool" if isinstance(vtype, BoolType) else "int" if isinstance(vtype, IntType) else repr(vtype)


def value_checker(var: Any, sizes: Mapping[str, int], symmetric: Collection[str] = ()) -> Callable[[Any], Any]:
    """The write check of ``var``: returns the value to store (an element's index) or raises OWN062.

    Built once per variable so the hot path is one call and a class test.
    Over a domain in ``symmetric`` an int (an index) is refused from spec
    code (OWN060) and a ``SetOf`` takes a set of elements; the checker's own
    code (the vocabulary, replay) still writes indices and bitmasks.
    """
    vtype = var.type
    name = var.name

    def bad(value: Any, why: str = "") -> OwnershipError:
        shown = value._Element__name if value.__class__ is Element else repr(value)
        file, line = spec_frame_location(3)
        return OwnershipError(
            Code.BAD_VALUE,
            f"writes {shown} into state variable {name}, declared {_describe_type(vtype)}{why}",
            file,
            line,
        )

    if isinstance(vtype, BoolType):
        def put_bool(value: Any) -> Any:
            if value is True or value is False:
                return value
            raise bad(value, ": write True or False (e.g. `bool(x)` or a comparison)")
        return put_bool
    if isinstance(vtype, IntType):
        def put_int(value: Any) -> Any:
            if value.__class__ is int or value.__class__ is bool:
                return value
            if isinstance(value, int) and value.__class__ is not Element:
                return int(value)
            raise bad(value, "" if value.__class__ is not Element else
                      f": a reference to an element needs the type {value._Element__domain} or Optional({value._Element__domain})")
        return put_int
    if isinstance(vtype, Enum):
        count = len(vtype.members)

        def put_enum(value: Any) -> Any:
            if value.__class__ is int and 0 <= value < count:
                return value
            raise bad(value, f": use a member such as {vtype.name}.{vtype.members[0]}")
        return put_enum
    if isinstance(vtype, Ref):
        dom = vtype.domain
        n = sizes[dom]
        optional = vtype.optional
        sym = dom in symmetric

        def put_ref(value: Any) -> Any:
            if value.__class__ is Element:
                if value._Element__domain == dom:
                    return value._Element__i
                raise bad(value, f": {value._Element__name} is an element of {value._Element__domain}")
            if value is None:
                if optional:
                    return None
                raise bad(value, f": None needs the type Optional({dom})")
            if value.__class__ is int and 0 <= value < n:
                # An int names one element: fine for an ordered domain and for the checker's
                # own code (the vocabulary, test harnesses), never for spec code.
                if sym and not checker_caller(1):
                    raise symmetry_error(dom, f"writes the int {value} into {name}, declared {_describe_type(vtype)}",
                                         hint=_WRITE_ELEMENT)
                return value
            raise bad(value)
        return put_ref
    if isinstance(vtype, RefSet):
        limit = 1 << sizes[vtype.domain]
        set_dom = vtype.domain
        if set_dom in symmetric:
            def put_element_set(value: Any) -> Any:
                if value.__class__ is ElementSet or value.__class__ is frozenset or value.__class__ is set:
                    mask = 0
                    for e in value:
                        if e.__class__ is not Element or e._Element__domain != set_dom:
                            raise bad(e, f": a set of elements of {set_dom} holds only elements of {set_dom}")
                        mask |= 1 << e._Element__i
                    return mask
                if value.__class__ is int and (value == 0 or (0 <= value < limit and (
                        FILE_KINDS[sys._getframe(2).f_code.co_filename] == TRUSTED or checker_caller(1)))):
                    return value  # 0, the empty set, is the same under every renaming
                if value.__class__ is int and 0 <= value < limit:
                    raise symmetry_error(set_dom, f"writes the int {value} into {name}, declared SetOf({set_dom})",
                                         hint="a bitmask's bits are indices: write a set of elements "
                                              "(`s.var[p] = s.var[p] | {r}`, `- {r}`, `frozenset()`)")
                raise bad(value, f": a set of elements of {set_dom} (e.g. `s.var[p] | {{r}}`, `frozenset()`; "
                                 f"as a mask 0..{limit - 1})")
            return put_element_set

        def put_set(value: Any) -> Any:
            if value.__class__ is int and 0 <= value < limit:
                return value
            raise bad(value, f": a bitmask of {sizes[vtype.domain]} elements (0..{limit - 1})")
        return put_set
    return lambda value: value
