"""Mutation testing of a spec: do its invariants notice when its code is wrong?

A spec is only as good as the bugs it can catch.  This module makes small
faults in the spec file's own code (delete one ``require``, flip one
comparison, swap ``and``/``or``, negate an ``if``, drop one vocabulary call,
move an integer constant in a guard by one) and checks each *mutant* with an
engine.  A mutant whose expected verdict no longer holds is **killed**; one
that still passes **survived**: the spec would not notice that fault in the
real code either.  A survivor whose reachable state graph (without symmetry
reduction) is identical to the original's, same states and same labelled
edges, is **equivalent**: no invariant could ever tell them apart.

Only code the spec file itself defines is mutated (its actions, helpers,
invariant bodies and terminal predicate; for a derived spec, what the derived
file replaces or adds), so every mutant is a fault in what that file claims.

Mutant ids are stable across runs and edits elsewhere in the file:
``FUNCTION+OFFSET KIND: OLD => NEW``, with OFFSET the line within the function
and OLD/NEW the changed source lines with whitespace collapsed.  A spec accepts
a survivor with ``spec.accept_mutant(ID, reason=...)`` (the id with or without
its ``+OFFSET``).
"""

from __future__ import annotations

import ast
import contextlib
import difflib
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ownership.errors import Code, OwnershipError

KINDS = ("delete-require", "flip-compare", "swap-boolop", "negate-if", "drop-call", "const+1", "const-1")
"""Mutation operators, in the order mutants at the same place are listed."""

OUTCOMES = ("killed", "survived", "equivalent", "timeout", "invalid", "accepted")
"""How a mutant is classified."""

_DECORATORS = frozenset({"action", "replace", "helper", "invariant", "terminal"})

_FLIP: dict[type[ast.cmpop], tuple[str, str]] = {
    # op type -> (regex of the token in the source, replacement text)
    ast.Eq: (r"==", "!="),
    ast.NotEq: (r"!=", "=="),
    ast.Lt: (r"<(?!=)", ">="),
    ast.GtE: (r">=", "<"),
    ast.Gt: (r">(?!=)", "<="),
    ast.LtE: (r"<=", ">"),
    ast.In: (r"\bin\b", "not in"),
    ast.NotIn: (r"\bnot\s+in\b", "in"),
    ast.Is: (r"\bis\b", "is not"),
    ast.IsNot: (r"\bis\s+not\b", "is"),
}


@dataclass(frozen=True)
class Mutant:
    """One small fault in a spec file: where, what, and the whole mutated source."""

    id: str
    function: str
    role: str
    kind: str
    line: int
    offset: int
    old: str
    new: str
    source: str = field(repr=False, compare=False)

    @property
    def short_id(self) -> str:
        """The id without the line offset (survives edits that move the line)."""
        return f"{self.function} {self.kind}: {self.old} => {self.new}"

    def diff(self, original: str, filename: str = "spec") -> str:
        """Unified diff of the mutated line(s) against ``original``."""
        lines = difflib.unified_diff(
            original.splitlines(keepends=True), self.source.splitlines(keepends=True),
            fromfile=f"a/{filename}", tofile=f"b/{filename}", n=0,
        )
        return "".join(lines)


# -- generation -----------------------------------------------------------------------------


def _role(fn: ast.FunctionDef) -> str | None:
    for d in fn.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        if isinstance(target, ast.Attribute) and target.attr in _DECORATORS:
            return target.attr
    return None


