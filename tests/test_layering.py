"""The import layering docs/architecture.md states ("The layers and what flows through them"), one test per contract.

Imports are read with :mod:`ast`, never run: module-level imports, imports
inside functions (lazy: paid on the first call), imports under ``if
TYPE_CHECKING:`` (for annotations only, never run) and modules named by a
string that the file hands to ``importlib.import_module``.  A contract that
says "never" also follows the module-level imports transitively, so an
allowed module cannot smuggle a forbidden one in.  Every failure names the
file, the line, the import as written and the contract it breaks.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

import ownership

PACKAGE = Path(ownership.__file__).resolve().parent
ROOT = PACKAGE.parent
HEAVY = ("z3", "hypothesis", "numba", "llvmlite", "jsonschema")
"""Third-party packages whose import cost only the commands that use them may pay."""

_MODULE_STRING = re.compile(r"ownership(\.[A-Za-z_]\w*)+(:\w+)?")


@dataclass(frozen=True)
class Import:
    """One module a file imports, resolved to its absolute dotted name."""

    file: Path
    line: int
    module: str
    text: str
    """The import as written, one name of it: ``from ownership.core import events``."""
    lazy: bool
    """Inside a function, or named by a string for ``importlib``: paid on first use, not when the file loads."""
    type_only: bool
    """Under ``if TYPE_CHECKING:``: an annotation's import, never run."""

    @property
    def eager(self) -> bool:
        """Whether importing the file runs this import."""
        return not (self.lazy or self.type_only)

    def where(self) -> str:
        """``ownership/x.py:12: from a import b`` (with how it is imported when not at module level)."""
        if self.type_only:
            how = " (under TYPE_CHECKING)"
        elif self.text.startswith("importlib."):
            how = " (a module named by a string)"
        else:
            how = " (inside a function)" if self.lazy else ""
        return f"{self.file.relative_to(ROOT)}:{self.line}: {self.text}{how}"


def module_of(path: Path) -> str:
    """The dotted name of a file of the package."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def path_of(module: str) -> Path | None:
    """The file of a module of the package, or ``None`` (a name, not a module, or not ours)."""
    if module != "ownership" and not module.startswith("ownership."):
        return None
    base = ROOT.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


@cache
def imports_of(path: Path) -> tuple[Import, ...]:
    """Every import of one file, wherever it sits in the file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    here = module_of(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found: list[Import] = []

    def add(node: ast.stmt, module: str, text: str, lazy: bool, type_only: bool) -> None:
        found.append(Import(path, node.lineno, module, text, lazy, type_only))

    def visit(node: ast.AST, lazy: bool, type_only: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                for alias in child.names:
                    add(child, alias.name, f"import {alias.name}", lazy, type_only)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                for alias in child.names:
                    # ``from ownership import inputs`` imports a module; ``from ownership import Spec`` a name.
                    sub = f"{base}.{alias.name}"
                    text = f"from {'.' * child.level}{child.module or ''} import {alias.name}"
                    add(child, sub if path_of(sub) else base, text, lazy, type_only)
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.body:
                    visit(ast.Module(body=[stmt], type_ignores=[]), lazy, True)
                for stmt in child.orelse:
                    visit(ast.Module(body=[stmt], type_ignores=[]), lazy, type_only)
                continue
            visit(child, lazy or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)), type_only)

    visit(tree, False, False)
    if "import_module" in {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}:
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and _MODULE_STRING.fullmatch(node.value):
                module = node.value.partition(":")[0]
                if path_of(module):
                    text = f"importlib.import_module({module!r})"
                    found.append(Import(path, node.lineno, module, text, lazy=True, type_only=False))
    return tuple(found)


def files(*where: str) -> list[Path]:
    """The package's files under each folder or file named relative to ``ownership/`` (``"core"``, ``"errors.py"``)."""
    out: list[Path] = []
    for name in where:
        target = PACKAGE / name
        out.extend([target] if target.is_file() else sorted(target.rglob("*.py")))
    assert out, f"no files under {where}: the layout changed, update this test"
    return out


