"""The purity rules: spec code is a function of the state it reads, and nothing else.

Every engine assumes that running an action twice in one state gives the
same successors, and the explorer assumes more: that a disabled action stays
disabled while the cells its guard read keep their values.  A spec that draws
random numbers, reads the clock, keeps a cache between calls or reads a
module-level object that some call changes breaks both, and a search of it
can say PROVED in one run and VIOLATED in the next.

:func:`check_static` refuses, when a spec is bound to parameters, code that
refers to such things (OWN067); the explorer's determinism audit
(:meth:`ownership.lang.instance.Instance.expand`) catches at run time what a
static look cannot (OWN066).
"""

from __future__ import annotations

import dis
import types
from collections.abc import Callable, Iterator
from typing import Any

from ownership.errors import Code, OwnershipError

IMPURE_MODULES = frozenset({"random", "time", "secrets", "uuid", "datetime"})
"""Modules whose functions answer differently from call to call (or from run to run)."""

MUTABLE_TYPES = (list, dict, set, bytearray)
"""Module-level objects of these types may change between runs of an action."""


def _codes(code: types.CodeType) -> Iterator[types.CodeType]:
    """``code`` and every code object nested in it (lambdas, comprehensions, inner functions)."""
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def _line_of(code: types.CodeType, name: str) -> int | None:
    """The first line of ``code`` (or nested code) that loads or stores global/attribute ``name``."""
    for c in _codes(code):
        line = c.co_firstlineno
        for ins in dis.get_instructions(c):
            if ins.starts_line is not None and ins.starts_line is not False:
                line = ins.positions.lineno if ins.positions and ins.positions.lineno else line
            if ins.argval == name and ins.opname in ("LOAD_GLOBAL", "LOAD_NAME", "STORE_GLOBAL", "LOAD_ATTR",
                                                     "LOAD_METHOD", "IMPORT_NAME", "DELETE_GLOBAL"):
                return ins.positions.lineno if ins.positions and ins.positions.lineno else line
    return None


def _impure_global(value: Any, attrs: set[str]) -> str | None:
    """Why a global an action refers to makes it impure, or ``None``."""
    if isinstance(value, types.ModuleType):
        root = value.__name__.split(".")[0]
        if root in IMPURE_MODULES:
            return f"uses the module {value.__name__}, whose answers change from call to call"
        if root == "os" and "urandom" in attrs:
            return "uses os.urandom, which answers differently every call"
        return None
    if hasattr(value, "cache_info"):
        return "calls a function cached with functools.lru_cache/cache, whose answer can come from another state"
    module = getattr(value, "__module__", None)
    if isinstance(module, str) and module.split(".")[0] in IMPURE_MODULES and callable(value):
        return f"calls {module}.{getattr(value, '__name__', '?')}, whose answers change from call to call"
    if getattr(value, "__name__", None) == "urandom" and callable(value):
        return "uses os.urandom, which answers differently every call"
    if isinstance(value, MUTABLE_TYPES):
        return (f"reads a module-level {type(value).__name__}, which any call may change: keep changing data in "
                "state variables, and constants in tuples or frozensets")
    return None


def check_function(fn: Callable[..., Any], what: str, seen: set[int] | None = None) -> None:
    """Raise OWN067 if ``fn`` (or a plain function of its module it calls) refers to something impure."""
    seen = set() if seen is None else seen
    code = getattr(fn, "__code__", None)
    if code is None or id(code) in seen:
        return
    seen.add(id(code))
    env = getattr(fn, "__globals__", {})
    names: set[str] = set()
    stores: set[str] = set()
    for c in _codes(code):
        names.update(c.co_names)
        for ins in dis.get_instructions(c):
            if ins.opname in ("STORE_GLOBAL", "DELETE_GLOBAL"):
                stores.add(str(ins.argval))
    for name in sorted(stores):
        raise OwnershipError(Code.SPEC_IMPURE, f"{what} assigns the module global {name}: state an action "
                             "changes must be a state variable (spec.var)", code.co_filename, _line_of(code, name))
    for name in sorted(names):
        if name not in env:
            continue
        value = env[name]
        why = _impure_global(value, names)
        if why is not None:
            raise OwnershipError(Code.SPEC_IMPURE, f"{what} {why} ({name})", code.co_filename, _line_of(code, name))
        # A plain function of the same module is part of the action: look inside it too.
        inner = getattr(value, "__wrapped__", value)
        if isinstance(inner, types.FunctionType) and inner.__module__ == getattr(fn, "__module__", None):
            check_function(inner, what, seen)


def check_static(spec: Any) -> None:
    """Refuse (OWN067) a spec whose actions, invariants or helpers refer to impure things."""
    seen: set[int] = set()
    for act in spec.actions.values():
        check_function(act.fn, f"action {act.name}", seen)
    for inv in spec.invariants.values():
        check_function(inv.fn, f"invariant {inv.name}", seen)
    for name, fn in spec.helpers.items():
        check_function(fn, f"helper {name}", seen)
    if spec.done is not None:
        check_function(spec.done, "the terminal predicate", seen)