class _Source:
    """The file as bytes per line: ``ast`` column offsets count UTF-8 bytes."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = text.encode("utf-8").splitlines(keepends=True)

    def _offset(self, line: int, col: int) -> int:
        return sum(len(x) for x in self.lines[: line - 1]) + col

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (self._offset(node.lineno, node.col_offset),  # type: ignore[attr-defined]
                self._offset(node.end_lineno, node.end_col_offset))  # type: ignore[attr-defined]

    def text_of(self, start: int, end: int) -> str:
        return b"".join(self.lines)[start:end].decode("utf-8")

    def splice(self, start: int, end: int, new: str) -> str:
        raw = b"".join(self.lines)
        return (raw[:start] + new.encode("utf-8") + raw[end:]).decode("utf-8")


def _keep_lines(old: str, new: str, *, statement: bool) -> str:
    """``new`` padded to as many lines as ``old`` so later line numbers do not move."""
    extra = old.count("\n") - new.count("\n")
    if extra <= 0:
        return new
    return new + "\n" * extra if statement else f"({new}{chr(10) * extra})"


def _collapse(text: str) -> str:
    return " ".join(text.split())


def _changed_lines(original: str, mutated: str) -> tuple[int, str, str]:
    """First changed line and the changed lines of both texts, whitespace collapsed."""
    a, b = original.splitlines(), mutated.splitlines()
    sm = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    old: list[str] = []
    new: list[str] = []
    first = 0
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            continue
        if not first:
            first = i1 + 1
        old += a[i1:i2]
        new += b[j1:j2]
    return first, _collapse(" ".join(old)), _collapse(" ".join(new))


def _edits(fn: ast.FunctionDef, src: _Source) -> Iterator[tuple[str, int, int, str]]:
    """(kind, start, end, replacement) for every mutation inside ``fn``'s body."""
    state = fn.args.args[0].arg if fn.args.args else "s"
    guards: list[ast.AST] = []
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    nodes = [n for stmt in body for n in ast.walk(stmt)]
    for node in nodes:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            call = node.value
            start, end = src.span(node)
            old = src.text_of(start, end)
            if isinstance(call.func, ast.Name) and call.func.id == "require":
                guards.extend(call.args)
                yield "delete-require", start, end, _keep_lines(old, "pass", statement=True)
            elif (call.args and isinstance(call.args[0], ast.Name) and call.args[0].id == state
                  and not (isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name)
                           and call.func.value.id == state)):
                # A vocabulary or helper call on the state: pool.free(s, r), transfer(s, ...).
                yield "drop-call", start, end, _keep_lines(old, "pass", statement=True)
        elif isinstance(node, ast.If):
            guards.append(node.test)
            start, end = src.span(node.test)
            old = src.text_of(start, end)
            yield "negate-if", start, end, f"not ({old})"
        elif isinstance(node, ast.Compare):
            edges = [node.left, *node.comparators]
            for i, op in enumerate(node.ops):
                pattern, repl = _FLIP[type(op)]
                gap_start, gap_end = src.span(edges[i])[1], src.span(edges[i + 1])[0]
                gap = src.text_of(gap_start, gap_end)
                m = re.search(pattern, gap)
                if m is None:  # pragma: no cover - the token is always between its operands
                    continue
                new_gap = gap[: m.start()] + repl + gap[m.end():]
                yield "flip-compare", gap_start, gap_end, new_gap
        elif isinstance(node, ast.BoolOp):
            word, repl = ("and", "or") if isinstance(node.op, ast.And) else ("or", "and")
            # Every operator keyword of this chain, so `a and b and c` becomes `a or b or c`
            # (flipping one of them would re-associate the chain).
            start, end = src.span(node)
            pieces: list[tuple[int, int, str]] = []
            for left, right in zip(node.values, node.values[1:], strict=False):
                g0, g1 = src.span(left)[1], src.span(right)[0]
                gap = src.text_of(g0, g1)
                m = re.search(rf"\b{word}\b", gap)
                if m is not None:
                    pieces.append((g0, g1, gap[: m.start()] + repl + gap[m.end():]))
            text = src.text_of(start, end)
            raw = text.encode("utf-8")
            for g0, g1, new_gap in reversed(pieces):
                raw = raw[: g0 - start] + new_gap.encode("utf-8") + raw[g1 - start:]
            yield "swap-boolop", start, end, f"({raw.decode('utf-8')})"
    for guard in guards:
        for node in ast.walk(guard):
            if isinstance(node, ast.Constant) and type(node.value) is int:
                start, end = src.span(node)
                yield "const+1", start, end, str(node.value + 1)
                if node.value > 0:
                    yield "const-1", start, end, str(node.value - 1)


def generate_mutants(path: str | Path) -> list[Mutant]:
    """Every mutant of the spec file ``path``, in a deterministic order (file order, then kind)."""
    p = Path(path)
    text = p.read_text(encoding="utf-8")
    try:
        tree = ast.parse(text, str(p))
    except SyntaxError as exc:
        raise OwnershipError(Code.SPEC_SYNTAX, f"syntax error: {exc.msg}", str(p), exc.lineno) from None
    src = _Source(text)
    found: list[tuple[int, int, int, Mutant]] = []
    seen: dict[str, int] = {}
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef):
            continue
        role = _role(fn)
        if role is None:
            continue
        for kind, start, end, replacement in _edits(fn, src):
            old_text = src.text_of(start, end)
            if replacement == old_text:
                continue
            mutated = src.splice(start, end, replacement)
            line, old, new = _changed_lines(text, mutated)
            offset = line - fn.lineno
            ident = f"{fn.name}+{offset} {kind}: {old} => {new}"
            count = seen.get(ident, 0) + 1
            seen[ident] = count
            if count > 1:
                ident += f" #{count}"
            mutant = Mutant(ident, fn.name, role, kind, line, offset, old, new, mutated)
            found.append((start, KINDS.index(kind), len(found), mutant))
    found.sort(key=lambda t: (t[0], t[1], t[2]))
    return [m for *_, m in found]


