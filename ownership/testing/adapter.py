"""What a model-based test is written against: the :class:`Adapter` contract, and finding an adapter and its spec.

An :class:`Adapter` binds each spec action to a call on the implementation
and says how to read back what can be observed (free-list size, page owners,
refcounts).  Hypothesis picks actions among those the spec allows; after
every step the implementation's observation must equal the one computed from
the spec's state.  The first step where they differ fails, is shrunk, and is
shown with both sides::

    class MyAdapter(Adapter):
        spec = "my_allocator_spec.py"
        rejected = (OutOfPages,)

        def setup(self):
            self.impl = MyAllocator(num_pages=4)

        def allocate(self, req, n):  # same name and arguments as the spec action
            return self.impl.allocate(req, n)  # the pages it picked = the spec's s.choose values

        def observe(self):
            return {"free": self.impl.num_free()}

        def expected(self, s):
            return {"free": sum(s.free[p] for p in s.all(Page))}

    def test_my_allocator():
        assert_conforms(MyAdapter)

See ``docs/testing-your-allocator.md`` for the whole contract.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from ownership.errors import Code, OwnershipError
from ownership.lang.model import Spec


class Rejected(Exception):  # noqa: N818 - reads as "the implementation rejected it"
    """Raise from an adapter method to say the implementation refused the call."""


class Adapter:
    """Binds a spec's actions to an implementation; subclass it (see the module docstring).

    For every spec action ``name(args...)`` define a method ``name(self, *args)``
    taking the element indices (ints).  It performs the action on the
    implementation and returns ``None``, or the values the implementation
    picked where the spec calls ``s.choose`` (e.g. the pages it allocated, as
    spec page indices), in the order of those calls.
    """

    spec: ClassVar[str | Spec | None] = None
    """The spec: a path (relative to this adapter's file, else the working directory) or a Spec."""
    params: ClassVar[Mapping[str, int]] = {}
    """Instance overrides (parameters of the spec)."""
    rejected: ClassVar[tuple[type[BaseException], ...]] = ()
    """Implementation exceptions that mean "refused" (besides :class:`Rejected`)."""
    probe_disabled: ClassVar[frozenset[str]] = frozenset()
    """Actions also sent when the spec's guard is false: the implementation must then refuse."""

    def setup(self) -> None:
        """Build a fresh implementation (called at the start of every example)."""

    def teardown(self) -> None:
        """Release the implementation (called at the end of every example)."""

    def observe(self) -> Mapping[str, Any]:
        """The implementation's observable state."""
        raise NotImplementedError(f"{type(self).__name__} must define observe()")

    def expected(self, s: Any) -> Mapping[str, Any]:
        """The same keys as :meth:`observe`, computed from the spec state ``s`` (read it only)."""
        raise NotImplementedError(f"{type(self).__name__} must define expected(s)")


def source_of(cls: type) -> str | None:
    """The file ``cls`` is defined in, or ``None``."""
    try:
        return inspect.getsourcefile(cls)
    except (TypeError, OSError):  # defined in a module that is not importable by name
        return None


def resolve_spec(adapter_cls: type[Adapter], spec: str | Path | Spec | None) -> Spec:
    """The spec to test against: ``spec`` if given, else the adapter's own (a path relative to its file)."""
    from ownership.lang.loader import load_spec

    target = spec if spec is not None else adapter_cls.spec
    if target is None:
        raise OwnershipError(Code.ADAPTER_INVALID, f"{adapter_cls.__name__} names no spec: set `spec = \"path/to/spec.py\"`")
    if isinstance(target, Spec):
        return target
    path = Path(target)
    if not path.is_absolute() and spec is None:
        # Relative to the file of the class that set `spec` (a subclass may live elsewhere).
        owner = next((c for c in adapter_cls.__mro__ if "spec" in vars(c)), adapter_cls)
        source = source_of(owner)
        if source is not None and (Path(source).parent / path).exists():
            path = Path(source).parent / path
    return load_spec(path)


def load_adapter(ref: str) -> type[Adapter]:
    """``module:Class`` or ``path/to/file.py:Class`` (relative to the working directory)."""
    module_ref, sep, cls_name = ref.rpartition(":")
    if not sep or not module_ref or not cls_name:
        raise OwnershipError(Code.ADAPTER_LOAD, f"--adapter {ref!r}: use module:Class or path/to/file.py:Class")
    try:
        if module_ref.endswith(".py"):
            path = Path(module_ref)
            if not path.exists():
                raise OwnershipError(Code.ADAPTER_LOAD, f"adapter file {module_ref} does not exist")
            name = f"ownership_adapter_{abs(hash(path.resolve()))}"
            spec = importlib.util.spec_from_file_location(name, path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            sys.path.insert(0, str(path.resolve().parent))
            spec.loader.exec_module(module)
        else:
            if "" not in sys.path and str(Path.cwd()) not in sys.path:
                sys.path.insert(0, str(Path.cwd()))
            module = importlib.import_module(module_ref)
    except OwnershipError:
        raise
    except Exception as exc:  # noqa: BLE001 - user code
        raise OwnershipError(Code.ADAPTER_LOAD, f"importing {module_ref} raised {type(exc).__name__}: {exc}") from None
    cls = getattr(module, cls_name, None)
    if not (isinstance(cls, type) and issubclass(cls, Adapter)):
        raise OwnershipError(Code.ADAPTER_LOAD, f"{module_ref} has no Adapter subclass named {cls_name}")
    return cls
