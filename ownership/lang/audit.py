"""The determinism audit: actions are functions of the cells they read.

:meth:`~ownership.lang.successors.Successors.expand` calls
:meth:`DeterminismAudit._audit` on the first expansions and then on a
sample; it runs every action again and compares, refusing an action that
answers differently (OWN066) or one the footprint cache skipped although it
is enabled (OWN067).
"""

from __future__ import annotations

import collections
import contextlib
import enum
import re
import sys
import types
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ownership.errors import Code, OwnershipError
from ownership.lang.purity import Project, watched_globals

if TYPE_CHECKING:
    from ownership.lang.instance import State
    from ownership.lang.successors import ActionInstance, Successor


class DeterminismAudit:
    """:class:`~ownership.lang.instance.Instance`'s purity audit of its own expansions."""

    if TYPE_CHECKING:
        action_instances: list[ActionInstance]
        init_state: State

        def mode(self, *, recording: bool | None = None,
                 choice_reduction: Iterable[str] | None = None) -> contextlib.AbstractContextManager[None]: ...

        def _run(self, state: State, ai: ActionInstance, out: list[Successor],
                 pending: list[tuple[int, ...]] | None = None, limit: int | None = None) -> None: ...

        def cells(self, state: State) -> dict[str, str]: ...

        def run_with_picks(self, state: State, ai: ActionInstance, picks: Sequence[Any]) -> Successor | None: ...

        spec: Any

    def module_data(self) -> ModuleData:
        """The module-level data of the spec and its project modules (found once per instance)."""
        data = self.__dict__.get("_module_data")
        if data is None:
            data = self.__dict__["_module_data"] = ModuleData(watched_globals(self.spec),
                                                              Project(self.spec.file).owns)
        return data

    def audit_step(self, state: State, ai: ActionInstance, succ: Successor) -> None:
        """A random run's step, audited: run again in ``state`` it must give ``succ`` and leave the module data as it was.

        Engines that take one step at a time (random walks) call this on
        every step: the first step also takes the snapshot it compares with.
        """
        before = self.__dict__.get("_step_data")
        if before is None:
            before = self.__dict__["_step_data"] = self.module_data().snapshot()
        again = self.run_with_picks(state, ai, succ.picks)
        if again is None or again.state != succ.state:
            raise OwnershipError(
                Code.SPEC_NONDETERMINISTIC,
                f"action {ai.label} is not a deterministic function of the state: run twice in the same state it "
                f"gave different successors ({self._difference([(succ.state, succ.picks)], [] if again is None else [(again.state, again.picks)])}); "
                "actions must not use random numbers, the clock, or module-level data that changes",
                ai.action.file, ai.action.line,
            )
        err = data_changed(self, before, f"action {ai.label}")
        if err is not None:
            raise err

    def _audit(self, state: State, out: list[tuple[ActionInstance, Successor]], skipped: list[int]) -> None:
        """Run every action instance again in ``state`` and compare with what :meth:`expand` found.

        Engines assume an action is a function of the cells it reads: run
        twice it gives the same successors (OWN066 otherwise: random numbers,
        the clock, a module global that changes), and an action skipped by
        the footprint cache is really disabled (OWN067 otherwise: a read that
        bypasses the variables, a cached helper).
        """
        first: dict[int, list[tuple[State, tuple[Any, ...]]]] = {}
        for ai, sc in out:
            first.setdefault(ai.index, []).append((sc.state, sc.picks))
        with self.mode(recording=False):
            for ai in self.action_instances:
                again: list[Successor] = []
                self._run(state, ai, again)
                got = [(sc.state, sc.picks) for sc in again]
                before = first.get(ai.index, [])
                if got == before:
                    continue
                if ai.index in skipped:
                    raise OwnershipError(
                        Code.SPEC_IMPURE,
                        f"action {ai.label} was skipped because the cells its guard read had not changed since it "
                        "was disabled, but it is enabled here: its guard depends on something other than the state "
                        "variables it reads (a module global, a cached helper, s.cur); read every input through "
                        "the state variables",
                        ai.action.file, ai.action.line,
                    )
                raise OwnershipError(
                    Code.SPEC_NONDETERMINISTIC,
                    f"action {ai.label} is not a deterministic function of the state: run twice in the same state "
                    f"it gave different successors ({self._difference(before, got)}); actions must not use random "
                    "numbers, the clock, or module-level data that changes",
                    ai.action.file, ai.action.line,
                )

    def _difference(self, a: list[tuple[State, tuple[Any, ...]]], b: list[tuple[State, tuple[Any, ...]]]) -> str:
        """The first difference between two successor lists, in words."""
        if len(a) != len(b):
            return f"{len(a)} outcomes the first time, {len(b)} the second"
        labels = list(self.cells(self.init_state))
        for (sa, pa), (sb, pb) in zip(a, b, strict=True):
            for i, (x, y) in enumerate(zip(sa, sb, strict=True)):
                if x != y:
                    return f"{labels[i]} became {x!r} the first time and {y!r} the second"
            if pa != pb:
                return f"choices {list(pa)} the first time and {list(pb)} the second"
        return "different outcomes"


