"""Deadlines (ownership.vocab.clock): arm, allow, disarm, fire, the assumption switch, bad declarations.

Each operation concretely, then bmc and prove on a ten-line spec whose
safety rests on a deadline that may expire only after a named event.
"""

from __future__ import annotations

from typing import Any

import pytest

from conftest import run_once as run
from ownership import Enum, Ownership, Spec, require
from ownership.core.result import StopReason, Verdict
from ownership.engines.bmc import bmc
from ownership.engines.explore import explore
from ownership.engines.prove import prove
from ownership.engines.z3run import BmcOptions
from ownership.errors import Code, OwnershipError
from ownership.lang.declarations import Domain
from ownership.lang.instance import Instance
from ownership.vocab.clock import Deadline


def base() -> tuple[Spec, Domain]:
    spec = Spec("tiny_clock")
    spec.param("requests", 2)
    spec.param("covers", 1, min=0, max=1)
    Req = spec.domain("Req", "requests", symmetric=True, names="AB")
    spec.var("x", bool, init=False)

    @spec.invariant
    def trivially(s) -> bool:  # noqa: ANN001
        return True

    return spec, Req




def test_a_deadline_without_after_may_expire_as_soon_as_it_is_armed() -> None:
    spec, Req = base()
    t = Deadline(spec, "abort_timeout", per=Req)
    seen: list[tuple[bool, bool, bool, bool]] = []

    def body(s):  # noqa: ANN001, ANN202
        seen.append((t.off(s, 0), t.running(s, 0), t.may_fire(s, 0), t.expired(s, 0)))
        t.arm(s, 0)
        seen.append((t.off(s, 0), t.running(s, 0), t.may_fire(s, 0), t.expired(s, 0)))
        t.fire(s, 0)
        seen.append((t.off(s, 0), t.running(s, 0), t.may_fire(s, 0), t.expired(s, 0)))
        assert t.off(s, 1)  # per request

    inst, (out,) = run(spec, body)
    assert seen[:3] == [(True, False, False, False), (False, True, True, False), (False, False, False, True)]
    assert inst.to_json(out.state)["abort_timeout_deadline"] == {"A": "EXPIRED", "B": "OFF"}
    (ev,) = out.events
    assert (ev.kind, ev.get("deadline"), ev.get("req")) == ("deadline expired", "abort_timeout", "A")


def test_a_deadline_with_after_waits_for_the_named_event() -> None:
    spec, Req = base()
    lease = Deadline(spec, "lease", per=Req, after="heartbeats stop")

    def early(s):  # noqa: ANN001, ANN202
        lease.arm(s, 0)
        lease.fire(s, 0)  # ARMED: not yet

    assert run(spec, early)[1] == []

    def allowed(s):  # noqa: ANN001, ANN202
        lease.arm(s, 0)
        assert lease.running(s, 0) and not lease.may_fire(s, 0)
        lease.allow(s, 0)
        assert lease.running(s, 0) and lease.may_fire(s, 0)
        lease.fire(s, 0)

    inst, (out,) = run(spec, allowed)
    assert inst.to_json(out.state)["lease_deadline"]["A"] == "EXPIRED"

    def allow_when_off(s):  # noqa: ANN001, ANN202
        lease.allow(s, 0)  # nothing running: unchanged
        assert lease.off(s, 0)
        lease.arm(s, 0)
        lease.allow(s, 0)
        lease.fire(s, 0)
        lease.allow(s, 0)  # an expired deadline stays expired
        assert lease.expired(s, 0)

    assert len(run(spec, allow_when_off)[1]) == 1


def test_disarm_and_rearm_restart_the_deadline() -> None:
    spec, Req = base()
    lease = Deadline(spec, "lease", per=Req, after="the read lands")

    def body(s):  # noqa: ANN001, ANN202
        lease.arm(s, 0)
        lease.allow(s, 0)
        lease.fire(s, 0)
        lease.arm(s, 0)  # renewed: a fresh lease waits for the event again
        assert lease.running(s, 0) and not lease.may_fire(s, 0)
        lease.disarm(s, 0)
        assert lease.off(s, 0) and not lease.may_fire(s, 0)
        lease.fire(s, 0)

    assert run(spec, body)[1] == []


def test_the_assumption_parameter_lets_the_deadline_expire_at_any_time() -> None:
    spec, Req = base()
    lease = Deadline(spec, "lease", per=Req, after="heartbeats stop", assumed="covers")

    def body(s):  # noqa: ANN001, ANN202
        lease.arm(s, 0)
        lease.fire(s, 0)

    assert run(spec, body)[1] == []  # covers=1: the assumption holds
    inst, (out,) = run(spec, body, covers=0)
    assert inst.to_json(out.state)["lease_deadline"]["A"] == "EXPIRED"