def within(module: str, *places: str) -> bool:
    """Whether a dotted module lies in one of ``places`` (``"core"`` a package, ``"core.events"`` one module)."""
    return any(module == f"ownership.{p}" or module.startswith(f"ownership.{p}.") for p in places)


def ours(found: Iterable[Import]) -> list[Import]:
    """The imports of the package's own modules."""
    return [i for i in found if i.module == "ownership" or i.module.startswith("ownership.")]


def require(bad: Iterable[Import], contract: str) -> None:
    """Fail naming each offending import (file, line, import as written) and the contract it breaks."""
    lines = [f"{i.where()}\n    breaks: {contract}" for i in bad]
    if lines:
        pytest.fail("\n".join(lines), pytrace=False)


def eager_route(path: Path, forbidden: Callable[[str], bool]) -> list[Import] | None:
    """The chain of module-level imports from ``path`` to a forbidden module of the package, if there is one.

    Importing ``a.b.c`` runs ``a/__init__.py`` and ``a/b/__init__.py`` first,
    so those count; ``ownership/__init__.py`` itself (the public names every
    spec imports) does not, or everything would reach ``vocab/``.
    """
    start = module_of(path)
    route: dict[str, list[Import]] = {start: []}
    queue = [start]
    while queue:
        current = queue.pop(0)
        source = path_of(current)
        assert source is not None
        for imp in imports_of(source):
            if not imp.eager:
                continue
            parts = imp.module.split(".")
            for k in range(2, len(parts) + 1):
                target = ".".join(parts[:k])
                if target in route or path_of(target) is None:
                    continue
                route[target] = [*route[current], imp]
                if forbidden(target):
                    return route[target]
                queue.append(target)
    return None


def require_no_route(paths: Iterable[Path], forbidden: Callable[[str], bool], contract: str) -> None:
    """Each file whose module-level imports reach a forbidden module indirectly, with the chain."""
    out = []
    for path in paths:
        chain = eager_route(path, forbidden)
        if chain and len(chain) > 1:
            steps = "\n    -> ".join(i.where() for i in chain)
            out.append(f"{path.relative_to(ROOT)} reaches {chain[-1].module} when it is imported:\n"
                       f"    -> {steps}\n    breaks: {contract}")
    if out:
        pytest.fail("\n".join(out), pytrace=False)


def test_errors_and_library_import_nothing_of_the_package() -> None:
    contract = "errors.py and library.py import nothing of the package (any layer may import them)"
    require([i for p in files("errors.py", "library.py") for i in ours(imports_of(p))], contract)


def test_lang_imports_only_errors_library_and_core_events() -> None:
    contract = "lang/ imports only errors.py, library.py and core/events.py (the event types its view records)"
    allowed = ("lang", "errors", "library", "core.events")
    paths = files("lang")
    require([i for p in paths for i in ours(imports_of(p)) if not within(i.module, *allowed)], contract)
    # Importing core/events.py runs core/__init__.py first: the package, not its other modules.
    require_no_route(paths, lambda m: m != "ownership.core" and not within(m, *allowed), contract)


CORE_READING_LANG = ("replay.py", "expectation.py")
"""The core modules that read ``lang/``: replay (through ``Instance``) and judging (``Expect``)."""


def test_core_data_modules_import_nothing_above_them() -> None:
    contract = ("core/'s data modules import nothing above them (only core/ and errors.py); "
                f"only {', '.join(CORE_READING_LANG)} read lang/")
    data = [p for p in files("core") if p.name not in CORE_READING_LANG]
    bad = [i for p in data for i in ours(imports_of(p)) if not within(i.module, "core", "errors")]
    require(bad, contract)
    require_no_route(data, lambda m: not within(m, "core", "errors"), contract)


def test_core_replay_and_judging_read_only_lang() -> None:
    contract = "core/'s replay and judging read lang/'s Instance and Expect, and nothing else above core/"
    readers = [PACKAGE / "core" / name for name in CORE_READING_LANG]
    bad = [i for p in readers for i in ours(imports_of(p)) if not within(i.module, "core", "errors", "lang")]
    require(bad, contract)
    # The exemption stays as small as the need: a module that no longer reads lang/ leaves the list.
    for path in readers:
        assert any(within(i.module, "lang") for i in imports_of(path)), (
            f"{path.relative_to(ROOT)} no longer imports lang/: remove it from CORE_READING_LANG")


