"""What every path to a violation has in common: necessary actions and the conditions they run under.

Builds the reachable state graph (networkx, the explorer's search
:class:`~ownership.engines.search.BreadthFirst` with its semantics and symmetry
reduction; states violating the invariant are targets and are
not expanded) and asks which transitions cannot be avoided on the way to a
violating state.  Removing transitions from the graph is exactly what adding
``require(not condition)`` to an action does, so every answer reads as "a
check here would block every path".

* An action name ``A`` is **necessary** when the violating states become
  unreachable once every ``A`` transition is removed.  When no single action
  is, the minimal pairs of action names that are (a *cut* of size 2) are
  reported instead.
* For a necessary action, a **condition** is a predicate on a transition:
  a field of the acting request in the state it runs in (``p_to_finish[r] =
  yes``), an order between two integer fields of that request
  (``kv_tokens[r] < d_input_len[r]``), a value argument (``prompt_len =
  6``), or which way an ``if`` in the action's code went (a *guard
  outcome*, found by tracing the lines the action executes).  A condition is
  necessary when removing only the ``A`` transitions that satisfy it still
  cuts every violation off, and it is reported only if some ``A`` transition
  in the graph does not satisfy it (otherwise it says nothing).  The
  conjunction of an action's necessary conditions that is still necessary is
  the narrowest description of the ``A`` step every violating path takes.
* A condition on fields the action never reads (on any of those steps) is
  **unchecked**; the first necessary action, in path order, where a given
  condition is unchecked is where a missing check would have caught every
  violating path (for the SGLang v0.5.21 leak: decode admission of a request
  with a pending rejection, and the commit of a transfer shorter than the
  reservation).

Everything is over the explored graph: when the state limit cuts it off,
:attr:`Diagnosis.complete` is false and the answer holds within that bound
only.

Modules: :mod:`.diagnosis` (the options and result types), :mod:`.graph` (the
state graph and reachability with transitions removed), :mod:`.trace` (what
re-running one transition executed and read), :mod:`.conditions` (candidate
conditions on an action's transitions), :mod:`.necessary` (the cut analysis:
``diagnose``) and :mod:`.wording` (the found cuts written out as
:class:`~.diagnosis.NecessaryAction`).
"""
