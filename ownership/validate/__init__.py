"""``ownership validate``: check a recorded event log of a real run against a spec.

:mod:`~ownership.validate.eventlog` reads and checks the log,
:mod:`~ownership.validate.search` decides whether some behaviour of the spec
explains it, :mod:`~ownership.validate.report` says the answer.  The spec
states how its actions and domains meet the log with ``spec.log_ids`` and
``spec.logs`` (:mod:`ownership.lang.logmap`); ``docs/validate.md`` explains both.
"""
