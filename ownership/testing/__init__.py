"""Testing helpers: model-based testing of engine code against a spec, a pytest plugin, assertions.

Names are imported on first use, so ``import ownership.testing`` stays cheap
(Hypothesis is loaded only when model-based testing runs).
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "Adapter": "ownership.testing.adapter",
    "Rejected": "ownership.testing.adapter",
    "MBTOptions": "ownership.testing.mbt",
    "run_mbt": "ownership.testing.mbt",
    "assert_conforms": "ownership.testing.mbt",
    "load_adapter": "ownership.testing.adapter",
    "assert_safe": "ownership.testing.assertions",
    "assert_violates": "ownership.testing.assertions",
    "run_check": "ownership.testing.assertions",
    "check_outcome": "ownership.testing.assertions",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ownership.testing' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
