"""The one trace type every engine returns and every renderer draws.

A :class:`Trace` is an initial state followed by steps; each step names the
action, its arguments, the nondeterministic picks it made (which free page
went to which slot), the events it produced, and the resulting state.  States
are stored in their named JSON form, so a trace file is readable by people
and by other tools (see :mod:`ownership.render.itf` for ITF).

A trace also says what kind of path it is (:class:`TraceKind`): a
counterexample from the initial state, a deadlock, or a counterexample to
induction whose first state need not be reachable; and it stores the spec's
shape (``schema``) so it can be drawn without loading the spec.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from ownership.core import formats
from ownership.core.events import Event
from ownership.core.schema import UNKNOWN_SCHEMA, TraceSchema
from ownership.errors import Code, OwnershipError

TRACE_FORMAT = "ownership-trace"
TRACE_VERSION = 1


@dataclass(frozen=True)
class Choice:
    """One ``s.choose`` of a step: the spec's label for it and the name of the value it took."""

    label: str
    value: str


@dataclass(frozen=True)
class Step:
    """One transition: ``action(args)`` with ``picks``, giving ``state``."""

    action: str
    args: tuple[Any, ...]
    picks: tuple[Any, ...]
    events: tuple[Event, ...]
    state: Mapping[str, Any]
    choices: tuple[Choice, ...] = ()
    """The picks with their labels, as the tables and the picture say them (empty in a trace written before
    traces named their choices: its picks are the bare values)."""

    @property
    def call(self) -> str:
        """``decode_pop_preallocated(B)``."""
        return f"{self.action}({', '.join(str(a) for a in self.args)})"

    @property
    def chose(self) -> list[str]:
        """What the step's choices decided, one item per pick: ``["chose D1 (decode page for slot 0)", "D0 (...)"]``.

        Empty when the step chose nothing.  A trace that records bare picks
        only (an older file) says them as such: ``["picks 1", "0 (unlabelled)"]``.
        """
        if self.choices:
            items = [f"{c.value} ({c.label})" for c in self.choices]
            return [f"chose {items[0]}", *items[1:]]
        if self.picks:
            items = [str(p) for p in self.picks]
            items[-1] += " (unlabelled)"
            return [f"picks {items[0]}", *items[1:]]
        return []


class TraceKind(Enum):
    """What a trace shows; the renderers word their headline and first row by it."""

    COUNTEREXAMPLE = "counterexample"
    """A path from the initial state (ending in ``violation`` when it is set)."""
    DEADLOCK = "deadlock"
    """A path from the initial state to a state where no action can run, though not every request is done."""
    CTI = "counterexample-to-induction"
    """A path from a state that satisfies every invariant but may be unreachable (``prove``'s induction step)."""
    LASSO = "lasso"
    """A path from the initial state whose end returns to the state at position ``loop``, for ever: a temporal
    property's counterexample (``loop`` equal to the number of steps: the last state stays, nothing can run)."""