# -- running --------------------------------------------------------------------------------


@dataclass(frozen=True)
class MutateOptions:
    """Options of a mutation run."""

    engine: str = "explore"
    max_seconds_per_mutant: float = 30.0
    params: tuple[tuple[str, int], ...] = ()
    max_graph_states: int = 200_000
    """Largest reachable graph (without symmetry) compared for equivalence."""


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


ProgressFn = Callable[[int, int, MutantResult], None]


def _engine_options(engine: str, seconds: float) -> Any:
    if engine == "explore":
        from ownership.engines.explore import ExploreOptions

        return ExploreOptions(max_seconds=seconds)
    if engine == "bmc":
        from ownership.engines.z3run import BmcOptions

        return BmcOptions(solver_timeout=seconds)
    if engine == "hypothesis":
        from ownership.engines.stateful import HypothesisOptions

        return HypothesisOptions(derandomize=True)
    raise OwnershipError(Code.BAD_OPTION, f"unknown engine {engine!r} for mutate (available: explore, bmc, hypothesis)")


def _load(path: Path, folder: Path) -> Any:
    """Load ``path`` as a spec with ``folder`` (the original's) importable, for its base spec."""
    from ownership.spec.loader import load_spec

    added = str(folder) not in sys.path
    if added:
        sys.path.insert(0, str(folder))
    try:
        return load_spec(path)
    finally:
        if added:
            sys.path.remove(str(folder))


