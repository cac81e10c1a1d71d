"""Random interleavings with Hypothesis: the spec as a ``RuleBasedStateMachine``.

The explorer enumerates every state; at sizes where that is hopeless (16
requests, 256 pages) this engine samples long random interleavings instead
and lets Hypothesis shrink a failing one to a short, readable trace.

Before it samples, it runs the spec checks the other engines run (OWN060,
OWN061) and a breadth-first search capped at ``exhaustive_states`` states
(:mod:`.exhaustive`): random walks miss shallow bugs that hide behind one
order of actions or one ``s.choose`` value, and a space that small is
cheaper to enumerate.  When the search exhausts the space, the answer is
exact (``PROVED`` or a shortest violation, with exhaustive coverage) and
says so; otherwise the walks start from its deepest states too and the
answer is sampled.

The machine is generated from the spec, not written by hand:

* one **rule per action**.  Its arguments are drawn among the action's
  instances that are *enabled* in the current state (the machine is the
  strategy's ``runner``), so no step is wasted on a disabled guard and there
  is no rule per (action, argument tuple);
* a **precondition** per rule: some instance of the action is enabled;
* the values of ``s.choose`` are drawn too and passed to the rule as
  ``picks``, so every printed step is plain data:
  ``state.decode_admit(r='B', picks=())`` — Hypothesis' own reproduction is
  pasteable Python (see :func:`~.machine.load_machine`);
* one Hypothesis ``@invariant`` that checks the spec invariants in declaration
  order, so this engine names the same first violation as the explorer.

A failure is shrunk by Hypothesis, then rebuilt as the common
:class:`~ownership.core.trace.Trace` by replaying its steps through the
concrete semantics, like every other engine's counterexample.  A sampled
pass is ``BOUNDED_OK`` (headlined ``NO VIOLATION FOUND (sampled)``): it says
how many examples and steps ran and how often each action ran (sampled
:class:`~ownership.core.result.ActionCoverage`); random testing never proves
anything.

Modules: :mod:`.options` (the frozen options), :mod:`.exhaustive` (the
breadth-first phase), :mod:`.machine` (the generated
machine), :mod:`.walks` (swarm random walks and their shrink),
:mod:`.reproduction` (pasteable replays) and :mod:`.engine`
(``check_stateful``, the run and its result).
"""
