"""Reports for CI: JUnit XML, SARIF 2.1.0 and a JSON summary of checks.

The data is a list of :class:`~ownership.render.ci.records.SpecRun` records, one per spec checked: the
engine's :class:`~ownership.core.result.CheckResult` plus what the reports
need from the spec (where its actions and invariants are defined) and the
counterexample files written.  The writers only read them.

* **JUnit** (``--junit``): one test suite per spec, one test case per
  invariant; a violation is a ``<failure>`` whose text is the trace table.
* **SARIF** (``--sarif``): each violation is a result located at the spec
  line of the action whose step breaks the invariant (the trace's last step),
  with the whole trace as a code flow, so code-scanning pages annotate it.
* **JSON** (``--json``): verdict, stop reason, coverage, statistics, per-action
  firings, warnings and the files written, per spec.

A safe verdict qualified by a warning (an action that never fired, a function
that looks like an unregistered action, an allocation larger than its pool)
is marked in each: ``vacuous``/``warnings`` in JSON, a ``vacuity`` and
``warning.N`` properties (and, under ``ownership test``, a ``VACUOUS``
failure) in JUnit, a ``warning``-level result in SARIF.

Pass/fail per invariant comes from :mod:`ownership.core.expectation`, the
same decision ``ownership test`` and the pytest plugin make.

Modules: :mod:`~ownership.render.ci.records` (the :class:`SpecRun` record and
its builders), :mod:`~ownership.render.ci.shared` (text the reports share),
:mod:`~ownership.render.ci.junit`, :mod:`~ownership.render.ci.sarif`,
:mod:`~ownership.render.ci.results` (the JSON file) and
:mod:`~ownership.render.ci.writing` (``write_reports`` and the ``reporting``
context manager).
"""
