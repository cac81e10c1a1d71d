"""The published JSON Schemas of the files the tool writes and reads, and their errors as one sentence.

``ownership/schemas/`` holds one JSON Schema (draft 2020-12) per file format,
installed with the package: ``trace.schema.json`` (``trace.json``),
``itf.schema.json`` (``trace.itf.json``) and ``event-log.schema.json`` (a line
of an ``ownership.events/1`` log).  They are the format's documentation and,
for ``trace.json``, its structural check: :meth:`ownership.core.trace.Trace.from_json`
validates with :func:`problem` and keeps in code only what a schema cannot
say (deadlock and counterexample to induction at once).  The event log is
read line by line at the size of an engine's run, where jsonschema would cost
more than the validation search, so :mod:`ownership.validate.eventlog` checks
it by hand and the tests hold the two to each other; no reader reads ITF.

:func:`problem` gives the first error the way every error of the tool is
worded: a field path (``nodes.gpu.pages``, ``pages[2]``) and what is wrong
with it, in a sentence (``must be an integer, got 'x'``), not jsonschema's
own message, which quotes the whole offending value.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from typing import Any

SCHEMAS = ("trace", "itf", "event-log")
"""The formats with a published schema, by the stem of their file (``<stem>.schema.json``)."""

_TYPE_WORDS = {
    "object": "an object",
    "array": "a list",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "null": "null",
}


def schema_text(name: str) -> str:
    """The text of the published schema ``name`` (one of :data:`SCHEMAS`), as installed with the package."""
    if name not in SCHEMAS:
        raise KeyError(f"no published schema {name!r} (known: {', '.join(SCHEMAS)})")
    return files("ownership").joinpath("schemas", f"{name}.schema.json").read_text(encoding="utf-8")


@cache
def schema(name: str) -> dict[str, Any]:
    """The published schema ``name``, parsed."""
    loaded: dict[str, Any] = json.loads(schema_text(name))
    return loaded


@cache
def _validator(name: str, definition: str | None) -> Any:
    # jsonschema is imported here, not at the top: `ownership --help` and loading a spec never read a file format.
    from jsonschema import Draft202012Validator

    root = schema(name)
    if definition is None:
        return Draft202012Validator(root)
    # One of the document's $defs as the schema, its references still resolving inside the same document.
    return Draft202012Validator({"$schema": root["$schema"], "$defs": root["$defs"], "$ref": f"#/$defs/{definition}"})


@dataclass(frozen=True)
class Problem:
    """Where a document breaks its schema (``path``, from the document's root) and what is wrong there."""

    path: tuple[str | int, ...]
    what: str
    """``must be an integer, got 'x'``, ``needs "pages"``: a predicate whose subject is the path."""

    @property
    def field(self) -> str:
        """The path as it is written in messages: ``nodes.gpu.pages``, ``steps[2].args``."""
        return field_path(self.path)

    def sentence(self, subject: str, prefix: bool = True) -> str:
        """The problem as one sentence about ``subject`` (``header``, ``alloc``): ``alloc needs "pages"``.

        An error inside the document names its field, after the subject unless
        ``prefix`` is false (when the subject says nothing the field does not).
        """
        if not self.path:
            return f"{subject} {self.what}"
        where = f"field {self.field} {self.what}"
        return f"{subject}: {where}" if prefix else where


def field_path(path: tuple[str | int, ...]) -> str:
    """``("nodes", "gpu", "pages")`` -> ``nodes.gpu.pages``; ``("pages", 2)`` -> ``pages[2]``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def problem(name: str, instance: Any, definition: str | None = None) -> Problem | None:
    """The first way ``instance`` breaks the published schema ``name`` (or its ``$defs/definition``), or ``None``.

    Of several errors, jsonschema's ``best_match`` picks the one to report
    (the least deeply nested, so a missing field comes before a bad value
    inside another).
    """
    from jsonschema.exceptions import best_match

    error = best_match(_validator(name, definition).iter_errors(instance))
    if error is None:
        return None
    return Problem(tuple(error.absolute_path), _what(error))


def _what(error: Any) -> str:
    """jsonschema's error as a predicate in the tool's wording."""
    kind, expected, got = error.validator, error.validator_value, error.instance
    if kind == "required":
        missing = next((f for f in expected if isinstance(got, dict) and f not in got), None)
        return f'needs "{missing}"' if missing is not None else str(error.message)
    if kind == "type":
        types = [expected] if isinstance(expected, str) else list(expected)
        return f"must be {' or '.join(_TYPE_WORDS.get(t, t) for t in types)}, got {_short(got)}"
    if kind == "enum":
        return f"must be one of {', '.join(str(v) for v in expected)}, got {_short(got)}"
    if kind == "const":
        return f"must be {json.dumps(expected)}, got {_short(got)}"
    if kind == "minimum":
        return f"must be at least {expected}, got {_short(got)}"
    if kind == "minProperties":
        return f"must name at least {expected}, got {_short(got)}"
    if kind in ("minItems", "maxItems"):
        return f"must have {'at least' if kind == 'minItems' else 'at most'} {expected} items, got {len(got)}"
    if kind == "pattern":
        return f"must match {expected}, got {_short(got)}"
    return str(error.message)


def _short(value: Any) -> str:
    """A value as messages quote it, cut short: a corrupt file can hold anything, and an error stays one line."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
