"""The session: one check of one spec from settings to outcome, for every front end.

:class:`Settings` says what to check and how; :func:`check` loads the spec,
builds the instance, runs the engines the registry names, judges the result
against the spec's ``expect=``, writes the counterexample and returns one
:class:`Outcome`.  The command line, the pytest plugin and
``ownership.testing`` are clients: they parse their own options into
:class:`Settings` and print or assert on the outcome.
"""

from __future__ import annotations

from ownership.session.graph import GraphOutcome, export_graph
from ownership.session.run import Outcome, check, default_out, load, write_trace
from ownership.session.settings import FLAGS, Settings

__all__ = ["FLAGS", "GraphOutcome", "Outcome", "Settings", "check", "default_out", "export_graph", "load", "write_trace"]
