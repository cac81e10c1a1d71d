"""The import layering: the symbolic layer and the vocabulary sit below the engines; z3 loads only for them."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import ownership

PACKAGE = Path(ownership.__file__).resolve().parent


def _imports(path: Path) -> set[str]:
    """Every module a file imports, at top level or inside functions (relative imports resolved)."""
    tree = ast.parse(path.read_text())
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = parts[: len(parts) - node.level]
                base = ".".join([*pkg, base] if base else pkg)
            out.add(base)
    return out


def test_symbolic_layer_and_vocabulary_import_nothing_from_the_engines() -> None:
    for layer in ("symbolic", "vocab"):
        files = sorted((PACKAGE / layer).glob("*.py"))
        assert files
        for path in files:
            upward = {m for m in _imports(path) if m == "ownership.engines" or m.startswith("ownership.engines.")}
            assert not upward, f"{path.relative_to(PACKAGE.parent)} imports {sorted(upward)}"


def test_symbolic_layer_imports_no_vocabulary() -> None:
    for path in sorted((PACKAGE / "symbolic").glob("*.py")):
        assert not {m for m in _imports(path) if m.startswith("ownership.vocab")}, path.name


def test_the_command_line_does_not_import_z3() -> None:
    code = "import sys, ownership.cli, ownership.vocab.pool, ownership.vocab.prefix; print('z3' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(PACKAGE.parent)})
    assert out.stdout.strip() == "False"