class _Graph:
    """Reachable states and labelled edges of an instance (no symmetry reduction), with what
    the comparison also needs: the states where work is pending but nothing is enabled, and
    which actions ever fire."""

    def __init__(self, states: frozenset[Any], edges: frozenset[tuple[Any, str, Any]], deadlocks: int,
                 fired: frozenset[str], stuck: int) -> None:
        self.states = states
        self.edges = edges
        self.deadlocks = deadlocks
        self.fired = fired
        self.stuck = stuck
        """States from which no terminal state can be reached (work that can never finish)."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Graph) and self.states == other.states and self.edges == other.edges

    def moves(self) -> frozenset[tuple[Any, str, Any]]:
        """The edges that change the state (self-loops removed)."""
        return frozenset(e for e in self.edges if e[0] != e[2])

    __hash__ = None  # type: ignore[assignment]


def _graph(inst: Any, deadline: float, max_states: int) -> _Graph | str:
    """The full graph, or why it was not built (too big, out of time)."""
    inst.set_recording(False)
    try:
        init = inst.init_state
        seen = {init}
        edges: set[tuple[Any, str, Any]] = set()
        fired: set[str] = set()
        deadlocks = 0
        queue = deque([init])
        while queue:
            if time.perf_counter() > deadline:
                return "out of time while comparing state graphs"
            st = queue.popleft()
            succs = inst.expand(st)
            if not succs and inst.spec.done is not None and not inst.is_terminal(st):
                deadlocks += 1
            for ai, sc in succs:
                edges.add((st, ai.label, sc.state))
                fired.add(ai.action.name)
                if sc.state not in seen:
                    if len(seen) >= max_states:
                        return f"more than {max_states:,} states: state graphs not compared"
                    seen.add(sc.state)
                    queue.append(sc.state)
        return _Graph(frozenset(seen), frozenset(edges), deadlocks, frozenset(fired), _stuck(inst, seen, edges))
    finally:
        inst.set_recording(True)


def _stuck(inst: Any, states: set[Any], edges: set[tuple[Any, str, Any]]) -> int:
    """How many states cannot reach a terminal state (0 when the spec has no terminal predicate)."""
    if inst.spec.done is None:
        return 0
    preds: dict[Any, list[Any]] = {}
    for a, _, b in edges:
        preds.setdefault(b, []).append(a)
    can = {st for st in states if inst.is_terminal(st)}
    queue = deque(can)
    while queue:
        for a in preds.get(queue.popleft(), ()):
            if a not in can:
                can.add(a)
                queue.append(a)
    return len(states) - len(can)


def _expected(spec: Any, result: Any) -> str | None:
    """The invariant the spec is expected to violate (``None``: safe)."""
    if spec.expect is not None:
        return spec.expect.violates  # type: ignore[no-any-return]
    return result.violated if result.verdict.name == "VIOLATED" else None


def _holds(expected: str | None, result: Any) -> bool:
    if expected is None:
        return result.verdict.name != "VIOLATED"
    return result.verdict.name == "VIOLATED" and result.violated == expected


def _inconclusive(result: Any) -> bool:
    """A limit stopped the run (a mutant where nothing can fire is UNKNOWN too, but decided: see ``_vacuous``)."""
    return result.verdict.name == "UNKNOWN" and not _vacuous(result)


def _vacuous(result: Any) -> bool:
    """No action fires from the initial state: the engine says UNKNOWN (nothing was checked), the mutant is caught."""
    return result.stop_reason.name == "NOTHING_ENABLED"


def mutate(path: str | Path, options: MutateOptions = MutateOptions(), progress: ProgressFn | None = None) -> MutationReport:
    """Generate and check every mutant of the spec file ``path`` (see the module docstring)."""
    from ownership.engines import run_engine
    from ownership.spec.instance import Instance

    p = Path(path)
    spec = _load(p, p.resolve().parent)
    params = dict(options.params)
    limit = options.max_seconds_per_mutant
    engine_opts = _engine_options(options.engine, limit)
    base_inst = Instance(spec, params)
    baseline = run_engine(options.engine, base_inst, engine_opts)
    if _inconclusive(baseline):
        raise OwnershipError(
            Code.MUTATE_BASELINE_LIMIT,
            f"spec {spec.name} is not decided within {limit:g}s ({baseline.stop_reason.value}); "
            "raise --max-seconds-per-mutant or choose smaller parameters",
            str(p),
        )
    expected = _expected(spec, baseline)
    if not _holds(expected, baseline):
        want = "safe" if expected is None else f"violates {expected}"
        got = baseline.verdict.name + (f" ({baseline.violated})" if baseline.violated else "")
        raise OwnershipError(
            Code.MUTATE_BASELINE, f"spec {spec.name} is expected {want} but the unmutated spec gives {got}", str(p), spec.line
        )
    mutants = generate_mutants(p)
    if not mutants:
        raise OwnershipError(
            Code.MUTATE_NOTHING, f"spec {spec.name}: the file defines no actions, helpers or invariants to mutate", str(p)
        )
    accepted = dict(spec.accepted_mutants)
    known = {m.id for m in mutants} | {m.short_id for m in mutants}
    for ident in accepted:
        if ident not in known:
            raise OwnershipError(
                Code.MUTATE_STALE_ACCEPT,
                f"spec {spec.name}: accept_mutant({ident!r}) matches no mutant of this file "
                "(ids are listed by `ownership mutate`)",
                str(p),
            )
    original_text = p.read_text(encoding="utf-8")
    # Built once, up front and outside every mutant's time limit: an interrupted build would
    # leave the instance's caches half updated for the comparisons that follow.
    original_graph: list[_Graph | str] = [
        _graph(Instance(spec, params), time.perf_counter() + max(limit, 60.0), options.max_graph_states)
    ]
    results: list[MutantResult] = []
    tmp = Path(tempfile.mkdtemp(prefix="ownership-mutate-"))
    try:
        for k, m in enumerate(mutants, 1):
            r = _run_mutant(m, k, p, tmp, spec, params, options, engine_opts, expected, base_inst, original_graph)
            reason = accepted.get(m.id) or accepted.get(m.short_id)
            if reason is not None and r.outcome in ("survived", "timeout"):
                r = MutantResult(m, "accepted", r.detail, r.seconds, reason)
            elif reason is not None:
                # The spec now tells this mutant apart: the acceptance is out of date.
                r = MutantResult(m, r.outcome, r.detail + "; accepted in the spec but no longer survives: "
                                 "remove the acceptance", r.seconds)
            results.append(r)
            if progress is not None:
                progress(k, len(mutants), r)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return MutationReport(spec.name, str(p), options.engine, dict(base_inst.param_values), tuple(results), original_text)


class _OutOfTime(BaseException):  # noqa: N818 - a control-flow signal; BaseException so spec code cannot catch it
    """The per-mutant wall-clock limit passed (a mutant may loop forever inside an action)."""


@contextlib.contextmanager
def _hard_limit(seconds: float) -> Iterator[None]:
    """Interrupt the code inside after ``seconds`` (main thread on POSIX; elsewhere a no-op)."""
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not usable:  # pragma: no cover - Windows or a worker thread: the engines' own limits only
        yield
        return

    def fire(signum: int, frame: Any) -> None:
        raise _OutOfTime

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _run_mutant(
    m: Mutant, k: int, p: Path, tmp: Path, spec: Any, params: dict[str, int], options: MutateOptions,
    engine_opts: Any, expected: str | None, base_inst: Any, original_graph: list[_Graph | str],
) -> MutantResult:
    start = time.perf_counter()
    where = tmp / f"m{k}"
    where.mkdir()
    file = where / p.name  # same file name: the spec's module and base imports look the same
    file.write_text(m.source, encoding="utf-8")
    modules = set(sys.modules)
    try:
        # A little over the engine's own limit, which reports what it covered when it can.
        with _hard_limit(options.max_seconds_per_mutant * 1.5 + 1.0):
            return _classify(m, file, p, spec, params, options, engine_opts, expected, base_inst, original_graph, start)
    except _OutOfTime:
        return MutantResult(m, "timeout", f"over {options.max_seconds_per_mutant:g}s (a loop that never ends?)",
                            time.perf_counter() - start)
    finally:
        for name in set(sys.modules) - modules:
            if name.startswith("ownership_spec_"):
                del sys.modules[name]


def _classify(
    m: Mutant, file: Path, p: Path, spec: Any, params: dict[str, int], options: MutateOptions, engine_opts: Any,
    expected: str | None, base_inst: Any, original_graph: list[_Graph | str], start: float,
) -> MutantResult:
    from ownership.engines import run_engine
    from ownership.spec.instance import Instance

    def done(outcome: str, detail: str) -> MutantResult:
        return MutantResult(m, outcome, detail, time.perf_counter() - start)

    try:
        mspec = _load(file, p.resolve().parent)
        inst = Instance(mspec, params)
        result = run_engine(options.engine, inst, engine_opts)
    except OwnershipError as exc:
        return done("invalid", exc.one_line().replace(str(file), p.name))
    except Exception as exc:  # noqa: BLE001 - mutated user code may raise anything
        return done("invalid", f"{type(exc).__name__}: {exc}")
    if _inconclusive(result):
        return done("timeout", f"{result.engine}: {result.stop_reason.value}")
    if _vacuous(result):
        return done("killed", f"{result.engine} {result.stop_reason.value}: no step of the original can run")
    if not _holds(expected, result):
        if result.verdict.name == "VIOLATED":
            steps = len(result.trace) if result.trace is not None else 0
            return done("killed", f"violates {result.violated} in {steps} step{'' if steps == 1 else 's'}")
        return done("killed", f"{result.verdict.name}, expected a violation of {expected}")
    deadline = start + options.max_seconds_per_mutant
    ours = original_graph[0]
    if isinstance(ours, str):
        return done("survived", f"{result.verdict.name}; equivalence not decided: {ours}")
    try:
        theirs = _graph(inst, deadline, options.max_graph_states)
    except Exception as exc:  # noqa: BLE001 - a mutant failing only outside its engine's reach
        return done("invalid", f"{type(exc).__name__}: {exc}")
    if isinstance(theirs, str):
        return done("survived", f"{result.verdict.name}; equivalence not decided: {theirs}")
    if theirs == ours:
        return done("equivalent", f"same reachable graph: {len(ours.states):,} states, {len(ours.edges):,} edges")
    if theirs.states == ours.states and theirs.moves() == ours.moves():
        # Only steps that change nothing differ: every invariant and every trace, with its
        # do-nothing steps removed, is the same (safety properties are blind to stuttering).
        return done("equivalent", f"same {len(ours.states):,} states and state-changing edges; "
                    "only do-nothing steps differ")
    # What `ownership check --deadlock` and the per-action coverage report would show.
    if theirs.deadlocks and not ours.deadlocks:
        return done("killed", f"deadlock: {theirs.deadlocks:,} reachable states with work pending and nothing enabled")
    if theirs.stuck and not ours.stuck:
        return done("killed", f"stuck: from {theirs.stuck:,} reachable states no terminal state can be reached")
    dead = sorted(ours.fired - theirs.fired)
    if dead:
        return done("killed", f"vacuous: action {', '.join(dead)} never fires (it does in the original)")
    return done("survived", f"{result.verdict.name}; reachable graph differs "
                f"({len(theirs.states):,} vs {len(ours.states):,} states, "
                f"{len(theirs.edges):,} vs {len(ours.edges):,} edges)")


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
    return out
