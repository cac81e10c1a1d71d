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

import array
import collections
import dis
import sys
import sysconfig
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ownership.errors import Code, OwnershipError
from ownership.library import is_checker_code

IMPURE_MODULES = frozenset({"random", "time", "secrets", "uuid", "datetime"})
"""Modules whose functions answer differently from call to call (or from run to run)."""

MUTABLE_TYPES = (list, dict, set, bytearray, array.array, collections.deque)
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
        if root == "sys" and "modules" in attrs:
            return "reaches modules through sys.modules, where module-level data can change between calls"
        return None
    if hasattr(value, "cache_info"):
        return "calls a function cached with functools.lru_cache/cache, whose answer can come from another state"
    module = getattr(value, "__module__", None)
    if isinstance(module, str) and module.split(".")[0] in IMPURE_MODULES and callable(value):
        return f"calls {module}.{getattr(value, '__name__', '?')}, whose answers change from call to call"
    if getattr(value, "__name__", None) == "urandom" and callable(value):
        return "uses os.urandom, which answers differently every call"
    if isinstance(value, (types.GeneratorType, collections.abc.Iterator)):
        return (f"reads a module-level {type(value).__name__}, whose next answer changes with every call: keep "
                "changing data in state variables")
    if isinstance(value, MUTABLE_TYPES):
        return (f"reads a module-level {type(value).__name__}, which any call may change: keep changing data in "
                "state variables, and constants in tuples or frozensets")
    return None


class Project:
    """Which files are the spec author's own code: the static check follows calls into them.

    A module counts when its file sits under the spec's folder or its project
    root (the nearest folder above the spec with ``pyproject.toml``,
    ``setup.cfg`` or ``.git``; the spec's folder if none), and is neither the
    standard library, an installed package, nor the checker itself.
    """

    def __init__(self, spec_file: str | None) -> None:
        self.roots: tuple[Path, ...] = ()
        if spec_file:
            folder = Path(spec_file).resolve().parent
            root = next((d for d in (folder, *folder.parents)
                         if any((d / m).exists() for m in ("pyproject.toml", "setup.cfg", ".git"))), folder)
            self.roots = (folder, root)
        self.outside = tuple(Path(p).resolve() for p in {*sysconfig.get_paths().values(), sys.prefix,
                                                           sys.base_prefix} if p) + (_CHECKER,)
        self.known: dict[str, bool] = {}
        self.refs: dict[tuple[int, str], tuple[dict[str, Any], str]] = {}
        """Every module global spec code refers to, as (the module's globals, name): what the audit watches."""

    def owns(self, file: str | None) -> bool:
        """Whether ``file`` is the project's own code (cached per file name)."""
        if not file or file.startswith("<"):
            return False
        got = self.known.get(file)
        if got is None:
            path = Path(file).resolve()
            got = (any(path.is_relative_to(r) for r in self.roots)
                   and not any(path.is_relative_to(o) for o in self.outside)
                   and not {"site-packages", "dist-packages"} & set(path.parts))
            self.known[file] = got
        return got

    def modules(self, env: dict[str, Any]) -> list[types.ModuleType]:
        """The project modules bound in ``env`` (a spec's or a helper's globals)."""
        return [v for v in env.values() if isinstance(v, types.ModuleType) and self.owns(getattr(v, "__file__", None))]


_CHECKER = Path(__file__).resolve().parents[1]
"""The checker's own package: never followed (its code is checked by its own tests)."""


def _callees(value: Any, project: Project, same_module: str | None) -> Iterator[types.FunctionType]:
    """The functions inside ``value`` that the static check reads too: spec code, or the project's own."""
    inner = getattr(value, "__wrapped__", value)
    if isinstance(inner, types.FunctionType):
        if inner.__module__ == same_module or project.owns(inner.__code__.co_filename):
            yield inner
    elif isinstance(inner, type) and project.owns(getattr(sys.modules.get(inner.__module__), "__file__", None)):
        # A class of the project: its own methods (a dataclass's generated ones are not in a project file).
        for attr in vars(inner).values():
            fn = getattr(attr, "__func__", attr)
            if isinstance(fn, types.FunctionType) and project.owns(fn.__code__.co_filename):
                yield fn


