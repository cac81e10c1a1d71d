"""A lasso, replayed through the concrete semantics and re-judged before it is shown.

The graph search found the lasso; this module trusts none of it.  It runs
the steps again from the initial state, then checks on the states it got
(:func:`ownership.lang.lasso.confirm`) that the last one is the loop's first
one again (or that nothing can run there), that the property is broken from
the position it says on, and that the loop is fair: every weakly fair action
instance enabled in all of the loop's states is taken in it, every strongly
fair one enabled in any of them is taken in it.  Anything else is an
internal error (OWN041): the checker never shows a counterexample it could
not confirm.
"""

from __future__ import annotations

from dataclasses import replace

from ownership.core.replay import build_trace
from ownership.core.trace import Trace, TraceKind
from ownership.engines.liveness.decide import Lasso
from ownership.errors import Code, OwnershipError
from ownership.lang.instance import Instance, State
from ownership.lang.lasso import confirm


def lasso_trace(inst: Instance, lasso: Lasso, engine: str) -> Trace:
    """The lasso as a replayed :class:`Trace` of kind ``LASSO``; OWN041 if it does not break its property."""
    states = _states(inst, lasso, engine)
    problem = confirm(inst, lasso.prop, lasso.element, states, [i for i, _ in lasso.steps], lasso.loop, lasso.since)
    if problem is not None:
        raise OwnershipError(Code.INTERNAL_REPLAY, f"{engine}: its lasso for {lasso.prop.name} {problem} on replay")
    trace = build_trace(inst, lasso.steps, engine=engine, violation=None)
    subject = None
    if lasso.prop.each is not None and lasso.element is not None:
        subject = inst.names[lasso.prop.each.name][lasso.element]
    return replace(trace, violation=lasso.prop.name, kind=TraceKind.LASSO, loop=lasso.loop, since=lasso.since,
                   subject=subject)


def _states(inst: Instance, lasso: Lasso, engine: str) -> list[State]:
    state = inst.init_state
    states = [state]
    with inst.mode(recording=False, choice_reduction=()):
        for i, (index, picks) in enumerate(lasso.steps, start=1):
            succ = inst.run_with_picks(state, inst.action_instances[index], picks)
            if succ is None:
                raise OwnershipError(Code.INTERNAL_REPLAY, f"{engine}: step {i} of its lasso for {lasso.prop.name} "
                                     "is not enabled on replay")
            state = succ.state
            states.append(state)
    return states