EVERY_STATE = 1_000
"""A search's first expanded states, every one of them audited: every state of a search this small."""
SAMPLE_EVERY = 64
"""... and after those, one expanded state in this many."""
RERUN_BATCH = 2_000
"""Audited states kept (with what their expansion gave) until they are run again, later in the search."""
_SCALARS = (bool, int, float, complex, str, bytes, type(None), enum.Enum)


class ModuleData:
    """What spec code could remember between runs: the module-level data of the spec and its project modules.

    A snapshot holds, per module, every global's identity (a counter
    rebound by ``global``) and a copy of the contents of mutable ones
    (dicts, lists, sets, the attributes of the project's own objects and
    classes, ``functools.cache`` sizes, mutable default arguments).  A
    search must leave it as it found it: an action that changes it behaves
    differently in later states (a memo that opens a guard once), which
    running it twice in one state may never show.
    """

    def __init__(self, watched: Sequence[tuple[dict[str, Any], str]], owns: Callable[[str | None], bool]) -> None:
        self.watched = list(watched)
        self.owns = owns
        self.owned: dict[type, bool] = {}
        self.deep: list[int] | None = None

    def snapshot(self) -> tuple[Any, ...]:
        """The data now (compared with ``==``): every global's identity, and the contents of those that can change.

        A value whose contents cannot change in place (a number, a function
        without mutable defaults, an object of the checker's or the standard
        library's) is watched by identity alone, decided once: a snapshot is
        taken on every audited state.
        """
        if self.deep is None:
            self.deep = [i for i, (env, name) in enumerate(self.watched) if not _fixed(self._safe_shape(env.get(name)))]
        watched = self.watched
        return tuple(id(env.get(name)) for env, name in watched) + tuple(
            self._safe_shape(watched[i][0].get(watched[i][1])) for i in self.deep)

    def _safe_shape(self, v: Any) -> Any:
        try:
            return self._shape(v, 0)
        except Exception:  # noqa: BLE001 - a project object's attribute may raise: then it is not looked into
            return type(v).__qualname__

    def _shape(self, v: Any, depth: int) -> Any:  # noqa: C901 - one case per kind of value
        if isinstance(v, _SCALARS):
            return v
        if depth > 4:
            return id(v)
        if isinstance(v, (tuple, frozenset, list, bytearray, collections.deque)):
            return (type(v).__name__, len(v), tuple(self._shape(x, depth + 1) for x in list(v)[:1000]))
        if isinstance(v, (set, dict)):
            items = list(v.items()) if isinstance(v, dict) else [(x, None) for x in v]
            return (type(v).__name__, len(v), tuple((self._shape(k, depth + 1), self._shape(x, depth + 1))
                                                    for k, x in items[:1000]))
        if hasattr(type(v), "cache_info"):  # the class's: an object's own __getattr__ may be costly
            return ("cache", v.cache_info().currsize)
        if isinstance(v, types.FunctionType):
            if not self.owns(v.__code__.co_filename):
                return None
            cells = tuple(self._shape(c.cell_contents, depth + 1) for c in v.__closure__ or () if _filled(c))
            return ("function", self._shape(v.__defaults__, depth + 1), self._shape(v.__kwdefaults__, depth + 1), cells)
        if isinstance(v, (types.ModuleType, types.BuiltinFunctionType, types.MethodType)):
            return None
        if type(v).__module__ in ("itertools", "random"):
            return ("iterator", repr(v)) if type(v).__module__ == "itertools" else ("random", v.getstate())  # SystemRandom raises: not looked into
        owner = v if isinstance(v, type) else type(v)
        owned = self.owned.get(owner)
        if owned is None:
            owned = self.owned[owner] = self.owns(getattr(sys.modules.get(owner.__module__), "__file__", None))
        if not owned:
            return type(v).__qualname__  # the checker's, the standard library's: not looked into
        attrs = vars(v) if hasattr(v, "__dict__") else {}
        return (owner.__qualname__, tuple((k, self._shape(x, depth + 1)) for k, x in list(attrs.items())
                                          if not k.startswith("__") and not callable(x)
                                          and not isinstance(x, (staticmethod, classmethod, property))))

    def changed(self, before: tuple[Any, ...]) -> tuple[str, str | None, int | None] | None:
        """What differs from ``before`` (words, file, line), or ``None``."""
        now = self.snapshot()
        if now == before:
            return None
        n = len(self.watched)
        shapes_a, shapes_b = dict(zip(self.deep or [], before[n:], strict=True)), dict(zip(self.deep or [], now[n:], strict=True))
        for i, (env, name) in enumerate(self.watched):
            if before[i] == now[i] and shapes_a.get(i) == shapes_b.get(i):
                continue
            file = env.get("__file__")
            how = "was rebound" if before[i] != now[i] else "changed inside"
            return f"{Path(str(file)).stem}.{name} {how}", file, _defined_at(file, name)
        return "module-level data changed", None, None  # pragma: no cover - a difference is always found above


