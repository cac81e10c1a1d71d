"""A concrete state in words: its JSON form (and back), its named cells, the cells a step changed."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ownership.lang.model import Spec

if TYPE_CHECKING:
    from ownership.lang.fields import Layout
    from ownership.lang.instance import State


class StateCodec:
    """:class:`~ownership.lang.instance.Instance`'s conversions of a flat state to named, readable forms."""

    if TYPE_CHECKING:
        spec: Spec
        layouts: dict[str, Layout]
        names: dict[str, Sequence[str]]

    def to_json(self, state: State) -> dict[str, Any]:
        """Named, readable form of a state: tables become dicts keyed by element name."""
        out: dict[str, Any] = {}
        for v in self.spec.vars.values():
            lay = self.layouts[v.name]
            flat = state[lay.offset : lay.offset + lay.length]
            out[v.name] = self._nest(v.type, [self.names[d.name] for d in v.index], list(flat))
        return out

    def _nest(self, vtype: Any, axes: list[Sequence[str]], flat: list[Any]) -> Any:
        if not axes:
            return vtype.to_json(flat[0], self.names)
        head, rest = axes[0], axes[1:]
        stride = len(flat) // max(len(head), 1)
        return {name: self._nest(vtype, rest, flat[i * stride : (i + 1) * stride]) for i, name in enumerate(head)}

    def from_json(self, data: Mapping[str, Any]) -> State:
        """Inverse of :meth:`to_json`; raises ``ValueError`` naming the bad field."""
        values: list[Any] = []
        for v in self.spec.vars.values():
            if v.name not in data:
                raise ValueError(f"state has no field {v.name!r}")
            values.extend(self._flatten(v.name, v.type, [self.names[d.name] for d in v.index], data[v.name]))
        return tuple(values)

    def _flatten(self, where: str, vtype: Any, axes: list[Sequence[str]], data: Any) -> list[Any]:
        if not axes:
            try:
                return [vtype.from_json(data, self.names)]
            except ValueError as exc:
                raise ValueError(f"{where}: {exc}") from None
        if not isinstance(data, Mapping) or set(data) != set(axes[0]):
            raise ValueError(f"{where}: expected keys {axes[0]}")
        out: list[Any] = []
        for name in axes[0]:
            out.extend(self._flatten(f"{where}[{name}]", vtype, axes[1:], data[name]))
        return out

    def cells(self, state: State) -> dict[str, str]:
        """Every scalar cell of a state, as ``{"d_state[B]": "PREALLOC"}``."""
        out: dict[str, str] = {}
        for v in self.spec.vars.values():
            lay = self.layouts[v.name]
            axes = [self.names[d.name] for d in v.index]
            keys = list(itertools.product(*axes)) if axes else [()]
            for k, key in enumerate(keys):
                label = v.name + (f"[{', '.join(key)}]" if key else "")
                out[label] = v.type.show(state[lay.offset + k], self.names)
        return out

    def diff(self, before: State, after: State) -> list[tuple[str, str, str]]:
        """Changed cells between two states: ``(cell, old, new)``."""
        a = self.cells(before)
        b = self.cells(after)
        return [(k, a[k], b[k]) for k in a if a[k] != b[k]]
