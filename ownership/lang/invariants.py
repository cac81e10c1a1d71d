"""Evaluating invariants: their truth value, which ones a run checks, and that they only read the state.

The module-level functions are shared by every engine (OWN065 for an
invariant that does not return a bool, OWN064 for one that calls ``s.flag``
or ``s.emit`` or reads ``s.events``, OWN004/OWN012 for an unknown invariant
name); :class:`InvariantChecks` is the part of
:class:`~ownership.lang.instance.Instance` that evaluates them on a concrete
state and refuses one that writes it (OWN067).
"""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any

from ownership.errors import Code, OwnershipError
from ownership.lang.declarations import Invariant
from ownership.lang.elements import spec_frame_location
from ownership.lang.guard import describe_type, is_truth_value
from ownership.lang.model import Spec

if TYPE_CHECKING:
    from ownership.lang.instance import Instance, State, View
    from ownership.lang.successors import Successor


def invariant_value(inv: Invariant, value: object) -> bool:
    """The truth of what invariant ``inv`` returned; OWN065 unless it is a bool.

    A list, a generator or a non-zero count is always true, so an invariant
    returning one could never fail and every check would say PROVED.
    """
    if value is True:
        return True
    if value is False:
        return False
    if is_truth_value(value):
        return bool(value)
    raise not_bool_error(inv, value)


def not_bool_error(inv: Invariant, value: object) -> OwnershipError:
    """OWN065 for invariant ``inv`` returning ``value``."""
    hint = (" (a list or a generator is true whenever it is non-empty, so the invariant could never fail: "
            "return all(...) or any(...) of the condition)") if not isinstance(value, (int, type(None))) else ""
    return OwnershipError(
        Code.SPEC_NOT_BOOL,
        f"invariant {inv.name} returned {describe_type(value)}, not a bool{hint}",
        inv.file,
        inv.line,
    )


def known_invariant(spec: Spec, name: str) -> None:
    """OWN004, at the spec line, unless ``name`` is an invariant of ``spec``.

    An event marked ``violates=`` with a name the spec does not declare (a
    typo, a renamed invariant) would silently never be a violation.
    """
    if name in spec.invariants:
        return
    file, line = spec_frame_location(3)
    raise OwnershipError(
        Code.SPEC_INVALID,
        f"an event is marked violates={name!r}, but spec {spec.name} declares no invariant {name!r} "
        f"(known: {', '.join(spec.invariants)}): such an event could never be a violation",
        file,
        line,
    )


STEP_MEMBERS = {"flag": "calls s.flag(...)", "emit": "calls s.emit(...)", "events": "reads s.events"}
"""The view's members that belong to a step (an action's run), never to an invariant, and what using one is."""


def step_member_error(inv: Invariant | None, what: str, file: str | None, line: int | None,
                      who: str | None = None) -> OwnershipError:
    """OWN064: an invariant (``inv``, if known) ``what`` (``calls s.flag(...)``...), at ``file:line``.

    Invariants are functions of a state.  A flag or an event marks a step,
    and there is no step when an invariant is evaluated (and none at all in
    k-induction's arbitrary start states): a flag raised there was dropped by
    every engine, and ``s.events`` was always empty, so the invariant could
    never fail and every engine said PROVED.
    """
    if who is None:
        who = f"invariant {inv.name}" if inv is not None else "an invariant"
    return OwnershipError(
        Code.SPEC_INVARIANT_STEP,
        f"{who} {what}, but invariants (and the terminal predicate) see a state, not a step, so the violation it means could never be found: "
        "flag it in the action whose step violates it (s.flag(name, condition) or s.emit(..., violates=name)), "
        "or keep what the invariant needs in a state variable (a ghost variable the action sets) and return "
        "a bool of the state",
        file,
        line,
    )


