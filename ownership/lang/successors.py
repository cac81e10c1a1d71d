"""Running actions on concrete states: every outcome of ``s.choose``, and the guard footprints.

:class:`Successors` is the part of :class:`~ownership.lang.instance.Instance`
that runs action instances: :meth:`~Successors.expand` is the explorer's hot
loop (it skips an action whose guard failed on the same cell values, its
*footprint*), :meth:`~Successors.successors_of` forks on every ``s.choose``,
and the ``run_with_*`` and :meth:`~Successors.first_outcome` variants replay a
trace, draw choices at random or stop at the first outcome.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from ownership.errors import OwnershipError
from ownership.lang.declarations import Action
from ownership.lang.guard import Disabled
from ownership.library import is_checker_code

if TYPE_CHECKING:
    from ownership.core.events import Event
    from ownership.lang.instance import State, View

FOOTPRINT_VALUES = 64
"""Values of the cells an action read for which it is remembered as disabled (per action instance, while it reads
the same cells): enough for the states a search meets in turn, whatever order a worker meets them in."""

Footprint = tuple[tuple[int, ...], Callable[["State"], Any], set[Any]]
"""An action instance that was disabled: the cells it read (in order), a getter of them, the values it was
disabled at.  A run is a function of the cells it reads, so with those values there it is disabled again."""


def remember_footprint(footprints: list[Footprint | None], index: int, reads: list[int], state: State) -> None:
    """Run ``index`` (an action instance that was disabled, an invariant that held) read ``reads`` in ``state``:
    remember the values there, so a later state with the same values skips the run."""
    cells = tuple(reads)
    fp = footprints[index]
    if fp is not None and fp[0] == cells:
        if len(fp[2]) < FOOTPRINT_VALUES:
            fp[2].add(fp[1](state))
        return
    getter = itemgetter(*cells)
    footprints[index] = (cells, getter, {getter(state)})


AUDIT_FIRST = 32
"""Expansions whose every action :meth:`Instance.expand` runs twice (the determinism audit)..."""
AUDIT_EVERY = 64
"""... and after those, one expansion in this many."""


@dataclass(frozen=True)
class ActionInstance:
    """An action with concrete arguments, e.g. ``decode_prealloc(B)``."""

    index: int
    action: Action
    args: tuple[int, ...]
    label: str
    call: tuple[Any, ...] = ()
    """The arguments spec code receives: ``args`` with symmetric-domain indices as :class:`Element` objects."""


@dataclass(frozen=True)
class Successor:
    """One outcome of running an action instance: the new state and what it did."""

    state: State
    picks: tuple[Any, ...]
    events: tuple[Event, ...]
    violations: tuple[str, ...] = ()
    """Invariants an event of this step was marked as violating (``s.emit(..., violates=X)``), in order."""
    choices: tuple[tuple[str, str], ...] = ()
    """Each ``s.choose`` of the run as (label, chosen value's name); only a recording run of one
    outcome (:meth:`Successors.run_with_picks`) fills it, for the trace."""


@dataclass(frozen=True)
class RecordedOutcome:
    """One outcome of a recorded run: the cells it assigned (with their final values), its picks and flags.

    ``writes`` lists every assigned cell, also one assigned the value it
    already had: in another state with the same read cells the same run
    assigns the same values, so the outcome there is that state with
    ``writes`` applied.
    """

    writes: tuple[tuple[int, Any], ...]
    picks: tuple[Any, ...]
    violations: tuple[str, ...]


@dataclass(frozen=True)
class Recording:
    """Every outcome of an action instance in one state, and the cells that decided them.

    ``reads`` holds each cell the runs read, in the order first read (over
    all the runs ``s.choose`` forks into, in their order).  The runs are
    deterministic functions of the state, so the position of each read is
    a function of the values of the reads before it: in any state that
    agrees with this one on ``reads``, the action has exactly ``outcomes``
    (the compiled kernel's memo is keyed on this).
    """

    reads: tuple[int, ...]
    outcomes: tuple[RecordedOutcome, ...]


class _TooMany(Exception):  # noqa: N818 - a control-flow signal
    """Raised inside :meth:`Successors.successors_capped` when the choices are too wide."""


class Successors:
    """:class:`~ownership.lang.instance.Instance`'s successor function (see the module docstring)."""

    if TYPE_CHECKING:
        view: View
        action_instances: list[ActionInstance]
        _footprints: list[Footprint | None]
        _expanded: int

        def _runtime_error(self, what: str, exc: Exception, file: str | None) -> OwnershipError: ...

        def _audit(self, state: State, out: list[tuple[ActionInstance, Successor]], skipped: list[int]) -> None: ...

    def successors_of(self, state: State, ai: ActionInstance) -> list[Successor]:
        """Every outcome of ``ai`` in ``state`` (empty if it is disabled).

        Each ``s.choose`` call forks: the action is re-run from ``state`` with
        each sequence of picks until every combination has been tried.
        """
        out: list[Successor] = []
        self._run(state, ai, out)
        return out

    def expand(self, state: State) -> list[tuple[ActionInstance, Successor]]:
        """Every enabled action instance's outcomes in ``state``: the explorer's hot loop.

        An action whose guard failed is remembered with the cells it read
        and their values (its *footprint*); actions are deterministic functions
        of the cells they read, so in a later state with the same values there
        it fails again and is skipped without running.
        """
        out: list[tuple[ActionInstance, Successor]] = []
        self._expanded += 1
        n = self._expanded
        # The determinism audit (see _audit): every state of the first expansions, then a sample.
        audit = n <= AUDIT_FIRST or not n % AUDIT_EVERY
        skipped: list[int] = []
        view = self.view
        cur = view._cells
        events = view.events
        picks = view._picks
        counts = view._counts
        prefix = view._prefix
        reads = view._reads
        writes = view._writes
        flags = view._flags
        footprints = self._footprints
        for ai in self.action_instances:
            fp = footprints[ai.index]
            if fp is not None and fp[1](state) in fp[2]:
                if audit:
                    skipped.append(ai.index)
                continue
            cur[:] = state
            reads.clear()
            writes.clear()
            if picks:
                picks.clear()
                counts.clear()
                view._chosen.clear()
                view._labels.clear()
            if prefix:
                prefix.clear()
            if events:
                events.clear()
            if flags:
                flags.clear()
            fired = True
            try:
                ai.action.fn(view, *ai.call)
            except Disabled:
                if not picks:
                    if reads:
                        remember_footprint(footprints, ai.index, reads, state)
                    continue
                fired = False
            except OwnershipError:
                raise
            except Exception as exc:  # noqa: BLE001 - spec code is user code
                raise self._runtime_error(f"action {ai.label}", exc, ai.action.file) from None
            if not picks:
                out.append((ai, Successor(tuple(cur), (), tuple(events), tuple(flags) if flags else ())))
                continue
            # The run above took the first option at every choice: keep it and run the
            # alternatives, in the order successors_of would (the search order stays the same).
            found: list[Successor] = []
            if fired:
                found.append(Successor(tuple(cur), tuple(view._chosen), tuple(events), tuple(flags) if flags else ()))
            alternatives = [
                tuple(picks[:pos]) + (alt,) for pos in range(len(picks)) for alt in range(counts[pos] - 1, 0, -1)
            ]
            self._run(state, ai, found, alternatives)
            out.extend((ai, sc) for sc in found)
        if audit:
            self._audit(state, out, skipped)
        return out

    def successors_capped(self, state: State, ai: ActionInstance, limit: int) -> list[Successor] | None:
        """:meth:`successors_of`, or ``None`` once more than ``limit`` runs would be needed (wide choices)."""
        out: list[Successor] = []
        try:
            self._run(state, ai, out, None, limit)
        except _TooMany:
            self.view._prefix.clear()
            return None
        return out

    def _run(self, state: State, ai: ActionInstance, out: list[Successor], pending: list[tuple[int, ...]] | None = None,
             limit: int | None = None) -> None:
        view = self.view
        for fired in self._runs(state, ai, [()] if pending is None else pending, limit):
            if fired:
                out.append(Successor(tuple(view._cells), tuple(view._chosen), tuple(view.events), tuple(view._flags)))

    def _runs(self, state: State, ai: ActionInstance, pending: list[tuple[int, ...]],
              limit: int | None = None) -> Iterator[bool]:
        """Run ``ai`` from ``state`` once per sequence of picks still ``pending``, adding the alternatives each run
        reveals; after each run, yield whether it fired (the view holds what it did until the next)."""
        view = self.view
        cur = view._cells
        fn = ai.action.fn
        args = ai.call
        picks, counts = view._picks, view._counts
        hooks = (view.events, view._flags, picks, counts, view._chosen, view._labels, view._reads, view._writes)
        runs = 0
        try:
            while pending:
                runs += 1
                if limit is not None and runs > limit:
                    raise _TooMany
                prefix = pending.pop()
                cur[:] = state
                for hook in hooks:
                    hook.clear()
                view._prefix[:] = prefix
                fired = True
                try:
                    fn(view, *args)
                except Disabled:
                    fired = False
                except OwnershipError:
                    raise
                except Exception as exc:  # noqa: BLE001 - spec code is user code
                    raise self._runtime_error(f"action {ai.label}", exc, ai.action.file) from None
                if picks:
                    for pos in range(len(prefix), len(picks)):
                        for alt in range(counts[pos] - 1, 0, -1):
                            pending.append(tuple(picks[:pos]) + (alt,))
                yield fired
        finally:
            view._prefix.clear()

    def record(self, state: State, ai: ActionInstance) -> Recording:
        """Every outcome of ``ai`` in ``state``, in :meth:`successors_of`'s order, with the cells read and written.

        Call it with recording off and no choice reduction (:meth:`Instance.mode`):
        a reduced choice reads cells the view does not log.
        """
        view = self.view
        cur = view._cells
        seen: dict[int, None] = {}
        outcomes: list[RecordedOutcome] = []
        for fired in self._runs(state, ai, [()]):
            for pos in view._reads:
                seen[pos] = None
            if fired:
                assigned = tuple((c, cur[c]) for c in dict.fromkeys(view._writes))
                outcomes.append(RecordedOutcome(assigned, tuple(view._chosen), tuple(view._flags)))
        return Recording(tuple(seen), tuple(outcomes))

    def run_with_picks(self, state: State, ai: ActionInstance, picks: Sequence[Any]) -> Successor | None:
        """Re-run ``ai`` making exactly the recorded choices ``picks`` (chosen values).

        Returns ``None`` if the action is disabled or a recorded value is not
        among the options at that point.
        """
        succ = self._run_once(state, ai, "_forced", tuple(picks))
        if succ is None or len(succ.picks) != len(picks):
            return None
        return succ

    def run_with_chooser(self, state: State, ai: ActionInstance, chooser: Callable[[Sequence[Any]], Any]) -> Successor | None:
        """Run ``ai`` once, letting ``chooser(options)`` make every ``s.choose``; ``None`` if disabled."""
        return self._run_once(state, ai, "_chooser", chooser)

    def _run_once(self, state: State, ai: ActionInstance, hook: str, value: Any) -> Successor | None:
        """One run of ``ai`` with the view's choice ``hook`` (``_forced`` or ``_chooser``) set to ``value``."""
        view = self.view
        view._cells[:] = state
        view._writes.clear()
        view.events.clear()
        view._flags.clear()
        view._picks.clear()
        view._counts.clear()
        view._chosen.clear()
        view._labels.clear()
        view._prefix.clear()
        object.__setattr__(view, hook, value)
        try:
            ai.action.fn(view, *ai.call)
        except Disabled:
            return None
        except OwnershipError:
            raise
        except Exception as exc:  # noqa: BLE001 - spec code is user code
            raise self._runtime_error(f"action {ai.label}", exc, ai.action.file) from None
        finally:
            object.__setattr__(view, hook, None)
        return Successor(tuple(view._cells), tuple(view._chosen), tuple(view.events), tuple(view._flags),
                         tuple(view._labels))

    def disabled_at(self, state: State, ai: ActionInstance) -> tuple[str, int, str] | None:
        """Where ``ai``'s guard fails in ``state``: (file, line, source text) of the spec line that raised.

        Runs the action once taking the first option at every ``s.choose``;
        ``None`` if it fires or stops elsewhere than in spec code.
        """
        view = self.view
        view._cells[:] = state
        for hook in (view._picks, view._counts, view._chosen, view._labels, view._prefix, view.events, view._flags,
                     view._writes):
            hook.clear()
        try:
            ai.action.fn(view, *ai.call)
        except Disabled as exc:
            for frame in reversed(traceback.extract_tb(exc.__traceback__)):
                if not is_checker_code(frame.filename):
                    return frame.filename, frame.lineno or 0, (frame.line or "").strip()
        except Exception:  # noqa: BLE001 - only asked where a guard failed; running it for real reports errors
            return None
        return None

    def first_outcome(self, state: State, ai: ActionInstance) -> Successor | None:
        """One outcome of ``ai`` in ``state`` (``None`` exactly when it is disabled).

        Tries choices depth-first and stops at the first that fires, so it
        stays cheap on large pools where :meth:`successors_of` would enumerate
        every combination of pages.
        """
        fp = self._footprints[ai.index]
        if fp is not None and fp[1](state) in fp[2]:
            return None
        view = self.view
        pending: list[tuple[int, ...]] = [()]
        while pending:
            prefix = pending.pop()
            view._cells[:] = state
            view.events.clear()
            view._flags.clear()
            view._picks.clear()
            view._counts.clear()
            view._chosen.clear()
            view._labels.clear()
            view._prefix[:] = prefix
            view._reads.clear()
            view._writes.clear()
            try:
                ai.action.fn(view, *ai.call)
            except Disabled:
                picks, counts = view._picks, view._counts
                if not picks and not prefix:
                    reads = view._reads
                    if reads:
                        remember_footprint(self._footprints, ai.index, reads, state)
                    view._prefix.clear()
                    return None
                # Alternatives after the last pick first: depth-first, nearest the failure.
                for pos in range(len(prefix), len(picks)):
                    for alt in range(counts[pos] - 1, 0, -1):
                        pending.append(tuple(picks[:pos]) + (alt,))
                continue
            except OwnershipError:
                raise
            except Exception as exc:  # noqa: BLE001 - spec code is user code
                raise self._runtime_error(f"action {ai.label}", exc, ai.action.file) from None
            view._prefix.clear()
            return Successor(tuple(view._cells), tuple(view._chosen), tuple(view.events), tuple(view._flags))
        view._prefix.clear()
        return None