def check_function(fn: Callable[..., Any], what: str, seen: set[int] | None = None,
                   project: Project | None = None) -> None:
    """Raise OWN067 if ``fn``, or code it calls in its module or in the project's modules, refers to something impure.

    The error is located where the impure thing is used: in the spec, or in
    the project module the spec imports.
    """
    seen = set() if seen is None else seen
    project = Project(None) if project is None else project
    code = getattr(fn, "__code__", None)
    if code is None or id(code) in seen:
        return
    seen.add(id(code))
    env = getattr(fn, "__globals__", {})
    here = getattr(fn, "__module__", None)
    where = "" if not project.owns(code.co_filename) or _is_spec_module(env) else (
        f" (in {Path(code.co_filename).name}, {getattr(fn, '__qualname__', '?')}, which it calls)")
    names: set[str] = set()
    stores: set[str] = set()
    attr_stores: list[tuple[str, str, int]] = []
    """Attributes assigned on a module-level object (``helper.count = ...``, ``spec.seen = ...``)."""
    local_imports: dict[str, Any] = {}
    attrs_of: dict[str, set[str]] = {}
    """Per name loaded (a module, say), the attributes read right after it: ``helper.once``."""
    for c in _codes(code):
        names.update(c.co_names)
        loaded: str | None = None
        loaded_global: str | None = None
        for ins in dis.get_instructions(c):
            if ins.opname in ("STORE_GLOBAL", "DELETE_GLOBAL"):
                stores.add(str(ins.argval))
            elif ins.opname in ("STORE_ATTR", "DELETE_ATTR") and loaded_global is not None:
                line = ins.positions.lineno if ins.positions is not None else None
                attr_stores.append((loaded_global, str(ins.argval), line or c.co_firstlineno))
            elif ins.opname == "IMPORT_NAME" and str(ins.argval) in sys.modules:
                local_imports[str(ins.argval)] = sys.modules[str(ins.argval)]  # ``import helper`` inside a function
            if loaded is not None and ins.opname in ("LOAD_ATTR", "LOAD_METHOD", "IMPORT_FROM"):
                attrs_of.setdefault(loaded, set()).add(str(ins.argval))
            loaded = str(ins.argval) if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME", "LOAD_FAST", "LOAD_DEREF",
                                                       "IMPORT_NAME") else None
            loaded_global = str(ins.argval) if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME") else None
    for name in sorted(stores):
        raise OwnershipError(Code.SPEC_IMPURE, f"{what}{where} assigns the module global {name}: state an action "
                             "changes must be a state variable (spec.var)", code.co_filename, _line_of(code, name))
    # The vocabulary's own code is trusted: it unwraps elements and reads its own declarations by design.
    trusted = is_checker_code(code.co_filename)
    for obj, attr, line in ([] if trusted else attr_stores):
        raise OwnershipError(Code.SPEC_IMPURE, f"{what}{where} assigns the attribute {attr} of the module-level "
                             f"{obj}: state an action changes must be a state variable (spec.var)",
                             code.co_filename, line)
    for name in ("globals", "setattr", "delattr", "vars"):
        if not trusted and name in names and name not in env:
            raise OwnershipError(Code.SPEC_IMPURE, f"{what}{where} calls {name}(), which reaches module-level data "
                                 "that can change between calls: keep changing data in state variables",
                                 code.co_filename, _line_of(code, name))
    for default in (*(getattr(fn, "__defaults__", None) or ()), *(getattr(fn, "__kwdefaults__", None) or {}).values()):
        if not trusted and isinstance(default, MUTABLE_TYPES):
            raise OwnershipError(Code.SPEC_IMPURE, f"{what}{where} has a mutable default argument (a "
                                 f"{type(default).__name__}), which keeps what one call leaves in it for the next: "
                                 "use None and build it inside, or keep it in a state variable",
                                 code.co_filename, code.co_firstlineno)
    for name in sorted(names):
        if not trusted and (name.startswith("_Element__") or (name in env and _unwraps_elements(env[name]))):
            # The checker's own way to an element's index or name: spec code that takes it can order
            # interchangeable elements, which symmetry reduction assumes it never does.
            raise OwnershipError(Code.SYMMETRY_BROKEN, f"{what}{where} uses {name}, the checker's own access to an "
                                 "element's index or name: elements of a symmetric domain are interchangeable; compare "
                                 "them with == or declare the domain ordered (`ordered=True`) if the protocol uses "
                                 "their order", code.co_filename, _line_of(code, name))
        if name not in env:
            continue
        value = env[name]
        project.refs.setdefault((id(env), name), (env, name))
        why = _impure_global(value, names)
        if why is not None:
            raise OwnershipError(Code.SPEC_IMPURE, f"{what}{where} {why} ({name})", code.co_filename,
                                 _line_of(code, name))
        # Code the action calls is part of the action: look inside it too.
        for inner in _callees(value, project, here):
            check_function(inner, what, seen, project)
    # ``module.attr`` of a project module the code refers to: judged as if imported by name.
    bound = {**local_imports, **{n: env[n] for n in names if n in env}}
    for module in project.modules(bound):
        read = set().union(*(attrs_of.get(n, set()) for n, v in bound.items() if v is module))
        for attr in sorted(read & set(vars(module))):
            value = vars(module)[attr]
            project.refs.setdefault((id(vars(module)), attr), (vars(module), attr))
            why = _impure_global(value, names)
            if why is not None and not isinstance(value, types.ModuleType):
                raise OwnershipError(Code.SPEC_IMPURE, f"{what}{where} {why} "
                                     f"({Path(str(module.__file__)).stem}.{attr})", code.co_filename, _line_of(code, attr))
            for inner in _callees(value, project, None):
                check_function(inner, what, seen, project)


