"""Which functions of a spec module the checker can ever run, read when the spec loads.

Two silent misses come from one question.  A function shaped like an action
whose ``@spec.action`` was forgotten is never run, however many tuples, lists,
dicts or ``__all__`` entries name it (OWN071, a warning).  A derived spec that
redefines one of its base's functions as a plain ``def`` changes nothing: the
base's actions look the name up in the base's module and keep calling the
base's version (OWN008, an error); so does a new ``@spec.helper`` of that name
that nothing calls.

The rule both use: a function is *run by the spec* when the spec can reach
it from what it registered.  The roots are the spec's actions, invariants and
terminal predicate and every other declaration it holds (domain sizes and
names, value sets, the vocabulary objects it keeps in its extensions, such as
an ``idle=`` predicate).  A ``@spec.helper`` is reached through its stand-in:
code that calls the stand-in runs the spec's version of the helper, and a
declared helper that nothing calls is not run.  From a function, reaching
goes on through the names its code loads from its module (a helper called by
name), the variables it closes over, its defaults and what it wraps; from an
object, through its attributes and container items.  Another spec object
(the base of a derived spec) is not entered: what the base registers is not
what this spec runs.  Module-level names are not roots, so a function named
only in a module-level tuple, list, dict or ``__all__`` is not reached.
"""

from __future__ import annotations

import ast
import dis
import functools
import inspect
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import FunctionType, MethodType, ModuleType
from typing import Any

from ownership.errors import Code, OwnershipError, SpecWarning
from ownership.lang.model import Spec, argument_domain, dispatched_helper

SPEC_MODULE_PREFIX = "ownership_spec_"
"""How the loader names the module of every spec file it executes (see :mod:`ownership.lang.loader`)."""

_MAX_OBJECTS = 200_000
"""A bound on the objects visited, so a spec holding a huge structure cannot stall loading."""

_ATOMS = (str, bytes, int, float, complex, bool, type(None), range)


class Reach:
    """The functions a spec can reach (see the module docstring), by identity."""

    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        folder = Path(spec.file).resolve().parent if spec.file else None
        self._folder = folder
        self.functions: dict[int, FunctionType] = {}
        self.complete = True
        """False when the walk stopped at :data:`_MAX_OBJECTS`: the set may then miss functions."""
        self._walk()

    def runs(self, fn: Any) -> bool:
        """Whether ``fn`` (or the function it wraps, such as a helper's dispatcher) is reached."""
        return any(id(f) in self.functions for f in _unwrapped(fn))

    def spec_side(self, module_name: str | None) -> bool:
        """Code written next to the spec: a spec module, or a module of the spec's folder."""
        if not module_name:
            return False
        if module_name.startswith(SPEC_MODULE_PREFIX):
            return True
        if module_name == "ownership" or module_name.startswith("ownership."):
            return False
        file = getattr(sys.modules.get(module_name), "__file__", None)
        if file is None or self._folder is None:
            return False
        try:
            where = Path(file).resolve()
        except OSError:  # pragma: no cover - unreadable paths
            return False
        # An environment kept next to the spec (a .venv in the folder) is installed code, not the spec's.
        return where.is_relative_to(self._folder) and not {"site-packages", "dist-packages"} & set(where.parts)

    def _walk(self) -> None:
        seen: set[int] = set()
        stack: list[Any] = [self.spec]
        while stack:
            obj = stack.pop()
            if isinstance(obj, _ATOMS) or id(obj) in seen:
                continue
            seen.add(id(obj))
            if len(seen) > _MAX_OBJECTS:
                self.complete = False
                return
            stack.extend(self._children(obj))

    def _children(self, obj: Any) -> Iterator[Any]:
        if isinstance(obj, Spec):
            if obj is self.spec:  # another spec (a base) is not entered: see the module docstring
                # A helper runs when code calls its stand-in, not because it is declared (see below).
                yield from (v for k, v in vars(obj).items() if k != "helpers")
            return
        if isinstance(obj, FunctionType):
            self.functions[id(obj)] = obj
            helper = dispatched_helper(obj)
            if helper is not None:  # the stand-in runs this spec's version of the helper
                yield self.spec.helpers.get(helper)
            yield from self._function_children(obj)
            return
        if isinstance(obj, MethodType):
            yield obj.__func__
            yield obj.__self__
            return
        if isinstance(obj, (staticmethod, classmethod)):
            yield obj.__func__
            return
        if isinstance(obj, property):
            yield from (obj.fget, obj.fset, obj.fdel)
            return
        if isinstance(obj, functools.partial):
            yield obj.func
            yield from obj.args
            yield from obj.keywords.values()
            return
        if isinstance(obj, dict):
            yield from obj.keys()
            yield from obj.values()
            return
        if isinstance(obj, (list, tuple, set, frozenset)):
            yield from obj
            return
        if isinstance(obj, ModuleType):
            return  # a module is entered only through the names code loads from it (below)
        if isinstance(obj, type):
            if self.spec_side(getattr(obj, "__module__", None)):
                yield from vars(obj).values()
            return
        if self.spec_side(type(obj).__module__):
            yield type(obj)
        yield from _attributes(obj)

    def _function_children(self, fn: FunctionType) -> Iterator[Any]:
        for cell in fn.__closure__ or ():
            try:
                yield cell.cell_contents
            except ValueError:  # an empty cell: a variable not yet assigned
                continue
        yield from fn.__defaults__ or ()
        yield from (fn.__kwdefaults__ or {}).values()
        yield from vars(fn).values()  # __wrapped__, and attributes a decorator set
        if not self.spec_side(fn.__module__):
            return  # the checker's own code calls spec code only through what it holds
        globals_, attributes = _loaded_names(fn.__code__)
        for name in globals_:
            value = fn.__globals__.get(name)
            if value is None:
                continue
            if isinstance(value, ModuleType):
                # ``base.lock(s)``: the attributes this code loads, from a module of the spec's side.
                if self.spec_side(value.__name__):
                    yield from (getattr(value, n) for n in attributes if n in vars(value))
                continue
            yield value


