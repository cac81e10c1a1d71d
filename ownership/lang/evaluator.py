"""One view of an instance with its modes fixed: the public way to run spec code on concrete states.

:class:`~ownership.lang.instance.Instance` holds one view ``s``, whose modes
(recording events, merging choices among identical elements) are switched
with :meth:`Instance.mode <ownership.lang.instance.Instance.mode>` and
restored after.  An :class:`Evaluator` owns a view of its own instead, its
modes set once at construction, so nothing has to be saved and restored
around a call, and nothing outside :mod:`ownership.lang` needs the view's
private cells: it puts the view at a state (:meth:`Evaluator.at`), says which
cells the last call read (:meth:`Evaluator.reads`), runs action instances and
evaluates invariants.

An evaluator is built from an instance (sharing its layout, action
instances, footprint cache and warnings; only the view and its modes are its
own) or from an :class:`~ownership.lang.description.InstanceDescription`,
which is how a worker process gets one: an evaluator pickles as its
instance's description and its modes, and is rebuilt on the other side.
:meth:`Instance.evaluator <ownership.lang.instance.Instance.evaluator>`
keeps one per set of modes.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ownership.lang.description import InstanceDescription, describe

if TYPE_CHECKING:
    from ownership.lang.instance import Instance, State, View
    from ownership.lang.successors import ActionInstance, Successor


class Evaluator:
    """An instance's concrete semantics on a view of its own, with fixed modes (see the module docstring)."""

    def __init__(self, source: Instance | InstanceDescription, *, recording: bool = True,
                 choice_reduction: Iterable[str] = ()) -> None:
        from ownership.lang.instance import View

        inst = source.instantiate() if isinstance(source, InstanceDescription) else source
        reduce = frozenset(choice_reduction)
        unknown = sorted(reduce - set(inst.sizes))
        if unknown:
            raise ValueError(f"choice_reduction names no domain of spec {inst.spec.name}: {', '.join(unknown)}")
        self.instance: Instance = inst
        """The instance evaluated (built from the description when given one)."""
        self.recording = recording
        """Whether runs record events (a search does not: traces are replayed to rebuild them)."""
        self.choice_reduction = reduce
        """Domains whose ``s.choose(..., domain=D)`` tries one of each class of identical elements."""
        # A shallow copy: layout, action instances, footprints and warnings are shared (none depends
        # on the modes); the view is this evaluator's alone, so no other caller can switch its modes.
        own: Instance = copy.copy(inst)
        own.__dict__.pop("_evaluators", None)
        view = View(own)
        object.__setattr__(view, "recording", recording)
        object.__setattr__(view, "_reduce", reduce)
        own.view = view
        self._own = own
        self._view = view

    def __reduce__(self) -> tuple[Callable[..., Evaluator], tuple[Any, ...]]:
        """Pickled as the instance's description and the modes: rebuilt, not copied, in another process."""
        return _rebuild, (describe(self.instance), self.recording, tuple(sorted(self.choice_reduction)))

    def __repr__(self) -> str:
        reduce = f", choice_reduction={sorted(self.choice_reduction)}" if self.choice_reduction else ""
        return f"Evaluator({self.instance.spec.name}, recording={self.recording}{reduce})"

    def description(self) -> InstanceDescription:
        """How another process rebuilds this evaluator's instance."""
        return describe(self.instance)

    # -- the view ---------------------------------------------------------------------
    def at(self, state: State) -> View:
        """The view holding ``state``, its read log empty: pass it to spec code (a log rule, an adapter).

        What the code writes stays in the view until the next call; the
        state itself is a tuple and never changes.
        """
        view = self._view
        view._cells[:] = state
        view._reads.clear()
        return view

    def reads(self) -> frozenset[int]:
        """Positions of the state cells read since the last call (:meth:`at`, a run or an invariant).

        After :meth:`expand` it holds what the last action instance run read:
        the expansion keeps a read log per action for its guard footprints.
        """
        return frozenset(self._view._reads)

    # -- running actions ----------------------------------------------------------------
    def successors(self, state: State, ai: ActionInstance) -> list[Successor]:
        """Every outcome of ``ai`` in ``state`` (empty if disabled); see ``Instance.successors_of``."""
        self._view._reads.clear()
        return self._own.successors_of(state, ai)

    def successors_capped(self, state: State, ai: ActionInstance, limit: int) -> list[Successor] | None:
        """:meth:`successors`, or ``None`` once more than ``limit`` runs would be needed."""
        self._view._reads.clear()
        return self._own.successors_capped(state, ai, limit)

    def expand(self, state: State) -> list[tuple[ActionInstance, Successor]]:
        """Every enabled action instance's outcomes in ``state`` (the explorer's expansion, audited)."""
        return self._own.expand(state)

    def run_with_picks(self, state: State, ai: ActionInstance, picks: Sequence[Any]) -> Successor | None:
        """``ai`` re-run making exactly the recorded choices; ``None`` if that is not possible here."""
        self._view._reads.clear()
        return self._own.run_with_picks(state, ai, picks)

    def run_with_chooser(self, state: State, ai: ActionInstance,
                         chooser: Callable[[Sequence[Any]], Any]) -> Successor | None:
        """One run of ``ai``, ``chooser(options)`` making every choice; ``None`` if disabled."""
        self._view._reads.clear()
        return self._own.run_with_chooser(state, ai, chooser)

    def first_outcome(self, state: State, ai: ActionInstance) -> Successor | None:
        """One outcome of ``ai`` in ``state``, ``None`` exactly when it is disabled."""
        self._view._reads.clear()
        return self._own.first_outcome(state, ai)

    def disabled_at(self, state: State, ai: ActionInstance) -> tuple[str, int, str] | None:
        """(file, line, text) of the spec line whose guard disabled ``ai`` in ``state``, if it is one."""
        self._view._reads.clear()
        return self._own.disabled_at(state, ai)

    def run_reading(self, state: State, ai: ActionInstance,
                    picks: Sequence[Any]) -> tuple[Successor | None, frozenset[int]]:
        """:meth:`run_with_picks`, and the cells that run read (what a transition depended on)."""
        succ = self.run_with_picks(state, ai, picks)
        return succ, self.reads()

    # -- invariants -------------------------------------------------------------------------
    def violated(self, state: State) -> str | None:
        """The first invariant ``state`` violates, or ``None``."""
        self._view._reads.clear()
        return self._own.violated(state)

    def holds(self, state: State, invariant: str) -> bool:
        """Whether ``state`` satisfies the named invariant."""
        self._view._reads.clear()
        return self._own.holds(state, invariant)

    def step_violated(self, succ: Successor, checked: Sequence[str] | None = None) -> str | None:
        """The first checked invariant the step to ``succ`` violates (its state or a marked event)."""
        self._view._reads.clear()
        return self._own.step_violated(succ, checked)

    def is_terminal(self, state: State) -> bool:
        """The spec's ``@spec.terminal`` predicate on ``state`` (false when it declares none)."""
        self._view._reads.clear()
        return self._own.is_terminal(state)


def _rebuild(description: InstanceDescription, recording: bool, choice_reduction: tuple[str, ...]) -> Evaluator:
    """The unpickling side of :meth:`Evaluator.__reduce__`."""
    return Evaluator(description, recording=recording, choice_reduction=choice_reduction)
