"""What bench/peer_bench.py reads from each tool's output, and the table it prints.

Kept apart from the runner so that the parsing and the arithmetic can be tested without
running TLC, SPIN or a long search.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


class BenchError(Exception):
    """A run that cannot be compared: a tool failed, its count is missing, or counts differ."""


@dataclass(frozen=True)
class Timing:
    """What `/usr/bin/time -f '%e %U %S %M'` reports for one command."""

    wall: float
    user: float
    system: float
    rss_kib: int

    @property
    def cpu(self) -> float:
        """CPU seconds, user + system: the fairer figure on a shared machine."""
        return self.user + self.system


@dataclass(frozen=True)
class Run:
    """One timed run of one tool on one model."""

    model: str
    tool: str
    kind: str  # "ownership", "tlc" or "spin"
    round: int
    states: int
    timing: Timing
    command: str


TIME_FORMAT = "%e %U %S %M"


def parse_time(text: str) -> Timing:
    """The figures `/usr/bin/time -f TIME_FORMAT -o FILE` wrote to FILE.

    GNU time puts "Command exited with non-zero status N" on a line of its own before the
    figures, so the figures are the last line.
    """
    lines = [line for line in text.strip().splitlines() if line.strip()]
    fields = lines[-1].split() if lines else []
    if len(fields) != 4:
        raise BenchError(f"cannot read /usr/bin/time's figures from {text!r}")
    wall, user, system, rss = fields
    return Timing(float(wall), float(user), float(system), int(rss))


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def parse_ownership(out: str) -> int:
    """The distinct-state count of an exhaustive, safe `ownership check` (the verdict must be PROVED).

    The coverage line is wrapped to the terminal width, so the count and its words may sit on
    different lines.
    """
    if not re.search(r"^PROVED\b", out, re.M):
        raise BenchError("ownership did not print PROVED (the models are safe and the search must be exhaustive)")
    m = re.search(r"\(([\d,]+)\s+distinct\s+states", out)
    if not m:
        raise BenchError("ownership printed no 'N distinct states'")
    return _number(m.group(1))


def parse_tlc(out: str) -> int:
    """TLC's distinct-state count; the run must end with no error and an empty queue."""
    if "Model checking completed. No error has been found." not in out:
        raise BenchError("TLC did not report 'Model checking completed. No error has been found.'")
    m = re.search(r"([\d,]+) distinct states found, 0 states left on queue", out)
    if not m:
        raise BenchError("TLC printed no 'N distinct states found, 0 states left on queue'")
    return _number(m.group(1))


def parse_spin(out: str) -> int:
    """SPIN pan's stored-state count; the search must be complete (no error, depth limit not hit)."""
    if "max search depth too small" in out:
        raise BenchError("pan hit its depth limit (raise -m): the search was not complete")
    if not re.search(r"\berrors: 0\b", out):
        raise BenchError("pan did not report 'errors: 0'")
    m = re.search(r"(\d+) states, stored", out)
    if not m:
        raise BenchError("pan printed no 'N states, stored'")
    return _number(m.group(1))


PARSERS = {"ownership": parse_ownership, "tlc": parse_tlc, "spin": parse_spin}


def check_count(model: str, reference: int, run: Run) -> None:
    """Raise unless ``run`` found exactly the reference number of distinct states.

    Every peer explores the same state space without symmetry reduction, so any difference
    means one of them is not checking the same thing: its times would not be comparable.
    """
    if run.states != reference:
        raise BenchError(
            f"COUNT MISMATCH on {model}: {run.tool} (round {run.round}) found {run.states:,} distinct states, "
            f"the reference (TLC, SPIN and ownership agree on it) is {reference:,}"
        )


@dataclass(frozen=True)
class Row:
    """One tool on one model, summarised over the rounds."""

    model: str
    tool: str
    kind: str
    states: int
    cpu_min: float
    cpu_max: float
    wall_min: float
    wall_max: float
    rss_kib: int  # the largest over the rounds
    rounds: int
    vs_tlc: float | None  # ownership's minimum CPU / TLC's (fewest workers run)
    vs_spin: float | None

    @property
    def bytes_per_state(self) -> float:
        """Peak RSS / states: an upper bound, since RSS also holds the interpreter, the code and buffers."""
        return self.rss_kib * 1024 / self.states


def summarize(runs: list[Run]) -> list[Row]:
    """One row per (model, tool) in the order the runs were made, with ratios on ownership's rows.

    A ratio divides ownership's minimum CPU over the rounds by the peer's; for TLC the peer is
    the first TLC tool run on the model (the runner orders them by workers, fewest first).
    """
    groups: dict[tuple[str, str], list[Run]] = {}
    for run in runs:
        groups.setdefault((run.model, run.tool), []).append(run)
    peer_cpu: dict[tuple[str, str], float] = {}
    for (model, _tool), rs in groups.items():
        if rs[0].kind != "ownership":
            peer_cpu.setdefault((model, rs[0].kind), min(r.timing.cpu for r in rs))
    rows = []
    for (model, tool), rs in groups.items():
        kind = rs[0].kind
        cpu = [r.timing.cpu for r in rs]
        wall = [r.timing.wall for r in rs]
        ratios = [
            min(cpu) / peer_cpu[(model, peer)] if kind == "ownership" and peer_cpu.get((model, peer)) else None
            for peer in ("tlc", "spin")
        ]
        rows.append(
            Row(model, tool, kind, rs[0].states, min(cpu), max(cpu), min(wall), max(wall),
                max(r.timing.rss_kib for r in rs), len(rs), ratios[0], ratios[1])
        )
    return rows


def _span(lo: float, hi: float, rounds: int) -> str:
    return f"{lo:,.1f}" if rounds == 1 else f"{lo:,.1f} - {hi:,.1f}"


def markdown(rows: list[Row], labels: dict[str, str]) -> str:
    """The table: one line per model and tool."""
    out = [
        "| model | states | tool | CPU s (min - max) | wall s (min - max) | peak RSS MiB | "
        "bytes/state (upper bound) | ownership / TLC | ownership / SPIN |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        bps = f"{row.bytes_per_state:,.0f}" if row.kind == "ownership" else "-"
        out.append(
            f"| {labels.get(row.model, row.model)} | {row.states:,} | {row.tool} | "
            f"{_span(row.cpu_min, row.cpu_max, row.rounds)} | {_span(row.wall_min, row.wall_max, row.rounds)} | "
            f"{row.rss_kib / 1024:,.0f} | {bps} | "
            f"{'-' if row.vs_tlc is None else f'{row.vs_tlc:.2f}'} | "
            f"{'-' if row.vs_spin is None else f'{row.vs_spin:.2f}'} |"
        )
    return "\n".join(out)