@dataclass(frozen=True)
class Trace:
    """A path through a spec's state space, usually ending in a violation."""

    spec: str
    spec_path: str | None
    params: Mapping[str, int]
    initial: Mapping[str, Any]
    steps: tuple[Step, ...]
    violation: str | None = None
    engine: str = ""
    kind: TraceKind = TraceKind.COUNTEREXAMPLE
    schema: TraceSchema = UNKNOWN_SCHEMA
    """The spec's shape, as :func:`ownership.core.replay.trace_schema` writes it."""
    loop: int | None = None
    """For a lasso: the position (0 is the initial state) the last step returns to; the steps from it repeat."""
    since: int | None = None
    """For a lasso: the position from which the property is broken (where ``P`` held and ``Q`` never came)."""
    subject: str | None = None
    """For a lasso of a property stated per element (``each=Req``): the element it is broken for."""

    def __post_init__(self) -> None:
        if (self.kind is TraceKind.LASSO) != (self.loop is not None):
            raise ValueError("a lasso trace, and only a lasso trace, has a loop position")
        if self.loop is not None and not 0 <= self.loop <= len(self.steps):
            raise ValueError(f"loop position {self.loop} is outside the trace's {len(self.steps) + 1} states")

    def __len__(self) -> int:
        return len(self.steps)

    @property
    def states(self) -> list[Mapping[str, Any]]:
        """Initial state and the state after each step."""
        return [self.initial, *(s.state for s in self.steps)]

    # -- JSON ---------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "format": TRACE_FORMAT,
            "version": TRACE_VERSION,
            "spec": self.spec,
            "spec_path": self.spec_path,
            "params": dict(self.params),
            "engine": self.engine,
            "violation": self.violation,
            "initial": self.initial,
            "steps": [
                {
                    "action": s.action,
                    "args": list(s.args),
                    "picks": list(s.picks),
                    **({"choices": [{"label": c.label, "value": c.value} for c in s.choices]} if s.choices else {}),
                    "events": [e.to_json() for e in s.events],
                    "state": s.state,
                }
                for s in self.steps
            ],
            **({"extra": extra} if (extra := self._extra_json()) else {}),
        }

    def _extra_json(self) -> dict[str, Any]:
        """The ``extra`` object of the file format: the schema and the kind flags."""
        schema = self.schema.to_json()
        out: dict[str, Any] = {"schema": schema} if schema else {}
        if self.kind is TraceKind.DEADLOCK:
            out["deadlock"] = True
        elif self.kind is TraceKind.CTI:
            out["cti"] = True
        elif self.kind is TraceKind.LASSO:
            out["loop"] = self.loop
            if self.since is not None:
                out["since"] = self.since
            if self.subject is not None:
                out["subject"] = self.subject
        return out

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=1, sort_keys=False) + "\n"

    def save(self, path: str | Path) -> Path:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(self.dumps(), encoding="utf-8")
        return p

    @staticmethod
    def from_json(data: Any, source: str = "<trace>") -> Trace:
        """Parse a trace; input that breaks ``ownership/schemas/trace.schema.json`` raises OWN020 naming the field."""

        def bad(msg: str) -> OwnershipError:
            return OwnershipError(Code.TRACE_CORRUPT, msg, source)

        if not isinstance(data, dict):
            raise bad("top level is not a JSON object")
        if data.get("format") != TRACE_FORMAT:
            # Before the schema: the likeliest wrong file is the ITF export next to the trace.
            raise bad(f"format is {data.get('format')!r}, expected {TRACE_FORMAT!r} (ITF files are for other tools)")
        problem = formats.problem("trace", data)
        if problem is not None:
            raise bad(_sentence(problem))
        extra = data.get("extra") or {}
        if extra.get("deadlock") and extra.get("cti"):
            raise bad("field extra marks the trace as both a deadlock and a counterexample to induction")
        if "loop" in extra and (extra.get("deadlock") or extra.get("cti")):
            raise bad("field extra marks the trace as a lasso (loop) and as a deadlock or a counterexample to induction")
        steps = tuple(
            Step(
                action=raw["action"],
                args=tuple(raw.get("args", [])),
                picks=tuple(raw.get("picks", [])),
                events=tuple(Event.from_json(e) for e in raw.get("events", [])),
                state=dict(raw["state"]),
                choices=tuple(Choice(str(c["label"]), str(c["value"])) for c in raw.get("choices", [])),
            )
            for raw in data["steps"]
        )
        trace_kind = TraceKind.DEADLOCK if extra.get("deadlock") else (TraceKind.CTI if extra.get("cti") else TraceKind.COUNTEREXAMPLE)
        loop = extra.get("loop")
        if loop is not None:
            trace_kind = TraceKind.LASSO
            if loop > len(steps):
                raise bad(f"field extra.loop is {loop}, past the trace's last state (position {len(steps)})")
        return Trace(
            spec=data["spec"],
            spec_path=data.get("spec_path"),
            params={name: int(value) for name, value in data["params"].items()},  # JSON Schema counts 2.0 as an integer
            initial=data["initial"],
            steps=steps,
            violation=data.get("violation"),
            engine=data.get("engine", ""),
            kind=trace_kind,
            schema=TraceSchema.from_json(extra.get("schema", {})),
            loop=loop,
            since=extra.get("since") if loop is not None else None,
            subject=extra.get("subject") if loop is not None else None,
        )

    @staticmethod
    def load(path: str | Path) -> Trace:
        """Read a trace file; a missing or corrupt file raises OWN020 with the line."""
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as exc:
            raise OwnershipError(Code.TRACE_CORRUPT, f"cannot read trace: {exc.strerror}", str(p)) from None
        except UnicodeDecodeError as exc:
            raise OwnershipError(
                Code.TRACE_CORRUPT, f"not a UTF-8 text file (byte 0x{exc.object[exc.start]:02x}), so not a trace.json", str(p)
            ) from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise OwnershipError(Code.TRACE_CORRUPT, f"not JSON: {exc.msg}", str(p), exc.lineno) from None
        return Trace.from_json(data, str(p))


def changed_fields(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """Cells that differ between two JSON states: ``("d_queue[B]", old, new)``."""
    out: list[tuple[str, Any, Any]] = []

    def walk(prefix: str, a: Any, b: Any, keys: Sequence[str]) -> None:
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            for k in a:
                walk(prefix, a[k], b.get(k), [*keys, str(k)])
            return
        if a != b:
            out.append((prefix + (f"[{', '.join(keys)}]" if keys else ""), a, b))

    for name in before:
        walk(name, before[name], after.get(name), [])
    return out


def _sentence(problem: formats.Problem) -> str:
    """A schema error in a trace, a step's fields numbered as the trace table numbers steps (from 1)."""
    path = problem.path
    if len(path) >= 2 and path[0] == "steps" and isinstance(path[1], int):
        return formats.Problem(path[2:], problem.what).sentence(f"step {path[1] + 1}")
    return problem.sentence("the trace", prefix=False)