def check_invariant_code(inv: Invariant, variables: Collection[str] = ()) -> None:
    """OWN064 at the line where ``inv``'s own code uses ``s.flag``, ``s.emit`` or ``s.events`` (read, not run).

    Only the invariant's body, where its first parameter is the view; a
    helper it calls is caught when it runs (see :func:`judged`).  A state
    variable of one of those names (``variables``) is state, and may be read.
    """
    fn = inv.fn
    try:
        lines, start = inspect.getsourcelines(fn)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError):
        return  # no source (a builtin, a generated function): the run-time check still applies
    node = next((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))), None)
    if node is None or not node.args.args:
        return
    view = node.args.args[0].arg
    found = [n for n in ast.walk(node) if isinstance(n, ast.Attribute) and n.attr in STEP_MEMBERS
             and n.attr not in variables and isinstance(n.value, ast.Name) and n.value.id == view]
    if found:
        first = min(found, key=lambda n: (n.lineno, n.col_offset))
        file = inspect.getsourcefile(fn) or inv.file
        raise step_member_error(inv, STEP_MEMBERS[first.attr], file, start + first.lineno - 1 if start else inv.line)


def refused_step_member(view: Any, member: str) -> OwnershipError:
    """OWN064 for ``member`` of the view used while an invariant runs, at the spec line that used it.

    The invariant is the one whose code is on the stack (its name is in the
    message); the line is the innermost frame of spec code.
    """
    file, line = spec_frame_location(3)
    spec = view._inst.spec
    codes = {getattr(inv.fn, "__code__", None): inv for inv in spec.invariants.values()}
    terminal = getattr(spec.done, "__code__", None)
    frame: Any = sys._getframe(1)
    inv = None
    while frame is not None and inv is None:
        if terminal is not None and frame.f_code is terminal:
            return step_member_error(None, STEP_MEMBERS[member], file, line, who="the terminal predicate")
        inv = codes.get(frame.f_code)
        frame = frame.f_back
    return step_member_error(inv, STEP_MEMBERS[member], file, line)


def judged(view: Any, fn: Callable[[State], Any]) -> Callable[[State], Any]:
    """``fn`` (which evaluates invariants on ``view``) run with the view refusing ``s.flag``, ``s.emit``, ``s.events``.

    For the explorer's own invariant loop; :class:`InvariantChecks`
    evaluates under the same switch.
    """
    def run(state: State) -> Any:
        object.__setattr__(view, "_judging", True)
        try:
            return fn(state)
        finally:
            object.__setattr__(view, "_judging", False)

    return run


def select_invariants(inst: Instance, names: Sequence[str] | None) -> tuple[Invariant, ...]:
    """The invariants an engine checks: those ``names`` (``--invariant``), or all of them by default.

    OWN012, at the spec line (where its invariants are declared), for a
    name the spec does not have: a typo must not check nothing and pass.
    OWN064 for an invariant of the spec whose code flags, emits or reads
    the step's events (every engine asks here first).
    """
    spec = inst.spec
    for inv in spec.invariants.values():
        check_invariant_code(inv, spec.vars)
    if names is None:
        return tuple(spec.invariants.values())
    for name in names:
        if name not in spec.invariants and name not in spec.properties:
            known = ", ".join([*spec.invariants, *spec.properties]) or "none"
            what = "invariant or property" if spec.properties else "invariant"
            raise OwnershipError(Code.UNKNOWN_INVARIANT, f"spec {spec.name} has no {what} {name!r} (known: {known})",
                                 spec.file, spec.line)
    # A temporal property's name selects it for the engines that decide properties (explore).
    return tuple(spec.invariants[name] for name in names if name in spec.invariants)


