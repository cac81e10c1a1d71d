"""Symmetry reduction: one representative per orbit of interchangeable elements.

A domain declared ``symmetric=True`` promises that the spec treats its
elements alike: no action or invariant names a particular element or orders
them.  Then any permutation of the elements maps reachable states to
reachable states and preserves every invariant, so the explorer may store one
state per orbit (the standard result of Clarke, Emerson and Sistla; Ip and
Dill).  The key computed here is the *exact* canonical form:

* a symmetric domain that appears as a *value* (a request named by a page's
  ``holders`` or ``content``) is canonicalised by trying all of its
  permutations (so keep such domains small: at most 6 elements);
* a symmetric domain that is only ever an *index* (pages) is canonicalised by
  sorting its elements' rows of cells, which is exact and costs one sort
  instead of ``n!`` permutations.  This is how 8 or more pages stay cheap.
  Only one sorted domain may index a given table: of two that share one
  (handles and pages in ``pending[Handle, Page]``), the smaller is permuted.

The canonicaliser is generated as Python source for each instance so the hot
loop is a single function call.  A variant (:func:`make_canonical_permuter`)
also returns the :class:`~ownership.lang.permutation.Permutation` that takes
the state to the representative its key describes; the explorer's key-only
function is generated from the same pieces and does none of that work.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ownership.lang.fields import strides as layout_strides
from ownership.lang.instance import Instance, State
from ownership.lang.permutation import Permutation, StateShape
from ownership.lang.types import Ref, RefSet

MAX_PERMUTED = 6
"""Largest value-referenced symmetric domain canonicalised by enumeration."""

MAX_KEPT_PERMUTATIONS = 4096
"""Permutations a canonical permuter keeps built (with their index maps) before starting over."""


@dataclass(frozen=True)
class SymmetryPlan:
    """Which domains are reduced, and how."""

    permuted: tuple[str, ...]
    sorted: tuple[str, ...]
    skipped: tuple[tuple[str, str], ...]

    def describe(self) -> str:
        parts = [f"{d} (all permutations)" for d in self.permuted] + [f"{d} (row sorting)" for d in self.sorted]
        text = "symmetry over " + ", ".join(parts) if parts else "no symmetric domains"
        for d, why in self.skipped:
            text += f"; {d} not reduced: {why}"
        return text


def plan_symmetry(inst: Instance) -> SymmetryPlan:
    """Decide how each symmetric domain of ``inst`` is reduced."""
    spec = inst.spec
    as_value = {v.type.refers_to() for v in spec.vars.values()} - {None}
    permuted: list[str] = []
    sorted_: list[str] = []
    skipped: list[tuple[str, str]] = []
    for d in spec.domains.values():
        if not d.symmetric or inst.sizes[d.name] < 2:
            continue
        twice = any(sum(1 for x in v.index if x.name == d.name) > 1 for v in spec.vars.values())
        if d.name in as_value or twice:
            _permute_or_skip(inst, d.name, permuted, skipped)
        else:
            sorted_.append(d.name)
    # Row sorting is exact for one domain per table: a table indexed by two sorted domains
    # (``cover[Handle, Page]``) would have its rows sorted by the first while the second's
    # columns stay in their old order, and two states that are no renaming of each other
    # would share a key.  The largest such domain stays sorted; the others are permuted.
    while True:
        shared = next((ds for v in spec.vars.values()
                       if len(ds := sorted({x.name for x in v.index if x.name in sorted_},
                                           key=lambda n: (-inst.sizes[n], n))) > 1), None)
        if shared is None:
            break
        for name in shared[1:]:
            sorted_.remove(name)
            _permute_or_skip(inst, name, permuted, skipped)
    return SymmetryPlan(tuple(permuted), tuple(sorted_), tuple(skipped))


def _permute_or_skip(inst: Instance, name: str, permuted: list[str], skipped: list[tuple[str, str]]) -> None:
    if inst.sizes[name] > MAX_PERMUTED:
        skipped.append((name, f"{inst.sizes[name]}! permutations is too many"))
    else:
        permuted.append(name)


def make_canonicalizer(inst: Instance, plan: SymmetryPlan, *, exact: bool = False) -> Callable[[State], Any]:
    """A function mapping a state to a hashable key; equal keys mean the same orbit.

    The search's key sorts the elements of a permuted domain by signatures
    that may include cells naming another permuted domain: two renamings of
    one state can then get different keys when two domains are permuted (the
    search stores both: wasted work, never a merged orbit).  With ``exact``
    the signatures leave those cells out, and the key is equal for all
    states of an orbit (what the symmetry check compares successors by).
    """
    if not plan.permuted and not plan.sorted:
        return lambda st: st
    return _Generated(inst, plan, exact=exact).compile("key")


def make_canonical_permuter(inst: Instance, plan: SymmetryPlan) -> Callable[[State], tuple[Any, Permutation]]:
    """A function mapping a state to its canonical key and a :class:`Permutation` that reaches it.

    ``canon(st) == (key, pi)`` with ``key == make_canonicalizer(inst, plan)(st)``
    and ``make_plain_key(inst, plan)(pi.apply(st)) == key``: ``pi.apply(st)`` is
    the orbit's representative the key describes.  Slower than the key alone
    (it keeps the winning candidate and sorts rows by index); the explorer's
    hot path uses :func:`make_canonicalizer`.
    """
    shape = StateShape.of(inst)
    if not plan.permuted and not plan.sorted:
        identity = Permutation(shape)
        return lambda st: (st, identity)
    gen = _Generated(inst, plan)
    raw = gen.compile("perm")
    perm_doms = gen.perm_doms
    sort_doms = gen.sort_doms

    # The permutations built so far, by winner: few orderings recur, and a kept permutation
    # keeps its compiled index maps.  Bounded, since sorted domains allow n! orders.
    built: dict[Any, Permutation] = {}

    def canon(st: State) -> tuple[Any, Permutation]:
        key, orderings, rows = raw(st)
        # An ordering lists the old element placed at each new position; a row list is
        # indexed by old element and its sorted order is the new order.
        orders = (orderings, tuple(tuple(sorted(range(len(r)), key=r.__getitem__)) for r in rows))
        pi = built.get(orders)
        if pi is None:
            if len(built) >= MAX_KEPT_PERMUTATIONS:
                built.clear()
            maps = {d: _inverse(o) for d, o in zip(perm_doms, orderings, strict=True)}
            maps.update({d: _inverse(o) for d, o in zip(sort_doms, orders[1], strict=True)})
            pi = built[orders] = Permutation(shape, maps)
        return key, pi

    return canon


def make_plain_key(inst: Instance, plan: SymmetryPlan) -> Callable[[State], Any]:
    """The key of a state as it stands (no renaming, rows in index order), in the canonical key's form.

    For the representative ``pi.apply(st)`` that :func:`make_canonical_permuter`
    returns, this is the canonical key of ``st``: what the reduction stores is
    a function of that state alone.
    """
    if not plan.permuted and not plan.sorted:
        return lambda st: st
    return _Generated(inst, plan).compile("plain")


def _inverse(order: Sequence[int]) -> list[int]:
    out = [0] * len(order)
    for new, old in enumerate(order):
        out[old] = new
    return out


class _Generated:
    """The pieces of the generated canonicaliser's source, shared by its variants."""

    def __init__(self, inst: Instance, plan: SymmetryPlan, *, exact: bool = False) -> None:
        spec = inst.spec
        self.name = spec.name
        self.sizes = sizes = inst.sizes
        self.perm_doms = perm_doms = list(plan.permuted)
        self.sort_doms = sort_doms = list(plan.sorted)

        # Per permutation of the permuted domains: inverse index variables and value maps.
        per_dom_perms = [list(itertools.permutations(range(sizes[d]))) for d in perm_doms]
        perms: list[tuple[Any, ...]] = []
        combo: tuple[tuple[int, ...], ...]
        for combo in itertools.product(*per_dom_perms):
            entry: list[Any] = []
            for dname, pm in zip(perm_doms, combo, strict=True):
                n = sizes[dname]
                inv = [0] * n
                for old, new in enumerate(pm):
                    inv[new] = old
                refmap: dict[Any, int] = {None: -1}
                refmap.update({old: new for old, new in enumerate(pm)})
                maskmap = []
                for mask in range(1 << n):
                    m = 0
                    for old in range(n):
                        if mask >> old & 1:
                            m |= 1 << pm[old]
                    maskmap.append(m)
                entry.extend(inv)
                entry.append(refmap)
                entry.append(tuple(maskmap))
            perms.append(tuple(entry))

        unpack: list[str] = []
        self.unpack = unpack
        for k, dname in enumerate(perm_doms):
            unpack.extend(f"i{k}_{j}" for j in range(sizes[dname]))
            unpack.append(f"R{k}")
            unpack.append(f"M{k}")

        def value_expr(vtype: Any, cell: str) -> str:
            ref = vtype.refers_to()
            if ref in perm_doms:
                k = perm_doms.index(ref)
                return f"M{k}[{cell}]" if isinstance(vtype, RefSet) else f"R{k}[{cell}]"
            if isinstance(vtype, Ref) and vtype.optional:
                return f"(-1 if {cell} is None else {cell})"
            return cell

        def value_expr_plain(vtype: Any) -> str:
            if isinstance(vtype, Ref) and vtype.optional:
                return "(-1 if {0} is None else {0})"
            return "{0}"

        rest_exprs: list[str] = []
        row_exprs: dict[str, list[str]] = {d: [] for d in sort_doms}
        self.rest_exprs, self.row_exprs = rest_exprs, row_exprs
        for v in spec.vars.values():
            lay = inst.layouts[v.name]
            names = [d.name for d in v.index]
            strides = list(layout_strides(lay.shape))
            sort_axis = next((a for a, n in enumerate(names) if n in sort_doms), None)
            other_axes = [a for a in range(len(names)) if a != sort_axis]
            for cell in itertools.product(*[range(lay.shape[a]) for a in other_axes]):
                terms = [str(lay.offset)]
                for a, j in zip(other_axes, cell, strict=True):
                    dname = names[a]
                    if dname in perm_doms:
                        terms.append(f"i{perm_doms.index(dname)}_{j}*{strides[a]}")
                    else:
                        terms.append(str(j * strides[a]))
                if sort_axis is not None:
                    terms.append(f"p*{strides[sort_axis]}" if strides[sort_axis] != 1 else "p")
                    row_exprs[names[sort_axis]].append(value_expr(v.type, f"st[{'+'.join(terms)}]"))
                else:
                    rest_exprs.append(value_expr(v.type, f"st[{'+'.join(terms)}]"))

        # Per permuted domain, a signature of each element (its own cells that name no element
        # of the domain; with ``exact``, of any permuted domain, since a cell naming another
        # permuted domain changes when that one is renamed): only orderings that sort
        # elements by signature are tried, so the usual case is one ordering instead of n!.
        left_out = set(perm_doms) if exact else set()
        sig_exprs: dict[str, list[str]] = {}
        self.sig_exprs = sig_exprs
        for dname in perm_doms:
            cols = []
            for v in spec.vars.values():
                named = v.type.refers_to()
                if [d.name for d in v.index] == [dname] and named != dname and named not in left_out:
                    lay = inst.layouts[v.name]
                    cols.append((lay.offset, value_expr_plain(v.type)))
            sig_exprs[dname] = [
                "(" + "".join(f.format(f"st[{off + e}]") + ", " for off, f in cols) + ")" for e in range(sizes[dname])
            ]

        # PERMINFO maps a tuple of orderings (one per permuted domain; ordering[j] = the old
        # element placed at position j) to the unpacked inverse indices and value maps.
        perm_info: dict[tuple[tuple[int, ...], ...], tuple[Any, ...]] = {}
        self.perm_info = perm_info
        for orderings, info in zip(itertools.product(*per_dom_perms), perms, strict=True):
            key: list[tuple[int, ...]] = []
            for dname, pm in zip(perm_doms, orderings, strict=True):
                inverse = [0] * sizes[dname]
                for old, new in enumerate(pm):
                    inverse[new] = old
                key.append(tuple(inverse))
            perm_info[tuple(key)] = info

    def source(self, mode: str) -> str:
        """The generated function: ``key`` (the key), ``perm`` (also the winner) or ``plain`` (no renaming)."""
        perm_doms, sort_doms, sizes = self.perm_doms, self.sort_doms, self.sizes
        lines = ["def canon(st):", "    best = None"]
        if mode == "plain":
            lines.append("    for combo in (IDENTITY,):")
        else:
            for k, dname in enumerate(perm_doms):
                lines.append(f"    sigs{k} = [{', '.join(self.sig_exprs[dname])}]")
                lines.append(f"    cands{k} = ORDERINGS(sigs{k})")
            if perm_doms:
                lines.append("    for combo in PRODUCT(" + ", ".join(f"cands{k}" for k in range(len(perm_doms))) + "):")
            else:
                lines.append("    for _ in (None,):" if mode == "key" else "    for combo in ((),):")
        if perm_doms:
            lines.append("        (" + ", ".join(self.unpack) + ",) = PERMINFO[combo]")
        parts = ["(" + "".join(e + ", " for e in self.rest_exprs) + ")"]
        for d in sort_doms:
            row = "(" + "".join(e + ", " for e in self.row_exprs[d]) + ")"
            if mode == "key":
                lines.append(f"        rows_{d} = tuple(sorted([{row} for p in range({sizes[d]})]))")
            else:
                lines.append(f"        list_{d} = [{row} for p in range({sizes[d]})]")
                # The row lists stay in index order: their sort is the winner's renaming.
                rows = f"sorted(list_{d})" if mode == "perm" else f"list_{d}"
                lines.append(f"        rows_{d} = tuple({rows})")
            parts.append(f"rows_{d}")
        lines.append("        key = (" + ", ".join(parts) + ",)")
        lines.append("        if best is None or key < best:")
        lines.append("            best = key")
        if mode == "perm":
            lines.append("            won = combo")
            lines.append("            won_rows = (" + "".join(f"list_{d}, " for d in sort_doms) + ")")
            lines.append("    return best, won, won_rows")
        else:
            lines.append("    return best")
        return "\n".join(lines)

    def compile(self, mode: str) -> Callable[[State], Any]:
        """The function :meth:`source` defines, compiled."""
        identity = tuple(tuple(range(self.sizes[d])) for d in self.perm_doms)
        namespace: dict[str, Any] = {"PERMINFO": self.perm_info, "ORDERINGS": _orderings,
                                     "PRODUCT": itertools.product, "IDENTITY": identity}
        code = compile(self.source(mode), f"<symmetry:{self.name}>", "exec")
        exec(code, namespace)  # noqa: S102 - generated from the spec layout
        return namespace["canon"]  # type: ignore[no-any-return]


def _orderings(sigs: list[Any]) -> list[tuple[int, ...]]:
    """Orderings of elements sorted by signature; all permutations within ties."""
    order = sorted(range(len(sigs)), key=sigs.__getitem__)
    groups: list[list[int]] = []
    for e in order:
        if groups and sigs[groups[-1][0]] == sigs[e]:
            groups[-1].append(e)
        else:
            groups.append([e])
    if len(groups) == len(order):
        return [tuple(order)]
    return [
        tuple(itertools.chain.from_iterable(combo))
        for combo in itertools.product(*[itertools.permutations(g) for g in groups])
    ]


def orbit_size_bound(inst: Instance, plan: SymmetryPlan) -> int:
    """Largest possible orbit: the product of the reduced domains' factorials."""
    n = 1
    for d in (*plan.permuted, *plan.sorted):
        n *= math.factorial(inst.sizes[d])
    return n
