"""The determinism audit: actions are functions of the cells they read.

:meth:`~ownership.lang.successors.Successors.expand` calls
:meth:`DeterminismAudit._audit` on the first expansions and then on a
sample; it runs every action again and compares, refusing an action that
answers differently (OWN066) or one the footprint cache skipped although it
is enabled (OWN067).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ownership.errors import Code, OwnershipError

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
