"""Load spec modules from files, turning every failure into a one-line error."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from ownership.errors import Code, OwnershipError, SpecWarning, location_in
from ownership.lang import reach
from ownership.lang.model import Spec


def load_spec(path: str | Path) -> Spec:
    """Import ``path`` and return the :class:`Spec` it defines (validated).

    A syntax error, an exception while importing, a file with no ``Spec`` and
    a spec with no invariants each raise :class:`OwnershipError` with the
    file and line.
    """
    p = Path(path)
    if p.is_dir():
        raise OwnershipError(Code.SPEC_IMPORT, "is a directory; name a spec file", str(p))
    if not p.exists():
        raise OwnershipError(Code.SPEC_IMPORT, "no such spec file", str(p))
    source = _source_text(p)
    try:
        compile(source, str(p), "exec")
    except SyntaxError as exc:
        raise OwnershipError(Code.SPEC_SYNTAX, f"syntax error: {exc.msg}", str(p), exc.lineno) from None
    module = _exec_spec_module(p, source)
    found = [v for v in vars(module).values() if isinstance(v, Spec)]
    if not found:
        raise OwnershipError(Code.SPEC_NO_SPEC, "defines no Spec (expected `spec = Spec(...)`)", str(p), 1)
    spec = getattr(module, "spec", None)
    if not isinstance(spec, Spec):
        spec = found[0]
    spec.file = str(p)
    _name_params_as_given(spec, p)
    spec.validate()
    # What the spec can run decides both: a redefinition that changes nothing (OWN008, refused)
    # and an action-shaped function nothing runs (OWN071, a warning).
    reached = reach.Reach(spec)
    reach.check_redefinitions(module, spec, str(p), reached)
    reach.check_constant_redefinitions(module, spec, str(p), reached)
    spec.warnings = reach.unregistered_actions(module, spec, str(p), reached)
    return spec


def _name_params_as_given(spec: Spec, p: Path) -> None:
    """Locate the parameters this file declares by the path the user gave, as every other error is."""
    for name, param in spec.params.items():
        if param.file is not None and param.file != str(p) and _same_file(param.file, p):
            spec.params[name] = dataclasses.replace(param, file=str(p))


def _same_file(a: str, b: Path) -> bool:
    try:
        return Path(a).resolve() == b.resolve()
    except OSError:  # pragma: no cover - unreadable paths
        return False


def _module_name(p: Path) -> str:
    """One module name per spec file, however it is reached (loaded, or imported by a derived spec)."""
    return f"{reach.SPEC_MODULE_PREFIX}{p.stem}_{abs(hash(str(p.resolve()))):x}"


SOURCE_DIGEST = "__ownership_source_sha256__"
"""The module attribute holding the SHA-256 of the source a spec module was executed from."""


def _exec_spec_module(p: Path, source: str) -> ModuleType:
    """Execute the spec file ``p`` as a fresh module, with its folder's sibling specs importable."""
    module_name = _module_name(p)
    spec_obj = importlib.util.spec_from_file_location(module_name, p)
    if spec_obj is None or spec_obj.loader is None:  # pragma: no cover - only for odd paths
        raise OwnershipError(Code.SPEC_IMPORT, "cannot import", str(p))
    module = importlib.util.module_from_spec(spec_obj)
    # The digest of what ran: another process rebuilding an instance refuses a file edited since (OWN106).
    module.__dict__[SOURCE_DIGEST] = hashlib.sha256(source.encode("utf-8")).hexdigest()
    sys.modules[module_name] = module  # dataclasses and pickling look modules up by name
    # A fixed spec imports the shipped one it patches (``import sglang_disagg_v0_5_19``).
    # The finder resolves that import to the module this process already loaded
    # from that file, so the base spec runs once and there is one Spec object for it.
    # Other modules of the folder (a package of helpers) stay importable as before.
    folder = p.resolve().parent
    finder = _SiblingSpecs(folder)
    sys.meta_path.insert(0, finder)
    added = str(folder) not in sys.path
    if added:
        sys.path.insert(0, str(folder))
    try:
        spec_obj.loader.exec_module(module)
    except OwnershipError as exc:
        if exc.file is None:
            exc.file = str(p)
        raise
    except Exception as exc:  # noqa: BLE001 - spec code is user code
        sys.modules.pop(module_name, None)
        raise OwnershipError(
            Code.SPEC_IMPORT, f"{type(exc).__name__}: {exc}", str(p), location_in(p, exc)
        ) from None
    except SystemExit as exc:  # a spec calling sys.exit() must not end the checker with its status
        sys.modules.pop(module_name, None)
        raise OwnershipError(
            Code.SPEC_IMPORT, f"SystemExit({exc.code!r}): the spec called sys.exit() while loading",
            str(p), location_in(p, exc),
        ) from None
    finally:
        sys.meta_path.remove(finder)
        if added:
            sys.path.remove(str(folder))
    # A derived spec loaded later imports this file by its plain name: point that
    # name at this load, not at an earlier one, so both see the same Spec object.
    alias_file = getattr(sys.modules.get(p.stem), "__file__", None)
    if alias_file and Path(alias_file).resolve() == p.resolve():
        sys.modules[p.stem] = module
    return module


class _SiblingSpecs(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``import base`` inside a spec: the spec file ``base.py`` of the same folder, executed at most once.

    Installed only while a spec executes.  A sibling already loaded in this
    process (by :func:`load_spec` or an earlier import) is reused as it is.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if "." in name or path is not None:
            return None
        file = self.folder / f"{name}.py"
        if not file.is_file():
            return None
        return importlib.util.spec_from_loader(name, self, origin=str(file))

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        file = Path(str(spec.origin))
        loaded = sys.modules.get(_module_name(file))
        if loaded is not None:
            return loaded
        return _exec_spec_module(file, _source_text(file))

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to do: :meth:`create_module` returned an executed module."""


def _source_text(p: Path) -> str:
    """The spec's source as text: UTF-8, the encoding every part of ownership reads specs in.

    A binary file, a file in another encoding (even one with a coding line:
    the reports and diagnoses quote spec lines as UTF-8), or one that cannot
    be read is OWN018 rather than a ``UnicodeDecodeError``.
    """
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise OwnershipError(Code.SPEC_UNREADABLE, f"cannot read: {exc.strerror or exc}", str(p)) from None
    if b"\0" in data:
        raise OwnershipError(Code.SPEC_UNREADABLE, "binary file (it contains NUL bytes), not Python source", str(p))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise OwnershipError(
            Code.SPEC_UNREADABLE,
            f"not UTF-8 text (byte 0x{data[exc.start]:02x}); spec files are read as UTF-8, save it as UTF-8",
            str(p), line,
        ) from None


def unregistered_actions(module: ModuleType, spec: Spec, source: str, path: str) -> list[SpecWarning]:
    """OWN071 for the spec module (see :func:`ownership.lang.reach.unregistered_actions`); ``source`` is unused."""
    return reach.unregistered_actions(module, spec, path)


def spec_files(directory: str | Path) -> list[Path]:
    """Spec modules in ``directory`` (``*.py`` not starting with ``_``), sorted."""
    d = Path(directory)
    if not d.is_dir():
        raise OwnershipError(Code.BAD_OPTION, "not a directory", str(d))
    return sorted(f for f in d.glob("*.py") if not f.name.startswith("_"))
