"""An instance as plain data: what another process needs to rebuild it.

A :class:`~ownership.lang.model.Spec`, its
:class:`~ownership.lang.instance.Instance` and the
:class:`~ownership.lang.elements.Element` objects spec code sees hold
functions and a mutable view, and none of them pickles.  What does pickle is
how the instance was made: the spec file, which spec of that file, and the
parameter values.  :func:`describe` records that as an
:class:`InstanceDescription` (a frozen dataclass of strings and ints);
:meth:`InstanceDescription.instantiate` loads the file again and binds the
same values, in this process or in a freshly spawned one.  The rebuilt
instance has the same layout, the same action instances in the same order and
the same initial state, so states (plain tuples), action indices and picks
mean the same on both sides.

The file is named by its absolute path, so a worker started from another
working directory finds it; a spec of the library of specs
(:func:`ownership.library.library_dir`) is also named by its file name there,
and rebuilt from the receiving process's library (the installed package's copy
or the checkout's ``specs/``).  The file's SHA-256 is recorded too: a file
edited between the two is refused (OWN106) rather than rebuilt into an
instance whose states mean something else.  Sibling specs a derived spec
imports are not hashed.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from ownership.errors import Code, OwnershipError
from ownership.lang.model import Spec

if TYPE_CHECKING:
    from ownership.lang.instance import Instance

_LOADED_PREFIX = "ownership_spec_"
"""How :mod:`ownership.lang.loader` names the module of every spec file it executes."""


@dataclass(frozen=True)
class InstanceDescription:
    """How to rebuild an :class:`~ownership.lang.instance.Instance`: picklable, hashable, comparable."""

    path: str
    """The spec file, absolute."""
    spec_name: str
    """The spec's name (``Spec(name)`` or ``derive(name)``): a file may define several."""
    params: tuple[tuple[str, int], ...]
    """Every parameter's value, in declaration order (defaults included, so a changed default cannot move it)."""
    attribute: str | None = None
    """The module attribute the spec is bound to (``spec``), when it was found; else looked up by name."""
    library_name: str | None = None
    """The file's name in the library of specs when it is one of them: rebuilt from the receiver's library."""
    digest: str = ""
    """SHA-256 of the spec file's bytes when it was described."""

    @property
    def param_values(self) -> dict[str, int]:
        """The parameter values as a dict (what :class:`~ownership.lang.instance.Instance` takes)."""
        return dict(self.params)

    def spec_file(self) -> Path:
        """The file to load here: the library's copy for a library spec, else :attr:`path`."""
        if self.library_name is not None:
            from ownership.library import library_spec

            return library_spec(self.library_name)
        return Path(self.path)

    def load(self) -> Spec:
        """Load the spec file and return the described spec (OWN106 if it changed or lacks the spec)."""
        from ownership.lang.loader import load_spec

        file = self.spec_file()
        if self.digest and file.is_file() and _digest(file) != self.digest:
            raise OwnershipError(Code.INSTANCE_NOT_PORTABLE,
                                 f"the spec file changed since the instance of spec {self.spec_name} was described: "
                                 "describe it again", str(file))
        # Already loaded here (the describing process itself): reuse that module, as the loader
        # reuses a sibling spec, rather than executing the file again and replacing it.
        module = _loaded_module(file.resolve())
        found = _spec_in(module, self.spec_name, self.attribute) if module is not None else None
        if found is not None:
            return found
        loaded = load_spec(file)
        if loaded.name == self.spec_name:
            return loaded
        module = _module_of(loaded)
        found = _spec_in(module, self.spec_name, self.attribute) if module is not None else None
        if found is None:
            raise OwnershipError(Code.INSTANCE_NOT_PORTABLE, f"the file defines no spec named {self.spec_name!r}",
                                 str(file))
        return found

    def instantiate(self) -> Instance:
        """A fresh :class:`~ownership.lang.instance.Instance` of the described spec with the described values."""
        from ownership.lang.instance import Instance

        return Instance(self.load(), self.param_values)


