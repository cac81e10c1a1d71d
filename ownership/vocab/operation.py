"""One definition per vocabulary operation: the concrete body, with its Z3 encoding registered for it.

A vocabulary operation (``pool.alloc(s, r, n)``) has two meanings: the
concrete body that the explorer, the replay and every trace run, and a
direct encoding that the Z3 engines run instead of forking page by page.
``@operation`` marks the concrete body; :func:`encodes` registers the
encoding, in :mod:`ownership.vocab.encodings` (which imports z3, so it is
imported on the first symbolic call only).  A call dispatches on the view:
``s.symbolic`` is true only for the Z3 engines' view.

The encoding takes ``s`` first, then the object the operation is a method
of (if any), then the operation's own arguments.  It must mean exactly what
the concrete body does: every counterexample is replayed through the
concrete body and compared cell by cell.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Callable
from typing import Any, TypeVar, cast

ENCODINGS = "ownership.vocab.encodings"
"""The module whose import registers every vocabulary encoding."""

F = TypeVar("F", bound=Callable[..., Any])


class Encoding:
    """The symbolic body registered for one operation (``fn`` is ``None`` until the encodings are imported)."""

    __slots__ = ("name", "fn")

    def __init__(self, name: str) -> None:
        self.name = name
        self.fn: Callable[..., Any] | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.fn is None:
            importlib.import_module(ENCODINGS)
            if self.fn is None:
                raise NotImplementedError(f"vocabulary operation {self.name} has no symbolic encoding")
        return self.fn(*args, **kwargs)


def operation(concrete: F) -> F:
    """Mark ``concrete`` (a function or method taking the view as ``s``) as a vocabulary operation.

    The concrete path costs one call and one attribute test more than the
    body itself; the wrapper is a plain function so that methods still bind
    as methods.
    """
    params = list(inspect.signature(concrete).parameters)
    if "s" not in params[:2]:
        raise TypeError(f"{concrete.__qualname__}: a vocabulary operation takes the view as its first or second "
                        "parameter, named s")
    encoded = Encoding(concrete.__qualname__)
    op: Callable[..., Any]
    if params[0] == "s":

        def op(s: Any, *args: Any, **kwargs: Any) -> Any:
            if s.symbolic:
                return encoded(s, *args, **kwargs)
            return concrete(s, *args, **kwargs)

    else:

        def op(owner: Any, s: Any, *args: Any, **kwargs: Any) -> Any:
            if s.symbolic:
                return encoded(s, owner, *args, **kwargs)
            return concrete(owner, s, *args, **kwargs)

    functools.update_wrapper(op, concrete)
    op.__dict__["encoding"] = encoded
    return cast(F, op)


def encoding_of(op: Callable[..., Any]) -> Encoding:
    """The registration slot of an operation made by :func:`operation`."""
    slot = getattr(op, "encoding", None)
    if not isinstance(slot, Encoding):
        raise TypeError(f"{getattr(op, '__qualname__', op)!r} is not a vocabulary operation")
    return slot


def encodes(op: Callable[..., Any]) -> Callable[[F], F]:
    """Register the decorated function as the symbolic encoding of ``op``."""

    def register(fn: F) -> F:
        encoding_of(op).fn = fn
        return fn

    return register


def registered_operations() -> dict[str, Callable[..., Any]]:
    """Every vocabulary operation, by qualified name (``PagePool.alloc``), found by walking the vocabulary's modules.

    Walked, not kept in a table as the decorator runs, so that no module
    holds mutable state; each operation's :func:`encoding_of` slot says
    whether an encoding is registered for it (import :data:`ENCODINGS`
    first, which this does not: it imports z3).  A new module of ``ownership.vocab`` is found without being listed.
    """
    import pkgutil

    from ownership import vocab

    found: dict[str, Callable[..., Any]] = {}
    for info in pkgutil.iter_modules(vocab.__path__):
        if f"{vocab.__name__}.{info.name}" == ENCODINGS:
            continue  # registers encodings, defines no operation (and imports z3)
        module = importlib.import_module(f"{vocab.__name__}.{info.name}")
        for value in vars(module).values():
            members = vars(value).values() if inspect.isclass(value) else (value,)
            for member in members:
                if isinstance(getattr(member, "encoding", None), Encoding) and member.__module__ == module.__name__:
                    found[member.__qualname__] = member
    return found
