"""The outcome of a mutation run: each mutant's classification, the score, the JSON and terminal forms."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ownership.analysis.mutants import Mutant

OUTCOMES = ("killed", "survived", "equivalent", "timeout", "invalid", "accepted")
"""How a mutant is classified."""


@dataclass(frozen=True)
class MutantResult:
    """The classification of one mutant, with why."""

    mutant: Mutant
    outcome: str
    detail: str
    seconds: float
    reason: str = ""
    """For an accepted survivor: the reason the spec gives."""


@dataclass(frozen=True)
class MutationReport:
    """Every mutant of one spec and its outcome."""

    spec: str
    file: str
    engine: str
    params: Mapping[str, int]
    results: tuple[MutantResult, ...]
    original: str = field(repr=False)

    def count(self, outcome: str) -> int:
        """How many mutants had ``outcome``."""
        return sum(r.outcome == outcome for r in self.results)

    @property
    def score(self) -> float | None:
        """killed / (killed + survived + timed out); ``None`` when there is no such mutant.

        Accepted survivors count as killed here: the spec has answered for them.
        """
        killed = self.count("killed") + self.count("accepted")
        total = killed + self.count("survived") + self.count("timeout")
        return killed / total if total else None

    @property
    def raw_score(self) -> float | None:
        """The score without the accepted survivors counted as killed."""
        killed = self.count("killed")
        total = killed + self.count("accepted") + self.count("survived") + self.count("timeout")
        return killed / total if total else None

    @property
    def ok(self) -> bool:
        """Every non-equivalent, valid mutant is killed or accepted."""
        return not self.count("survived") and not self.count("timeout")

    def summary(self) -> str:
        """``12 mutants: 10 killed, 1 survived, ... score 90.9%``."""
        parts = ", ".join(f"{self.count(o)} {'timed out' if o == 'timeout' else o}" for o in OUTCOMES)
        score = self.score
        shown = "n/a" if score is None else f"{100 * score:.1f}%"
        line = f"{self.spec}: {len(self.results)} mutants: {parts}; non-equivalent mutation score {shown}"
        raw = self.raw_score
        if self.count("accepted") and raw is not None:
            line += f" ({100 * raw:.1f}% counting the accepted as survivors)"
        return line

    def to_json(self) -> dict[str, Any]:
        """Machine-readable form (``--json``)."""
        return {
            "spec": self.spec,
            "file": self.file,
            "engine": self.engine,
            "params": dict(self.params),
            "counts": {o: self.count(o) for o in OUTCOMES} | {"generated": len(self.results)},
            "score": self.score,
            "score_without_accepted": self.raw_score,
            "ok": self.ok,
            "mutants": [
                {
                    "id": r.mutant.id,
                    "function": r.mutant.function,
                    "role": r.mutant.role,
                    "kind": r.mutant.kind,
                    "line": r.mutant.line,
                    "outcome": r.outcome,
                    "detail": r.detail,
                    "reason": r.reason or None,
                    "seconds": round(r.seconds, 3),
                    "diff": r.mutant.diff(self.original, Path(self.file).name) if r.outcome in ("survived", "timeout", "accepted") else None,
                }
                for r in self.results
            ],
        }


def report_lines(report: MutationReport, *, verbose: bool = False) -> list[str]:
    """The terminal report: each survivor (and accepted one) with its diff, then the summary."""
    out: list[str] = []
    name = Path(report.file).name
    for r in report.results:
        if r.outcome in ("survived", "timeout"):
            label = "SURVIVED" if r.outcome == "survived" else "TIMED OUT"
            out.append(f"{label}  {r.mutant.id}")
            out.append(f"  in {r.mutant.role} {r.mutant.function}, line {r.mutant.line}: {r.detail}")
            out += ["  " + line for line in r.mutant.diff(report.original, name).splitlines()]
        elif r.outcome == "accepted":
            out.append(f"accepted  {r.mutant.id}")
            out.append(f"  reason: {r.reason}")
        elif r.outcome == "invalid" or verbose or "remove the acceptance" in r.detail:
            out.append(f"{r.outcome}  {r.mutant.id}: {r.detail}")
    out.append(report.summary())
    for line in guidance(report):
        out.extend(textwrap.wrap(line, width=100, initial_indent="  ", subsequent_indent="    "))
    return out


def guidance(report: MutationReport) -> list[str]:
    """What the score means and what to do next, under the summary (unindented, unwrapped sentences).

    The score is the share of small faults in this file's own code that the
    spec's checks notice; a survivor is a fault the real engine could have
    that the spec would call safe.
    """
    survived, timeouts = report.count("survived"), report.count("timeout")
    if report.score is None:
        return ["no mutant changed what the spec can observe (every one is equivalent or invalid): "
                "nothing to score"]
    accepted = " (an accepted mutant counts as noticed: the spec says why it cannot)" if report.count("accepted") else ""
    lines = [f"the score is the share of small faults in {Path(report.file).name}'s own code that its "
             f"invariants (or a deadlock, or an action that stops firing) notice{accepted}"]
    if survived:
        lines.append(f"{survived} SURVIVED: the spec calls each of those faulty versions safe, so it would not "
                     "catch that bug in the engine either. Kill one with an invariant that says what the protocol "
                     "promises at that line (what the client gets, what a request holds in each phase), not one "
                     "that restates the code; if the model cannot observe the difference, accept it with "
                     "spec.accept_mutant(ID, reason=...) (docs/spec-guide.md, mutation testing)")
    if timeouts:
        lines.append(f"{timeouts} TIMED OUT: not decided within --max-seconds-per-mutant; raise it or use "
                     "smaller parameters")
    if not survived and not timeouts:
        lines.append("every non-equivalent mutant is killed or accepted: exit 0")
    else:
        lines.append("exit 1 while a survivor or time-out remains (a CI gate)")
    return lines