def describe(inst: Instance) -> InstanceDescription:
    """The description of ``inst``: its spec file, spec name and parameter values.

    OWN106 for a spec that was not loaded from a file in this process (one
    built inline by a test, say): no other process could rebuild it.
    """
    from ownership.lang.loader import SOURCE_DIGEST

    spec = inst.spec
    module = _module_of(spec)
    file = _file_of(spec, module)
    if file is None:
        raise OwnershipError(
            Code.INSTANCE_NOT_PORTABLE,
            f"spec {spec.name} was not loaded from a spec file in this process (load_spec), so another process "
            "cannot rebuild it" + (" (or it was loaded by a relative path and the working directory changed since)"
                                   if spec.file is not None and not Path(spec.file).is_absolute() else ""),
            spec.file, spec.line,
        )
    if module is None:  # loaded again since: the same file's current module, by the spec's name
        module = _loaded_module(file)
    names = vars(module) if module is not None else {}
    attribute = next((k for k, v in names.items() if v is spec), None) or next(
        (k for k, v in names.items() if isinstance(v, Spec) and v.name == spec.name), None)
    return InstanceDescription(
        path=str(file),
        spec_name=spec.name,
        params=tuple((name, int(value)) for name, value in inst.param_values.items()),
        attribute=attribute,
        library_name=_library_name(file),
        # What this process ran, not what the file holds now: an edit since is refused where it is rebuilt.
        digest=getattr(module, SOURCE_DIGEST, None) or _digest(file),
    )


def description_of(spec_path: str | Path, spec_name: str, params: Mapping[str, int]) -> InstanceDescription:
    """A description written by hand (no instance built here): the file, the spec's name, the values given.

    Parameters left out take their defaults when the instance is built.
    """
    file = Path(spec_path).resolve()
    if not file.is_file():
        raise OwnershipError(Code.INSTANCE_NOT_PORTABLE, "no such spec file", str(file))
    return InstanceDescription(str(file), spec_name, tuple((k, int(v)) for k, v in params.items()),
                               library_name=_library_name(file), digest=_digest(file))


def _module_of(spec: Spec) -> ModuleType | None:
    """The spec module (as the loader executed it) that holds ``spec`` itself, if it is still loaded.

    Found by identity, not by path: a spec loaded by a relative path keeps
    that path in ``spec.file``, while its module knows the absolute one.
    """
    for name, module in list(sys.modules.items()):
        if name.startswith(_LOADED_PREFIX) and module is not None and any(v is spec for v in vars(module).values()):
            return module
    return None


def _file_of(spec: Spec, module: ModuleType | None) -> Path | None:
    """The absolute path of the file ``spec`` was loaded from, or ``None`` when there is none."""
    if module is not None and getattr(module, "__file__", None):
        return Path(str(module.__file__)).resolve()
    if spec.file is None:
        return None
    # Not found by identity (the file was loaded again since): the spec's file counts when the
    # loader executed it in this process and it still defines a spec of this name.
    file = Path(spec.file).resolve()
    loaded = _loaded_module(file)
    return file if loaded is not None and _spec_in(loaded, spec.name, None) is not None else None


def _loaded_module(file: Path) -> ModuleType | None:
    """The module the loader executed from ``file`` (absolute) in this process, if any."""
    for name, module in list(sys.modules.items()):
        where = getattr(module, "__file__", None) if name.startswith(_LOADED_PREFIX) else None
        if where and Path(str(where)).resolve() == file:
            return module
    return None


def _spec_in(module: ModuleType, name: str, attribute: str | None) -> Spec | None:
    """The spec named ``name`` in ``module``: at ``attribute`` when given, else the first of that name."""
    if attribute is not None:
        value = getattr(module, attribute, None)
        if isinstance(value, Spec) and value.name == name:
            return value
    return next((v for v in vars(module).values() if isinstance(v, Spec) and v.name == name), None)


def _library_name(file: Path) -> str | None:
    """``file``'s name in the library of specs, when it lies there (directly: the library is one folder)."""
    from ownership.library import library_dir

    return file.name if file.parent == library_dir().resolve() else None


def _digest(file: Path) -> str:
    try:
        return hashlib.sha256(file.read_bytes()).hexdigest()
    except OSError as exc:
        raise OwnershipError(Code.INSTANCE_NOT_PORTABLE, f"cannot read the spec file: {exc.strerror or exc}",
                             str(file)) from None