def _unwraps_elements(value: Any) -> bool:
    """Whether ``value`` is the vocabulary's unwrapping of elements (``ix``, ``plain``) or their module."""
    from ownership.lang import elements

    return value is elements or value is elements.ix or value is elements.plain


def _is_spec_module(env: dict[str, Any]) -> bool:
    """Whether ``env`` is a spec module's globals (it declares a Spec): its code is the spec's own."""
    return any(type(v).__name__ == "Spec" and type(v).__module__ == "ownership.lang.model" for v in env.values())


def check_static(spec: Any) -> None:
    """Refuse (OWN067) a spec whose actions, invariants or helpers refer to impure things.

    Calls into the spec's own project modules (:class:`Project`) are followed,
    so a memo dict or a counter in a helper module is refused at its line there.
    """
    seen: set[int] = set()
    project = Project(getattr(spec, "file", None))
    for act in spec.actions.values():
        check_function(act.fn, f"action {act.name}", seen, project)
    for inv in spec.invariants.values():
        check_function(inv.fn, f"invariant {inv.name}", seen, project)
    for prop in spec.properties.values():
        for fn in prop.functions():
            check_function(fn, f"property {prop.name}", seen, project)
    for name, fn in spec.helpers.items():
        check_function(fn, f"helper {name}", seen, project)
    if spec.done is not None:
        check_function(spec.done, "the terminal predicate", seen, project)


def watched_globals(spec: Any) -> list[tuple[dict[str, Any], str]]:
    """Every module global the spec's code refers to, in its module or its project's: (the module's globals, name).

    The determinism audit watches them: a search must leave them as it found them.
    """
    project = Project(getattr(spec, "file", None))
    seen: set[int] = set()
    fns = [a.fn for a in spec.actions.values()] + [i.fn for i in spec.invariants.values()] + list(spec.helpers.values())
    fns += [fn for prop in spec.properties.values() for fn in prop.functions()]
    for fn in [*fns, *([spec.done] if spec.done is not None else [])]:
        check_function(fn, "spec code", seen, project)
    return list(project.refs.values())
