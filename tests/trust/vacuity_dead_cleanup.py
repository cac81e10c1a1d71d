"""Adversarial: a fix whose cleanup step can never run.

An aborted request must give its pages back.  The "fix" adds ``cleanup``, but
``abort`` sets the phase to ``ABORTED`` while ``cleanup`` waits for
``ABORTING``, which nothing ever sets: ``cleanup`` is enabled in no reachable
state.  The leak invariant is not checked, so the run is PROVED; it must say
that it is vacuous for ``cleanup``.
"""

from ownership import Enum, Ownership, Spec, require, safe

spec = Spec("vacuity_dead_cleanup", summary="an abort cleanup that never runs", expect=safe())
Req = spec.domain("Req", 2, symmetric=True, names="AB")
own = Ownership(spec, requests=Req)
pool = own.pool("kv", 2)
Phase = Enum("Phase", "IDLE RUNNING ABORTING ABORTED DONE")
spec.var("phase", Phase, per=Req, init=Phase.IDLE)


@spec.action
def start(s, r: Req):
    require(s.phase[r] == Phase.IDLE)
    pool.write(s, r, pool.alloc(s, r, 1))
    s.phase[r] = Phase.RUNNING


@spec.action
def finish(s, r: Req):
    require(s.phase[r] == Phase.RUNNING)
    pool.read(s, r, pool.pages_of(s, r))
    pool.free(s, r)
    s.phase[r] = Phase.DONE


@spec.action
def abort(s, r: Req):
    require(s.phase[r] == Phase.RUNNING)
    s.phase[r] = Phase.ABORTED


@spec.action
def cleanup(s, r: Req):
    """FIX (wrong): waits for a phase no action sets."""
    require(s.phase[r] == Phase.ABORTING)
    pool.free(s, r)
    s.phase[r] = Phase.DONE


own.invariants("no_foreign_read", "no_double_ownership")
