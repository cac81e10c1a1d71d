"""Deadlines without time: timeouts, leases and TTLs as an abstract clock.

Real engines free or give up on things when a timer runs out: a prefill
node releases KV blocks ``VLLM_NIXL_ABORT_REQUEST_TIMEOUT`` seconds after
the request finished, a store evicts an object whose lease expired, a
receiver gives up after its waiting timeout.  A model cannot hold absolute
times (the state space would be infinite), and it does not need them: what
matters is *which events a deadline can overtake*.  A :class:`Deadline`
says exactly that:

* ``Deadline(spec, "abort_timeout", per=Req)`` may expire **at any time**
  once armed: the timer is shorter than whatever it races, as far as the
  protocol can tell;
* ``Deadline(spec, "lease", per=Req, after="heartbeats stop")`` may expire
  **only after a named event**: the spec calls ``lease.allow(s, r)`` where
  that event happens (heartbeats stop, the transfer lands, a shorter
  deadline expired), which encodes an assumption about real time ("the
  lease outlasts any gap between heartbeats");
* ``assumed="lease_outlasts_gap"`` names a 0/1 parameter that switches the
  assumption off: with ``--param lease_outlasts_gap=0`` the deadline may
  expire at any time, and a check shows what the protocol's safety rests on.

State per element of ``per`` (or one value when ``per`` is omitted):
``{name}_deadline``, an enum ``OFF`` (not armed), ``ARMED`` (running, may
not expire yet: waits for the named event), ``DUE`` (running, may expire at
any moment) and ``EXPIRED``.  Expiry is a step of its own (an action the
spec declares around :meth:`Deadline.fire`), so every interleaving of the
timer with the rest of the protocol is explored.  Everything stays finite.
"""

from __future__ import annotations

from typing import Any

from ownership.core.events import DeadlineExpired
from ownership.errors import Code, OwnershipError, caller_location
from ownership.lang.declarations import Domain
from ownership.lang.guard import require
from ownership.lang.model import Spec
from ownership.lang.types import Enum


class Deadline:
    """A timeout, lease or TTL that expires nondeterministically; see the module docstring."""

    def __init__(self, spec: Spec, name: str, *, per: Domain | None = None, after: str | None = None,
                 assumed: str | None = None, doc: str = "") -> None:
        file, line = caller_location(2)
        if not name.isidentifier():
            raise OwnershipError(Code.DEADLINE_INVALID, f"deadline name {name!r} must be an identifier", file, line)
        if per is not None and not isinstance(per, Domain):
            raise OwnershipError(Code.DEADLINE_INVALID,
                                 f"deadline {name}: per= takes a domain (e.g. per=Req), got {per!r}", file, line)
        if after is not None and not (isinstance(after, str) and after.strip()):
            raise OwnershipError(Code.DEADLINE_INVALID,
                                 f"deadline {name}: after= names the event it waits for, got {after!r}", file, line)
        if assumed is not None:
            if after is None:
                raise OwnershipError(
                    Code.DEADLINE_INVALID,
                    f"deadline {name}: assumed={assumed!r} switches off an 'only after' assumption, "
                    "but the deadline has no after= (it may already expire at any time)", file, line)
            if assumed not in spec.params:
                raise OwnershipError(
                    Code.DEADLINE_INVALID,
                    f"deadline {name}: assumed={assumed!r} names no parameter of spec {spec.name} "
                    f"(declare it first: spec.param({assumed!r}, 1, ..., min=0, max=1))", file, line)
        self.spec = spec
        self.name = name
        self.per = per
        self.after = after
        self.assumed = assumed
        self.var = f"{name}_deadline"
        self.states = Enum(f"{name[:1].upper()}{name[1:]}Deadline", "OFF ARMED DUE EXPIRED")
        wait = f"may expire only after {after}" if after else "may expire at any time"
        spec.var(self.var, self.states, per=per if per is not None else (), init=self.states.OFF,
                 doc=doc or f"the {name} deadline: OFF, ARMED (waits for: {after or '-'}), DUE ({wait}), EXPIRED")

    # -- state -----------------------------------------------------------------
    def _get(self, s: Any, r: Any) -> Any:
        cell = getattr(s, self.var)
        return cell if self.per is None else cell[r]

    def _set(self, s: Any, r: Any, value: Any) -> None:
        if self.per is None:
            setattr(s, self.var, value)
        else:
            getattr(s, self.var)[r] = value

    # -- queries ---------------------------------------------------------------
    def running(self, s: Any, r: Any = None) -> Any:
        """Armed and not expired yet."""
        st = self._get(s, r)
        # ``|`` of two conditions is a 0/1 value under the solver: compared, it is a condition again
        return ((st == self.states.ARMED) | (st == self.states.DUE)) == 1

    def expired(self, s: Any, r: Any = None) -> Any:
        """The deadline has passed (and has not been disarmed or re-armed since)."""
        return self._get(s, r) == self.states.EXPIRED

    def off(self, s: Any, r: Any = None) -> Any:
        """Not armed."""
        return self._get(s, r) == self.states.OFF

    def may_fire(self, s: Any, r: Any = None) -> Any:
        """The deadline can expire in this state: it is due, or armed and its assumption is off."""
        st = self._get(s, r)
        due = st == self.states.DUE
        if self.assumed is None:
            return due
        dropped = getattr(s.params, self.assumed) == 0
        return (due | ((st == self.states.ARMED) & dropped)) == 1

    # -- operations ------------------------------------------------------------
    def arm(self, s: Any, r: Any = None) -> None:
        """Start the timer (again): a renewed lease or a restarted timeout is a fresh deadline."""
        self._set(s, r, self.states.DUE if self.after is None else self.states.ARMED)

    def allow(self, s: Any, r: Any = None) -> None:
        """The named event happened: a running deadline may expire from now on (others are unchanged)."""
        if self._get(s, r) == self.states.ARMED:
            self._set(s, r, self.states.DUE)

    def disarm(self, s: Any, r: Any = None) -> None:
        """Cancel the timer (the work it guarded finished first)."""
        self._set(s, r, self.states.OFF)

    def fire(self, s: Any, r: Any = None) -> None:
        """Time passes beyond the deadline; not enabled unless :meth:`may_fire`.

        Call it first in the action that models the timer running out (the
        reaper, the eviction, the client's check): the action runs only in
        states where the deadline can expire, and nowhere else.
        """
        require(self.may_fire(s, r))
        self._set(s, r, self.states.EXPIRED)
        if s.recording:
            s.emit(DeadlineExpired(deadline=self.name, req=None if self.per is None else s.name_of(self.per, r)))


__all__ = ["Deadline"]
