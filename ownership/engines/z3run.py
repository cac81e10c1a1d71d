"""What bmc and prove share: their options and the run around a strategy.

:class:`BmcOptions`; the encoding at each integer width until one holds every
value (:func:`widening`); the UNKNOWN result of a run stopped by Ctrl-C,
SIGTERM or the time limit (:func:`until_stopped`); the fields every result
of theirs carries.  The strategies themselves are in :mod:`ownership.engines.bmc`
and :mod:`ownership.engines.prove`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from ownership.core.limits import stop_in, stop_reason_of
from ownership.core.result import CheckResult, Stats, StopReason, Verdict
from ownership.engines.bmcprefix import audit_prefix
from ownership.engines.symmetry import plan_symmetry
from ownership.errors import Code, OwnershipError
from ownership.lang.instance import Instance
from ownership.lang.invariants import select_invariants
from ownership.symbolic.encoding import SymbolicSpec, initial_width
from ownership.symbolic.terms import MAX_WIDTH, WIDTH, WidthError


@dataclass(frozen=True)
class BmcOptions:
    """Options of the Z3 engines."""

    max_depth: int = 30
    max_k: int = 2
    solver_timeout: float | None = None
    free: tuple[str, ...] = ()
    where: tuple[str, ...] = ()
    minimize: str | None = None
    maximize: str | None = None
    invariants: tuple[str, ...] | None = None
    symmetry: bool = True
    spacer: bool = True
    spacer_timeout: float = 600.0
    reach_states: int = 200_000
    """``prove``: largest explicit reachable set tried as an inductive invariant (0: never)."""
    deadlock: bool = False
    """Also look for deadlocks (``--deadlock``): states where nothing can run that the spec does not call finished."""
    prefix_states: int = 50_000
    """``bmc``: most states a breadth-first search may store to check the first depths concretely
    before the solver takes over (0: the solver asks every depth; see :mod:`ownership.engines.bmcprefix`)."""

    @classmethod
    def from_settings(cls, settings: Any) -> BmcOptions:
        """The options of ``bmc`` and ``prove`` (one type: prove reads the k-induction fields, bmc the depth)."""
        if settings.engine == "prove" and (settings.max_depth is not None or settings.option("minimize") or settings.option("maximize")):
            raise OwnershipError(Code.BAD_OPTION, "prove covers executions of any length: it takes no --max-depth, "
                                 "--minimize or --maximize (use --engine bmc)")
        if settings.max_states is not None:
            if settings.engine == "prove":
                raise OwnershipError(Code.BAD_OPTION, "--max-states is an explorer limit; prove takes --max-k, "
                                     "--reach-states, --solver-timeout and --max-seconds")
            raise OwnershipError(Code.BAD_OPTION, "--max-states is an explorer limit; bmc takes --max-depth, "
                                 "--solver-timeout and --max-seconds")
        options = cls(
            max_depth=settings.max_depth if settings.max_depth is not None else cls.max_depth,
            max_k=settings.option("max_k"), solver_timeout=settings.option("solver_timeout"), free=tuple(settings.option("free")),
            where=tuple(settings.option("where")), minimize=settings.option("minimize"), maximize=settings.option("maximize"),
            invariants=settings.invariants, symmetry=settings.symmetry, spacer=settings.option("spacer"),
            spacer_timeout=settings.option("spacer_timeout"), reach_states=settings.option("reach_states"),
            deadlock=settings.option("deadlock"),
            # --engine all compares engines: there bmc asks the solver from depth 0, so its answer checks
            # the encoding against the explorer instead of repeating the explorer's concrete search.
            prefix_states=0 if settings.engine == "all" else cls.prefix_states,
        )
        options.validate()
        return options

    def validate(self) -> None:
        """Refuse values out of range (OWN015) and an optimised parameter that is not free."""
        from ownership import inputs

        inputs.check_count("--max-depth", self.max_depth, 0)
        inputs.check_count("--max-k", self.max_k, 0)
        inputs.check_count("--reach-states", self.reach_states, 0)
        inputs.check_count("prefix_states", self.prefix_states, 0)
        inputs.check_seconds("--solver-timeout", self.solver_timeout)
        inputs.check_seconds("--spacer-timeout", self.spacer_timeout)
        inputs.check_optimised(self.free, self.minimize, self.maximize)


def checked_invariants(sym: SymbolicSpec, options: BmcOptions) -> list[str]:
    """The names of the invariants ``options`` select (see :func:`~ownership.lang.invariants.select_invariants`)."""
    return [inv.name for inv in select_invariants(sym.inst, options.invariants)]


def encode(inst: Instance, options: BmcOptions, width: int | None = None) -> SymbolicSpec:
    """The spec's symbolic paths at ``width`` bits (the full width when ``None``), symmetry as ``options`` say."""
    sorted_domains = plan_symmetry(inst).sorted if options.symmetry else ()
    return SymbolicSpec(inst, options.free, options.symmetry, WIDTH if width is None else width,
                        sorted_domains=sorted_domains)