def _fixed(shape: Any) -> bool:
    """Whether a value of this shape cannot change in place (watched by identity alone)."""
    if shape is None or isinstance(shape, _SCALARS):
        return True
    return shape[0] == "function" and shape[1:] == (None, None, ()) if isinstance(shape, tuple) else False


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True


def _defined_at(file: str | None, name: str) -> int | None:
    """The line that first binds ``name`` at the top level of ``file`` (for the error's location)."""
    try:
        lines = Path(str(file)).read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    pattern = re.compile(rf"^{re.escape(name)}\s*[:=]|^(def|class)\s+{re.escape(name)}\b")
    return next((i for i, ln in enumerate(lines, start=1) if pattern.match(ln)), None)


def data_changed(inst: Any, before: tuple[Any, ...], during: str) -> OwnershipError | None:
    """OWN066 if ``inst``'s module-level data differs from ``before`` (``during``: what ran), else ``None``."""
    what = inst.module_data().changed(before)
    if what is None:
        return None
    words, file, line = what
    return OwnershipError(
        Code.SPEC_NONDETERMINISTIC,
        f"{during} changed module-level data spec code can read ({words}): an action that remembers what ran "
        "before (a memo, a counter, a cache) answers differently in later states; keep changing data in state "
        "variables (spec.var) and constants in tuples or frozensets",
        file if file is not None else inst.spec.file, line if file is not None else inst.spec.line,
    )


