"""What is stuck in a deadlock: the requests, the actions that would move them, the guard that blocks each.

A deadlock report that only says "no action can run" leaves the reader to
find out why.  :func:`stuck` asks the concrete semantics, for every action
instance, where its guard fails in the deadlocked state
(:meth:`~ownership.lang.successors.Successors.disabled_at`), and groups the
answers by the request (an element of the spec's request domain) the
instance names.  Every engine's deadlock report uses it, so the words are
the same whichever engine found the state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ownership.lang.instance import Instance, State


@dataclass(frozen=True)
class Blocked:
    """An action instance that cannot run, and the guard that stops it (``line`` 0: not a ``require``)."""

    call: str
    file: str | None
    line: int
    text: str

    def describe(self) -> str:
        """``free(A): tiny.py:42 require(s.st[r] == St.RUN)``."""
        where = f"{Path(self.file).name}:{self.line} {self.text}" if self.file else "its code stops before any guard"
        return f"{self.call}: {where}"


@dataclass(frozen=True)
class Stuck:
    """One request in a deadlock and what would move it."""

    request: str | None
    """The element's name (``None``: the actions that name no request)."""
    blocked: tuple[Blocked, ...]

    def describe(self) -> str:
        """One line: the request and its blocked actions."""
        who = f"request {self.request}" if self.request is not None else "other actions"
        return f"{who} is stuck: " + "; ".join(b.describe() for b in self.blocked)


def requests_domain(inst: Instance) -> str | None:
    """The spec's request domain: the one its ownership vocabulary declares, else the first symmetric one."""
    own = inst.spec.extensions.get("ownership")
    if own is not None:
        return str(own.requests.name)
    return next((d.name for d in inst.spec.domains.values() if d.symmetric), None)


def stuck(inst: Instance, state: State) -> tuple[Stuck, ...]:
    """Every request's blocked action instances in ``state`` (where nothing can run), by request."""
    domain = requests_domain(inst)
    groups: dict[str | None, list[Blocked]] = {}
    with inst.mode(recording=False, choice_reduction=()):
        for ai in inst.action_instances:
            where = inst.disabled_at(state, ai)
            blocked = Blocked(ai.label, where[0], where[1], where[2]) if where else Blocked(ai.label, None, 0, "")
            names = [inst.format_arg(d, a) for d, a in zip(ai.action.arg_domains, ai.args, strict=True)
                     if getattr(d, "name", None) == domain]
            groups.setdefault(names[0] if names else None, []).append(blocked)
    order: Sequence[str | None] = [*(inst.names[domain] if domain else ()), None]
    return tuple(Stuck(r, tuple(groups[r])) for r in order if r in groups)
