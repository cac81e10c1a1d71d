"""Judging a lasso on concrete states: does it break its temporal property on a fair path?

Shared by the explorer (which confirms every lasso it found before showing
it) and ``ownership replay`` (which confirms a saved one): both run the same
property functions and fairness rules (:mod:`ownership.lang.temporal`) on
the states the concrete semantics gives.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ownership.errors import Code, OwnershipError
from ownership.lang.temporal import Fairness, Form, Property, truth

if TYPE_CHECKING:
    from ownership.lang.instance import Instance, State


def fair_instances(inst: Instance) -> tuple[frozenset[int], frozenset[int]]:
    """The weakly and the strongly fair action instances of ``inst``, by number."""
    fairness = inst.spec.fairness
    weak = frozenset(ai.index for ai in inst.action_instances if fairness.get(ai.action.name) is Fairness.WEAK)
    strong = frozenset(ai.index for ai in inst.action_instances if fairness.get(ai.action.name) is Fairness.STRONG)
    return weak, strong


def argument(inst: Instance, prop: Property, element: int | None) -> tuple[Any, ...]:
    """What the property's functions receive after the state: the element as spec code sees it."""
    if prop.each is None or element is None:
        return ()
    name = prop.each.name
    return (inst.elements[name][element] if name in inst.elements else element,)


def evaluator(inst: Instance) -> Callable[[Property, str, State, tuple[Any, ...]], bool]:
    """``(prop, role, state, args) -> bool``: one of a property's functions on a state, as an invariant is run.

    ``role`` is ``"when"`` or ``"then"``.  An exception in spec code is a
    located OWN005; a function that writes the state is OWN067; one that
    returns no bool is OWN065.
    """
    view = inst.view

    def value(prop: Property, role: str, state: State, args: tuple[Any, ...]) -> bool:
        fn = prop.when if role == "when" else prop.then
        assert fn is not None
        view._cells[:] = state
        object.__setattr__(view, "_judging", True)
        try:
            out = fn(view, *args)
        except OwnershipError:
            raise
        except Exception as exc:  # noqa: BLE001 - spec code is user code
            raise inst._runtime_error(f"property {prop.name} ({role})", exc, prop.file) from None
        finally:
            object.__setattr__(view, "_judging", False)
        if tuple(view._cells) != state:
            view._cells[:] = state
            raise OwnershipError(Code.SPEC_IMPURE, f"property {prop.name} ({role}) writes the state: a property "
                                 "must only read it", prop.file, prop.line)
        return truth(prop, role, out)

    return value


def confirm(inst: Instance, prop: Property, element: int | None, states: Sequence[State],
            taken: Sequence[int], loop: int, since: int) -> str | None:
    """What is wrong with a lasso (``None``: it breaks ``prop`` on a fair path).

    ``states`` are the concrete states from the initial one, ``taken`` the
    action instance numbers of the steps, ``loop`` the position the last step
    returns to (the last position: nothing can run there and the path stays),
    ``since`` the position from which the property is said to be broken.
    """
    last = len(states) - 1
    if not 0 <= loop <= last or not 0 <= since <= last:
        return f"names a position past its last state ({last})"
    with inst.mode(recording=False, choice_reduction=()):
        enabled = [frozenset(ai.index for ai, _ in inst.expand(st)) for st in states[loop:last + 1]]
    if loop == last:
        if enabled[0]:
            return "stops in a state where an action can still run"
        cycle: Sequence[State] = [states[last]]
        cycle_enabled: list[frozenset[int]] = [frozenset()]
    else:
        if states[last] != states[loop]:
            return f"does not return to state {loop}"
        cycle, cycle_enabled = states[loop:last], enabled[:-1]
    value = evaluator(inst)
    args = argument(inst, prop, element)
    if prop.form is Form.EVENTUALLY_ALWAYS:
        if all(value(prop, "then", st, args) for st in cycle):
            return "holds its condition all round the loop"
    else:
        if prop.form is Form.LEADS_TO and not value(prop, "when", states[since], args):
            return f"does not meet its when-condition at state {since}"
        # From the break on, and all round the loop (its states come again after the break).
        if any(value(prop, "then", st, args) for st in states[min(since, loop):]):
            return "meets its then-condition"
    went = frozenset(taken[loop:])
    weak, strong = fair_instances(inst)
    always = frozenset.intersection(*cycle_enabled)
    ever = frozenset.union(*cycle_enabled)
    starved = (weak & always) - went or (strong & ever) - went
    if starved:
        name = inst.action_instances[min(starved)].label
        return f"is not fair to {name} (enabled in its loop but never taken)"
    return None