def _loaded_names(code: Any) -> tuple[set[str], set[str]]:
    """The global names and the attribute names a code object (and the code nested in it) loads.

    Read from the bytecode rather than ``co_names``, which mixes the two: an
    action reading ``s.finish[r]`` does not call a module function ``finish``.
    """
    globals_: set[str] = set()
    attributes: set[str] = set()
    for ins in dis.get_instructions(code):
        if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
            globals_.add(ins.argval)
        elif ins.opname in ("LOAD_ATTR", "LOAD_METHOD", "IMPORT_FROM"):
            attributes.add(ins.argval)
    for const in code.co_consts:
        if hasattr(const, "co_code"):
            g, a = _loaded_names(const)
            globals_ |= g
            attributes |= a
    return globals_, attributes


def _attributes(obj: Any) -> Iterable[Any]:
    try:
        values = list(vars(obj).values())
    except TypeError:
        values = []
    for slot in getattr(type(obj), "__slots__", ()):
        if isinstance(slot, str) and hasattr(obj, slot):
            values.append(getattr(obj, slot))
    return values


def _unwrapped(fn: Any) -> Iterator[Any]:
    """``fn`` and every function it wraps (``functools.wraps`` chains)."""
    seen: set[int] = set()
    while fn is not None and id(fn) not in seen:
        seen.add(id(fn))
        yield fn
        fn = getattr(fn, "__wrapped__", None)


# -- what loading a spec reports -------------------------------------------------


def _own_functions(module: ModuleType) -> Iterator[tuple[str, FunctionType]]:
    """The module's functions defined in it (not imported from another spec or the vocabulary), by name."""
    for name, obj in vars(module).items():
        if isinstance(obj, FunctionType) and obj.__module__ == module.__name__:
            yield name, obj


def _innermost(fn: Any) -> Any:
    """The function at the end of ``fn``'s ``__wrapped__`` chain (a helper behind its stand-in)."""
    inner = fn
    for f in _unwrapped(fn):
        if isinstance(f, FunctionType):
            inner = f
    return inner


def _registered(spec: Spec) -> Iterator[Any]:
    """The functions ``spec`` registered itself: actions, invariants, properties, helpers, terminal predicate."""
    yield from (a.fn for a in spec.actions.values())
    yield from (i.fn for i in spec.invariants.values())
    for prop in spec.properties.values():
        yield from prop.functions()
    yield from spec.helpers.values()
    if spec.done is not None:
        yield spec.done


