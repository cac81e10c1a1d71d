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
  a cell the action names, in the state it runs in, written as the code
  names it: a field of an argument (``p_to_finish[r] = yes``), a cell of a
  table over two domains (``pending[r, p] = no``), a cell named through a
  reference field (``cached[h_page[h]] = no``), a scalar (``x = 0``, so an
  action without arguments has conditions too), a table position no
  argument names, as a concrete element where its name means the same in
  every state (``pending[A, p] = yes``) or else quantified
  (``rdma_pending[r, d] = yes for some d in DecodePage``); an order between
  two integer cells of the same elements (``kv_tokens[r] <
  d_input_len[r]``); a value argument (``prompt_len = 6``); or which way an
  ``if`` in the action's code went (a *guard outcome*, found by tracing the
  lines the action executes).  A condition is necessary when removing only
  the ``A`` transitions that satisfy it still cuts every violation off, and
  it is reported only if some ``A`` transition in the graph does not
  satisfy it (otherwise it says nothing).  The conjunction of an action's
  necessary conditions that is still necessary is the narrowest
  description of the ``A`` step every violating path takes.
* When every path takes ``A`` more than once (``tick()`` at ``x = 0`` and
  again at ``x = 1``), conditions of different steps are each necessary but
  never hold on one step: each step gets its own conjunction
  (:attr:`~.diagnosis.NecessaryAction.other_calls`), never one that joins
  them.
* A condition on fields the action never reads (on any of those steps) is
  **unchecked**; the first necessary action, in path order, where a given
  condition is unchecked is where a missing check would have caught every
  violating path (for the SGLang v0.5.19 leak: decode admission of a request
  with a pending rejection, and the commit of a transfer shorter than the
  reservation).

* Every necessary action's conditions, made a guard, cut every violation
  off; :attr:`~.diagnosis.Diagnosis.fix_points` orders them by where the
  mistake is likeliest made (:func:`~.wording.rank`): a step that gives
  pages up although it reads the hazard, missing checks, steps that give
  pages up, then the fewest other states a check there would lose.

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
