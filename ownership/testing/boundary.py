"""The spec state as an adapter sees it: indices and references as ints, the implementation's own terms.

An implementation names pages and requests by number (spec page ``i`` is
allocator page ``i``), so an adapter's ``expected(s)`` indexes tables with
ints and compares values as ints.  Spec code may not (an int names one of
interchangeable elements), so adapters get this view instead of the spec's:
each ``s.var[i]`` turns the int into the element of the table's domain,
reads the spec's own field, and gives the value back with elements as ints
(:func:`~ownership.lang.elements.plain`).  Scalars read straight through.
"""

from __future__ import annotations

from typing import Any

from ownership.lang.elements import plain


class _IntTable:
    """One table of the view: ``t[i]``, ``t[r, p]`` and ``len(t)`` with ints; values with elements as ints."""

    def __init__(self, field: Any, elements: list[list[Any] | None]) -> None:
        self._field = field
        self._elements = elements  # per dimension: the domain's elements, or None where ints index it

    def _key(self, k: Any, dim: int) -> Any:
        elems = self._elements[dim] if dim < len(self._elements) else None
        return elems[k] if elems is not None and k.__class__ is int else k

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, tuple):
            key = tuple(self._key(k, d) for d, k in enumerate(key))
        else:
            key = self._key(key, 0)
        return plain(self._field[key])

    def __len__(self) -> int:
        elems = self._elements[0]
        return len(elems) if elems is not None else len(self._field)

    def __iter__(self) -> Any:
        return iter([self[i] for i in range(len(self))])


class BoundaryView:
    """``s`` for an adapter's ``expected``: see the module docstring."""

    def __init__(self, view: Any) -> None:
        object.__setattr__(self, "_view", view)

    def __getattr__(self, name: str) -> Any:
        view = self._view
        value = getattr(view, name)
        inst = view._inst
        var = inst.spec.vars.get(name)
        if var is None or not hasattr(value, "__getitem__"):
            return plain(value)
        doms = getattr(value, "doms", None) or (getattr(value, "dom", None),)
        elements = [list(inst.elements[d]) if d in inst.elements else None for d in doms]
        return _IntTable(value, elements)