def _looks_like_action(fn: FunctionType, spec: Spec) -> bool:
    """``fn(s, a: Domain, ...)``: the view first, then only arguments annotated with the spec's domains."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # pragma: no cover - odd callables
        return False
    if not params or any(p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params):
        return False
    namespace = fn.__globals__
    if params[0].annotation is not inspect.Parameter.empty and argument_domain(params[0].annotation, spec, namespace):
        return False  # the first argument is a domain element, not the view
    return all(argument_domain(p.annotation, spec, namespace) is not None and p.default is inspect.Parameter.empty
               for p in params[1:])


def unregistered_actions(module: ModuleType, spec: Spec, path: str, reach: Reach | None = None) -> list[SpecWarning]:
    """OWN071: functions of the spec module shaped like an action that the spec never runs.

    An action whose ``@spec.action`` was forgotten is silently never run, and
    every invariant then holds for a protocol without that step.  A function
    of this module counts when its first argument could be the view and every
    other argument is annotated with one of the spec's domains, and the spec
    cannot reach it (:class:`Reach`): being named in a module-level tuple,
    list, dict or ``__all__``, or passed to code that does not keep it, does
    not make a function run.
    """
    reach = reach or Reach(spec)
    mine = {id(f) for f in _registered(spec)}  # a declared helper nothing calls is not a forgotten action
    # A function registered on another spec of the same file is that spec's, not a forgotten one.
    elsewhere = {id(f) for other in vars(module).values() if isinstance(other, Spec) and other is not spec
                 for f in _registered(other)}
    out: list[SpecWarning] = []
    for name, obj in _own_functions(module):
        fn = _innermost(obj)
        if reach.runs(obj) or id(fn) in mine or id(fn) in elsewhere or not _looks_like_action(fn, spec):
            continue
        out.append(SpecWarning(
            Code.UNREGISTERED_ACTION,
            f"function {name} looks like an action (the view, then arguments typed with the spec's domains) "
            f"but is not registered and no registered action, invariant or helper calls it, so no engine "
            f"ever runs it (naming it in a tuple, list, dict or __all__ does not): add @spec.action "
            f"(or @spec.invariant / @spec.helper if that is what it is)",
            path, fn.__code__.co_firstlineno, name,
        ))
    return out


def check_redefinitions(module: ModuleType, spec: Spec, path: str, reach: Reach | None = None) -> None:
    """OWN008: refuse a function that redefines one another spec's code runs for this spec, and is never run.

    A derived spec's module that defines ``lock`` does not change the base's
    ``lock``: the base's actions look the name up in the base's module.  Such a
    definition (a plain ``def``, or a new ``@spec.helper`` that nothing calls)
    is never run while a function of the same name from another spec module
    is; that is refused at the definition, with the way to make the change
    take effect.
    """
    reach = reach or Reach(spec)
    if not reach.complete:
        return  # the walk stopped early: a missing function is no proof of a redefinition
    theirs: dict[str, list[FunctionType]] = {}
    for fn in reach.functions.values():
        if fn.__module__ != module.__name__ and reach.spec_side(fn.__module__) and fn.__name__ != "<lambda>":
            theirs.setdefault(fn.__name__, []).append(fn)
    for name, obj in _own_functions(module):
        others = theirs.get(name)
        if not others or reach.runs(obj):
            continue
        fn = _innermost(obj)
        base = _innermost(others[0])
        where = f"{Path(base.__code__.co_filename).name}:{base.__code__.co_firstlineno}"
        if name in spec.actions and _innermost(spec.actions[name].fn) is base:
            fix = f"write it with @spec.replace to replace the action {name}"
        elif spec.helpers.get(name) is fn:
            fix = ("a @spec.helper of this spec does not replace a plain function of the base: declare the "
                   "original with @spec.helper and write this one with @spec.replace")
        elif any(dispatched_helper(f) == name for f in others):
            fix = f"write it with @spec.replace to replace the @spec.helper {name}"
        else:
            fix = (f"declare the original with @spec.helper and write this one with @spec.replace, or replace "
                   f"(@spec.replace) the actions that call {name}; rename it if it is unrelated")
        raise OwnershipError(
            Code.REDEFINITION_IGNORED,
            f"function {name} redefines {name} of another spec ({where}), which changes nothing: nothing "
            f"spec {spec.name} runs calls it, and the original's callers look the name up in their own "
            f"module; {fix}",
            path, fn.__code__.co_firstlineno,
        )


def _is_constant(value: Any) -> bool:
    """A plain value a spec might mean to override: a number, a string, or a tuple or frozenset of them."""
    if isinstance(value, (tuple, frozenset)):
        return all(_is_constant(v) for v in value)
    return isinstance(value, (int, float, str))


def _assigned_at(source_file: str, name: str) -> int | None:
    """The line of the last module-level assignment to ``name`` in ``source_file``."""
    try:
        tree = ast.parse(Path(source_file).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):  # pragma: no cover - the loader read it already
        return None
    line = None
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AnnAssign, ast.AugAssign)) else []
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            line = node.lineno
    return line


def check_constant_redefinitions(module: ModuleType, spec: Spec, path: str, reach: Reach | None = None) -> None:
    """OWN008 for a module constant: ``LIMIT = 4`` in a derived file does not change the base's ``LIMIT``.

    Refused when code of another spec module that this spec runs reads a
    global of that name holding a different value, and nothing of this
    module that the spec runs reads it.
    """
    reach = reach or Reach(spec)
    if not reach.complete:
        return
    reads: dict[str, set[str]] = {}
    for fn in reach.functions.values():
        if reach.spec_side(fn.__module__):
            reads.setdefault(fn.__module__, set()).update(_loaded_names(fn.__code__)[0])
    mine = reads.get(module.__name__, set())
    for name, value in vars(module).items():
        if name.startswith("__") or name in mine or not _is_constant(value):
            continue
        for fn in reach.functions.values():
            if fn.__module__ == module.__name__ or name not in reads.get(fn.__module__, ()):
                continue
            theirs = fn.__globals__.get(name, value)
            if theirs is value or theirs == value:
                continue
            file = getattr(sys.modules.get(fn.__module__), "__file__", None) or fn.__code__.co_filename
            raise OwnershipError(
                Code.REDEFINITION_IGNORED,
                f"{name} = {value!r} redefines {name} of another spec ({Path(file).name}, where it is "
                f"{theirs!r}), which changes nothing: its code reads its own module's {name}; make it a "
                f"parameter of the base (spec.param) to override with -p, or replace (@spec.replace) the "
                f"actions that read it",
                path, _assigned_at(path, name),
            )