def widths(inst: Instance, options: BmcOptions) -> list[int]:
    """The integer widths tried in turn: from :func:`initial_width`, doubling up to ``MAX_WIDTH``."""
    w = initial_width(inst, options.free)
    out = []
    while w <= MAX_WIDTH:
        out.append(w)
        w *= 2
    return out


class Reached:
    """Passes progress on and remembers the last phase and depth reported (for a stopped run's coverage)."""

    def __init__(self, progress: Any) -> None:
        self.progress = progress
        self.depth = -1
        self.states = 0

    def __call__(self, p: Any) -> None:
        self.depth = max(self.depth, p.depth)
        self.states = max(self.states, getattr(p, "states", 0) or 0)
        if self.progress is not None:
            self.progress(p)


STOPPED = (StopReason.TIME_LIMIT, StopReason.INTERRUPTED)
"""Stop reasons after which no more work is done (the coverage search would outlast the limit)."""


def stopped_result(engine: str, inst: Instance, options: BmcOptions, start: float, reached: Reached,
                   exc: BaseException) -> CheckResult:
    """The UNKNOWN result of a solver run stopped by Ctrl-C, SIGTERM or the wall-clock limit."""
    reason = stop_reason_of(exc)
    if reached.depth < 0:
        what = "before the first solver query (while encoding the spec)"
    elif engine == "bmc":
        what = f"while checking depth {reached.depth}: every execution of up to {reached.depth - 1} steps was checked"
    else:
        what = f"at k={reached.depth} (no proof yet)" + (
            f", after enumerating {reached.states:,} reachable states" if reached.states else "")
    invs = tuple(options.invariants) if options.invariants is not None else tuple(inst.spec.invariants)
    return CheckResult(
        spec=inst.spec.name, engine=engine, verdict=Verdict.UNKNOWN, stop_reason=reason,
        stats=Stats(reached.states, 0, max(reached.depth, 0), time.perf_counter() - start),
        params=shown_params(inst, options), invariants=invs, options=result_options(options),
        notes=(f"inconclusive: the run {reason.value} {what}",),
    )


def widening(engine: str, inst: Instance, options: BmcOptions, start: float,
             run_at: Callable[[SymbolicSpec, list[str], list[str]], CheckResult]) -> CheckResult:
    """Run ``run_at(sym, invariants, widened)`` at each width until one holds every integer.

    ``run_at`` raises ``WidthError`` when a constant does not fit or an
    overflowing step is reachable; ``widened`` collects the reasons, for the
    result's notes.
    """
    names: list[str] = []
    widened: list[str] = []
    for width in widths(inst, options):
        try:
            sym = encode(inst, options, width)
            names = checked_invariants(sym, options)
            return run_at(sym, names, widened)
        except WidthError as exc:
            widened.append(f"{width}-bit integers were too narrow ({exc})")
    return CheckResult(
        spec=inst.spec.name, engine=engine, verdict=Verdict.UNKNOWN, stop_reason=StopReason.SOLVER_UNKNOWN,
        stats=Stats(0, 0, 0, time.perf_counter() - start), params=shown_params(inst, options),
        invariants=tuple(names), options=result_options(options),
        notes=(f"inconclusive: integers in this spec exceed {MAX_WIDTH} bits, the widest encoding", *widened),
    )


def free_coverage_note(result: CheckResult, options: BmcOptions) -> CheckResult:
    """``result`` with a note that its action counts come from the default values of the free parameters."""
    if not options.free:
        return result
    return dataclasses.replace(result, notes=(*result.notes, "the action counts are from a concrete search at the "
                                              "default values of the free parameters"))


def until_stopped(engine: str, inst: Instance, options: BmcOptions, start: float, reached: Reached,
                  run: Callable[[], CheckResult]) -> CheckResult:
    """``run()``, or the UNKNOWN result of Ctrl-C, SIGTERM or the wall-clock limit in any of its phases."""
    try:
        audited = audit_prefix(inst)  # the solver runs spec code once per path: audit it concretely first
        return noted(run(), audited)
    except KeyboardInterrupt as exc:
        return stopped_result(engine, inst, options, start, reached, exc)
    except Exception as exc:  # noqa: BLE001 - a stop that came out of a Z3 call; anything else is re-raised
        stop = stop_in(exc)
        if stop is None:
            raise
        return stopped_result(engine, inst, options, start, reached, stop)


def noted(result: CheckResult, note: str | None) -> CheckResult:
    """``result`` with the symmetry check's note added."""
    return result if note is None else dataclasses.replace(result, notes=(*result.notes, note))


def result_options(options: BmcOptions) -> dict[str, Any]:
    """The options as a result records them (symmetry is off: a solver trace is never reduced)."""
    d = asdict(options)
    d["symmetry"] = False
    return d


def shown_params(inst: Instance, options: BmcOptions) -> dict[str, Any]:
    """The instance's parameters as a result shows them ("free" for the free ones)."""
    return {k: ("free" if k in options.free else v) for k, v in inst.param_values.items()}