class SearchAudit:
    """The determinism audit of one search: the first :data:`EVERY_STATE` expanded states, then a sample.

    For each audited state the search's expansion is kept and the state is
    expanded again later (every :data:`RERUN_BATCH` audited states, and when
    the search ends), every action instance run in full: a different answer
    is an action that is not a function of the state, whether it answers at
    random or remembers what ran in between (OWN066); one the footprint cache
    skipped but that is enabled gets the same error.  The module-level data
    (:class:`ModuleData`) is compared after every audited expansion, so a
    memo filled in any state is caught at the next audited one.
    """

    def __init__(self, inst: Any) -> None:
        self.inst = inst
        self.before = inst.module_data().snapshot()
        self.expanded = 0
        self.audited = 0
        self.pending: list[tuple[State, list[tuple[int, State, tuple[Any, ...]]], tuple[bool | str, ...]]] = []

    def __call__(self, state: State, out: Sequence[tuple[ActionInstance, Successor]]) -> None:
        """The search expanded ``state`` into ``out``: audit it if it is one of those audited."""
        self.expanded += 1
        n = self.expanded
        if n > EVERY_STATE and n % SAMPLE_EVERY:
            return
        self.audited += 1
        self.check_data(state)
        self.pending.append((state, [(ai.index, sc.state, sc.picks) for ai, sc in out], self._invariants(state)))
        if len(self.pending) >= RERUN_BATCH:
            self.rerun()

    def check_data(self, state: State | None) -> None:
        """OWN066 if the module-level data changed since the search started."""
        if self.inst.module_data().snapshot() == self.before:
            return  # the usual case: the message below (the state's cells in words) is not built
        during = "the search" if state is None else f"expanding state {self._cells(state)}"
        err = data_changed(self.inst, self.before, during)
        if err is not None:
            raise err

    def rerun(self) -> None:
        """Expand the kept states again and compare with what the search found then."""
        inst = self.inst
        pending, self.pending = self.pending, []
        for state, recorded, held in pending:
            now_held = self._invariants(state)
            if now_held != held:
                inv = next(i for i, x, y in zip(inst.invariants, held, now_held, strict=True) if x != y)
                raise OwnershipError(
                    Code.SPEC_NONDETERMINISTIC,
                    f"invariant {inv.name} is not a deterministic function of the state: evaluated again later in "
                    f"the search, in the same state ({self._cells(state)}), it gave {now_held[inst.invariants.index(inv)]}"
                    f" where it gave {held[inst.invariants.index(inv)]} before; read every input through the state "
                    "variables",
                    inv.file, inv.line,
                )
            again: list[tuple[int, State, tuple[Any, ...]]] = []
            for ai in inst.action_instances:
                found: list[Successor] = []
                inst._run(state, ai, found)
                again.extend((ai.index, sc.state, sc.picks) for sc in found)
            if again == recorded:
                continue
            ai, before, now = self._first_difference(recorded, again)
            raise OwnershipError(
                Code.SPEC_NONDETERMINISTIC,
                f"action {ai.label} is not a deterministic function of the state: run again later in the search, in "
                f"the same state ({self._cells(state)}), it gave different successors "
                f"({inst._difference(before, now)}); it depends on something other than the state variables it "
                "reads (random numbers, the clock, a memo, counter or cache in module-level data): read every input "
                "through the state variables",
                ai.action.file, ai.action.line,
            )
        self.check_data(None)

    def _invariants(self, state: State) -> tuple[bool | str, ...]:
        """Every invariant's value in ``state``; an error is a value too (an invariant the run did not select may
        raise where the search never evaluates it: that is its checks' business, not the audit's)."""
        out: list[bool | str] = []
        for inv in self.inst.invariants:
            try:
                out.append(self.inst.holds(state, inv.name))
            except OwnershipError as exc:
                out.append(f"an error ({exc.code.name})")
        return tuple(out)

    def _first_difference(self, a: list[tuple[int, State, tuple[Any, ...]]], b: list[tuple[int, State, tuple[Any, ...]]]
                          ) -> tuple[ActionInstance, list[tuple[State, tuple[Any, ...]]], list[tuple[State, tuple[Any, ...]]]]:
        """The first action instance whose outcomes differ, with its outcomes in ``a`` and in ``b``."""
        for ai in self.inst.action_instances:
            x = [(s, p) for i, s, p in a if i == ai.index]
            y = [(s, p) for i, s, p in b if i == ai.index]
            if x != y:
                return ai, x, y
        raise AssertionError("the expansions differ")  # pragma: no cover - only called when they do

    def _cells(self, state: State) -> str:
        cells = self.inst.cells(state)
        shown = ", ".join(f"{k}={v}" for k, v in list(cells.items())[:8])
        return shown + (", ..." if len(cells) > 8 else "")

    def note(self) -> str:
        """What was audited, for the verdict's notes."""
        return audit_note([(self.expanded, self.audited)])


def audit_note(counts: Sequence[tuple[int, int]]) -> str:
    """The note of one audit or several, as ``(expanded, audited)`` (one per worker of a sharded search)."""
    expanded = sum(e for e, _ in counts)
    audited = sum(a for _, a in counts)
    if expanded == audited:
        return f"determinism audited on every one of {expanded:,} expanded states"
    each = f" of each of {len(counts)} workers" if len(counts) > 1 else ""
    return (f"determinism audited on the first {EVERY_STATE:,} expanded states{each} and 1 in {SAMPLE_EVERY} after "
            f"({audited:,} of {expanded:,})")