VOCAB_API = ("lang", "vocab", "errors", "core.events", "core.schema")
"""What ``vocab/`` is written against: the spec language, numbered errors, the events and page marks it records."""


def test_vocab_uses_only_the_public_spec_api() -> None:
    contract = ("vocab/ is written against the public spec API (ownership's exported names, lang/), "
                "errors.py and the event and page-mark types of core/events.py and core/schema.py")
    public = set(ownership.__all__)
    bad = []
    for path in files("vocab"):
        allowed = (*VOCAB_API, "symbolic") if path.name == "encodings.py" else VOCAB_API
        for imp in ours(imports_of(path)):
            if imp.module == "ownership":
                if imp.text.rpartition(" import ")[2] not in public:
                    bad.append(imp)
            elif not within(imp.module, *allowed):
                bad.append(imp)
    require(bad, contract)


def test_vocab_reaches_symbolic_only_through_its_lazily_imported_encodings() -> None:
    contract = ("vocab/'s encodings import symbolic/ (and z3) on the first symbolic call: only "
                "vocab/encodings.py imports them, and no module imports vocab/encodings.py when it loads")
    bad = [i for p in files("vocab") if p.name != "encodings.py" for i in imports_of(p)
           if within(i.module, "symbolic") or i.module.split(".")[0] == "z3"]
    bad += [i for p in files(".") for i in imports_of(p) if i.module == "ownership.vocab.encodings" and i.eager]
    require(bad, contract)
    # The lazy road exists: the operation dispatch names the encodings module for importlib.
    assert any(i.module == "ownership.vocab.encodings" and i.lazy for i in imports_of(PACKAGE / "vocab" / "operation.py")), (
        "vocab/operation.py no longer imports vocab/encodings.py on the first symbolic call")


def test_symbolic_imports_lang_and_core_only() -> None:
    contract = "symbolic/ imports lang/ and core/ only (and errors.py, library.py): never vocab/ or engines/"
    paths = files("symbolic")
    bad = [i for p in paths for i in ours(imports_of(p))
           if not within(i.module, "symbolic", "lang", "core", "errors", "library")]
    require(bad, contract)
    require_no_route(paths, lambda m: within(m, "vocab", "engines"), contract)


ABOVE_ENGINES = ("session", "cli", "render", "testing")
ENGINE_ANNOTATIONS = ("ownership.session.settings",)
"""Engines build their options from a check's ``Settings``: they name it in annotations, never import it."""


def test_engines_never_import_session_cli_or_render() -> None:
    contract = ("engines/ take an Instance and return a CheckResult: they never import session/, cli/, render/ "
                "(or testing/); session's Settings only under TYPE_CHECKING, for annotations")
    paths = files("engines")
    bad = [i for p in paths for i in imports_of(p) if within(i.module, *ABOVE_ENGINES)
           and not (i.type_only and i.module in ENGINE_ANNOTATIONS)]
    require(bad, contract)
    require_no_route(paths, lambda m: within(m, *ABOVE_ENGINES), contract)


def test_render_never_imports_engines_or_session() -> None:
    contract = "render/ reads results and traces and never feeds back into checking: no engines/, session/, cli/"
    forbidden = ("engines", "session", "cli", "testing")
    paths = files("render")
    bad = [i for p in paths for i in imports_of(p) if within(i.module, *forbidden)]
    require(bad, contract)
    require_no_route(paths, lambda m: within(m, *forbidden), contract)


def test_session_never_imports_the_front_ends() -> None:
    contract = "session/ wires one check together for every front end: it never imports cli/ or testing/"
    paths = files("session")
    bad = [i for p in paths for i in imports_of(p) if within(i.module, "cli", "testing")]
    require(bad, contract)
    require_no_route(paths, lambda m: within(m, "cli", "testing"), contract)