def test_a_global_deadline_has_one_value() -> None:
    spec, _ = base()
    ttl = Deadline(spec, "ttl")

    def body(s):  # noqa: ANN001, ANN202
        ttl.arm(s)
        ttl.fire(s)
        assert ttl.expired(s)

    inst, (out,) = run(spec, body)
    assert inst.to_json(out.state)["ttl_deadline"] == "EXPIRED"
    (ev,) = out.events
    assert ev.get("req") is None and "req" not in ev.to_json()


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"name": "not a name"}, "must be an identifier"),
        ({"name": "t", "per": "Req"}, "per= takes a domain"),
        ({"name": "t", "after": "  "}, "after= names the event"),
        ({"name": "t", "assumed": "covers"}, "has no after="),
        ({"name": "t", "after": "x", "assumed": "nope"}, "names no parameter"),
    ],
)
def test_bad_declarations_are_refused_at_the_calling_line(kwargs: dict[str, Any], says: str) -> None:
    spec, _ = base()
    name = kwargs.pop("name")
    with pytest.raises(OwnershipError) as err:
        Deadline(spec, name, **kwargs)
    assert err.value.code is Code.DEADLINE_INVALID and err.value.file == __file__ and says in err.value.message


def guarded_spec() -> Spec:
    """Ten lines: a page is released when a timeout fires; reading it is safe only if the timeout waits."""
    spec = Spec("tiny_clock_race")
    spec.param("requests", 1)
    spec.param("covers", 1, min=0, max=1)
    Req = spec.domain("Req", "requests", symmetric=True, names="AB")
    own = Ownership(spec, requests=Req)
    pool = own.pool("kv", 1, prefix="K")
    timeout = Deadline(spec, "release", per=Req, after="the reader is done", assumed="covers")
    Phase = Enum("Phase", "IDLE HELD READ FREED")
    spec.var("phase", Phase, per=Req, init=Phase.IDLE)

    @spec.action
    def hold(s, r: Req):  # noqa: ANN001, ANN202
        require(s.phase[r] == Phase.IDLE)
        pool.write(s, r, pool.alloc(s, r, 1))
        timeout.arm(s, r)
        s.phase[r] = Phase.HELD

    @spec.action
    def reader_done(s, r: Req):  # noqa: ANN001, ANN202
        require(s.phase[r] == Phase.HELD)
        timeout.allow(s, r)
        s.phase[r] = Phase.READ

    spec.var("freed_unread", bool, per=Req, init=False, ghost=True, doc="history: released while the reader was not done")

    @spec.action
    def expire(s, r: Req):  # noqa: ANN001, ANN202
        timeout.fire(s, r)
        if s.phase[r] == Phase.HELD:
            s.freed_unread[r] = True
        pool.free(s, r)
        s.phase[r] = Phase.FREED

    own.invariants("no_double_ownership")

    @spec.invariant
    def no_release_before_the_reader(s) -> bool:  # noqa: ANN001
        return not any(s.freed_unread[r] for r in s.all(Req))

    return spec


def test_the_operations_run_under_bmc_with_and_without_the_assumption() -> None:
    spec = guarded_spec()
    assert bmc(Instance(spec), BmcOptions(max_depth=4)).verdict is Verdict.PROVED  # exhausted
    dropped = bmc(Instance(spec, {"covers": 0}), BmcOptions(max_depth=4))
    assert dropped.violated == "no_release_before_the_reader"
    assert dropped.trace is not None and [s.action for s in dropped.trace.steps] == ["hold", "expire"]
    assert explore(Instance(spec, {"covers": 0})).violated == "no_release_before_the_reader"


@pytest.mark.slow
def test_a_deadline_that_waits_is_proved() -> None:
    assert prove(Instance(guarded_spec())).verdict is Verdict.PROVED


def global_spec(after: str | None) -> Spec:
    spec, _ = base()
    ttl = Deadline(spec, "ttl", after=after)
    spec.actions.clear()

    @spec.action
    def start(s):  # noqa: ANN001, ANN202
        require(ttl.off(s))
        ttl.arm(s)

    @spec.action
    def set_x(s):  # noqa: ANN001, ANN202
        require(not s.x)
        s.x = True
        ttl.allow(s)

    @spec.action
    def expire(s):  # noqa: ANN001, ANN202
        ttl.fire(s)

    @spec.invariant
    def expires_only_after_x(s) -> bool:  # noqa: ANN001
        return s.x or not ttl.expired(s)

    return spec


def test_a_global_deadline_runs_under_bmc() -> None:
    anytime = bmc(Instance(global_spec(None)), BmcOptions(max_depth=3))
    assert anytime.violated == "expires_only_after_x"
    assert anytime.trace is not None and [s.action for s in anytime.trace.steps] == ["start", "expire"]
    waits = bmc(Instance(global_spec("x is set")), BmcOptions(max_depth=6))
    assert waits.verdict is Verdict.PROVED and waits.stop_reason is StopReason.EXHAUSTED
