"""docs/architecture.md names every module of the package, and no module that is gone."""

from __future__ import annotations

import re

from conftest import ROOT


def _documented() -> set[str]:
    """The paths of the layout tree in the document (``  lang/`` then ``    model.py`` -> ``ownership/lang/model.py``)."""
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    layout = doc[doc.index("## Layout"):doc.index("## What a change touches")]
    paths: set[str] = set()
    stack: list[str] = []
    for line in layout.splitlines():
        m = re.match(r"^( *)(\S+)", line)
        if not m or not (m.group(2).endswith(".py") or m.group(2).endswith("/")):
            continue
        stack = [*stack[: len(m.group(1)) // 2], m.group(2)]
        paths.add("".join(stack))
    return paths


def test_every_module_is_in_the_layout_and_every_listed_module_exists() -> None:
    documented = _documented()
    modules = {str(p.relative_to(ROOT)) for p in (ROOT / "ownership").rglob("*.py")
               if p.name not in ("__init__.py", "__main__.py")}
    assert sorted(modules - documented) == [], "modules docs/architecture.md does not list"
    listed = {p for p in documented if p.endswith(".py") and not p.endswith("/__init__.py")}
    assert sorted(listed - modules) == [], \
        "docs/architecture.md lists modules that do not exist"