def test_cli_and_testing_are_thin_clients_nothing_imports() -> None:
    contract = ("cli/ and testing/ are thin clients of session/, at the top: nothing imports cli/ but "
                "ownership/__main__.py, nothing imports testing/ but cli/ (mbt), and testing/ never imports cli/")
    bad = []
    for path in files("."):
        module = module_of(path)
        for imp in imports_of(path):
            if within(imp.module, "cli") and not within(module, "cli") and path.name != "__main__.py":
                bad.append(imp)
            if within(imp.module, "testing") and not within(module, "testing", "cli"):
                bad.append(imp)
    require(bad, contract)


def test_kernel_imports_nothing_from_the_layers_above_it() -> None:
    contract = "kernel/ (the compiled search) builds on lang/ and core/: it never imports engines/, session/, render/, cli/"
    forbidden = ("engines", "session", "render", "cli", "testing")
    paths = files("kernel")
    bad = [i for p in paths for i in imports_of(p) if within(i.module, *forbidden)]
    require(bad, contract)
    require_no_route(paths, lambda m: within(m, *forbidden), contract)


USERS = {
    "z3": ("symbolic/", "vocab/encodings.py", "engines/bmc.py", "engines/z3run.py", "engines/prove/",
           "engines/paramexplore/", "engines/liveness/bounded.py"),
    "hypothesis": ("engines/hypothesis_engine/", "testing/mbt.py", "testing/conformance.py"),
    "numba": ("kernel/",),
    "llvmlite": ("kernel/",),
    "jsonschema": ("core/formats.py",),
}
"""The only places each heavy dependency may be imported from (folders end with ``/``)."""


def test_heavy_dependencies_are_imported_only_by_the_modules_that_use_them() -> None:
    contract = ("z3, hypothesis, numba and jsonschema are imported only by the modules that use them "
                "(jsonschema only inside the function that reads a trace file)")
    bad = []
    for path in files("."):
        rel = path.relative_to(PACKAGE).as_posix()
        for imp in imports_of(path):
            top = imp.module.split(".")[0]
            if top in USERS and not any(rel == u or (u.endswith("/") and rel.startswith(u)) for u in USERS[top]):
                bad.append(imp)
            elif top == "jsonschema" and imp.eager:
                bad.append(imp)
    require(bad, contract)


_CHILD = """
import json, sys, traceback

first = {}


class Watch:
    # Notes where each heavy package is first imported from: the innermost frame in ownership/.
    def find_spec(self, name, path=None, target=None):
        if name in HEAVY and name not in first:
            ours = [f for f in traceback.extract_stack() if "/ownership/" in f.filename.replace(chr(92), "/")]
            first[name] = f"{ours[-1].filename}:{ours[-1].lineno}: {ours[-1].line}" if ours else "outside ownership/"
        return None


sys.meta_path.insert(0, Watch())
from ownership.cli import main
sys.argv = ["ownership", "--help"]
try:
    main()
except SystemExit:
    pass
from ownership.lang.instance import Instance
from ownership.lang.loader import load_spec, spec_files
from ownership.library import library_dir
specs = spec_files(library_dir())
for path in specs:
    inst = Instance(load_spec(path))
    inst.expand(inst.init_state)
heavy = {m: first.get(m, "?") for m in HEAVY if m in sys.modules}
print(json.dumps({"specs": len(specs), "heavy": heavy}))
"""


def test_help_and_loading_a_spec_import_no_heavy_dependency() -> None:
    """``ownership --help``, then every library spec loaded, instantiated and its initial state expanded."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", f"HEAVY = {HEAVY!r}\n{_CHILD}"], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found["specs"] >= 10, "the library was not found: nothing was loaded"
    if found["heavy"]:
        where = "".join(f"\n    {name}, first imported at {line.replace(f'{ROOT}{os.sep}', '')}"
                        for name, line in sorted(found["heavy"].items()))
        pytest.fail(f"`ownership --help` and loading the library's specs imported:{where}\n"
                    "    breaks: z3, hypothesis, numba and jsonschema are imported only by the modules that use them, "
                    "so `ownership --help` and loading a spec never pay for them", pytrace=False)