class InvariantChecks:
    """:class:`~ownership.lang.instance.Instance`'s invariant and terminal-predicate evaluation on concrete states."""

    if TYPE_CHECKING:
        spec: Spec
        view: View
        invariants: list[Invariant]

        def _runtime_error(self, what: str, exc: Exception, file: str | None) -> OwnershipError: ...

        def cells(self, state: State) -> dict[str, str]: ...

    def violated(self, state: State) -> str | None:
        """Name of the first invariant ``state`` violates, or ``None``."""
        self.view._cells[:] = state
        for inv in self.invariants:
            if not self._value(inv):
                self.check_unchanged(state)
                return inv.name
        self.check_unchanged(state)
        return None

    def _value(self, inv: Invariant) -> bool:
        """``inv`` on the state in the view; an exception in its code is a located spec error.

        The view refuses ``s.flag``, ``s.emit`` and ``s.events`` meanwhile (OWN064).
        """
        view = self.view
        object.__setattr__(view, "_judging", True)
        try:
            ok = inv.fn(view)
        except OwnershipError:
            raise
        except Exception as exc:  # noqa: BLE001 - spec code is user code
            raise self._runtime_error(f"invariant {inv.name}", exc, inv.file) from None
        finally:
            object.__setattr__(view, "_judging", False)
        return invariant_value(inv, ok)

    def check_unchanged(self, state: State) -> None:
        """OWN067 if evaluating invariants (or the terminal predicate) on ``state`` wrote the view's cells.

        An invariant that writes changes what the invariants after it see (a
        counter reset to 0 makes every bound on it hold): it could hide a
        violation.  One comparison per evaluated state; the culprit is only
        searched for when something was written.
        """
        if tuple(self.view._cells) == state:
            return
        view = self.view
        labels = list(self.cells(state))
        culprits: list[tuple[str, str | None, int | None, Callable[..., Any]]] = [
            (f"invariant {inv.name}", inv.file, inv.line, inv.fn) for inv in self.invariants
        ]
        done = self.spec.done
        if done is not None:
            code = getattr(done, "__code__", None)
            culprits.append(("the @spec.terminal predicate", code.co_filename if code else None,
                             code.co_firstlineno if code else None, done))
        for what, file, line, fn in culprits:
            view._cells[:] = state
            try:
                fn(view)
            except Exception:  # noqa: BLE001 - only looking for the writer
                pass
            after = tuple(view._cells)
            if after != state:
                i = next(k for k, (a, b) in enumerate(zip(state, after, strict=True)) if a != b)
                view._cells[:] = state
                raise OwnershipError(
                    Code.SPEC_IMPURE,
                    f"{what} writes the state ({labels[i]} from {state[i]!r} to {after[i]!r}): invariants and "
                    "the terminal predicate must only read it, or a later invariant sees a state that is not "
                    "the one reached",
                    file,
                    line,
                )
        view._cells[:] = state
        raise OwnershipError(Code.SPEC_IMPURE, "evaluating the invariants wrote the state: they must only read it",
                             self.spec.file, self.spec.line)

    def step_violated(self, succ: Successor, checked: Sequence[str] | None = None) -> str | None:
        """First invariant, in declaration order, that the step to ``succ`` violates, or ``None``.

        A step violates ``X`` when its state does or when one of its events
        was marked ``violates=X``; only the ``checked`` invariants count
        (all of them by default).
        """
        names = list(self.spec.invariants) if checked is None else [n for n in self.spec.invariants if n in checked]
        for name in names:
            if name in succ.violations or not self.holds(succ.state, name):
                return name
        return None

    def record_invariant(self, state: State, invariant: str) -> tuple[bool, tuple[int, ...]]:
        """Whether ``state`` satisfies the named invariant, and the cells it read (in the order first read).

        An invariant is a deterministic function of the cells it reads: it
        has the same value in every state that agrees on them.
        """
        view = self.view
        view._cells[:] = state
        view._reads.clear()
        value = self._value(self.spec.invariants[invariant])
        reads = tuple(dict.fromkeys(view._reads))
        self.check_unchanged(state)
        return value, reads

    def holds(self, state: State, invariant: str) -> bool:
        """Whether ``state`` satisfies the named invariant."""
        self.view._cells[:] = state
        value = self._value(self.spec.invariants[invariant])
        self.check_unchanged(state)
        return value

    def is_terminal(self, state: State) -> bool:
        """Whether the spec calls ``state`` finished (no request pending)."""
        if self.spec.done is None:
            return False
        self.view._cells[:] = state
        # Like an invariant it judges a state: a flag or an event raised there would be dropped (OWN064).
        object.__setattr__(self.view, "_judging", True)
        try:
            done = bool(self.spec.done(self.view))
        finally:
            object.__setattr__(self.view, "_judging", False)
        self.check_unchanged(state)
        return done
