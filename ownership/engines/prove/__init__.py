"""``prove``: k-induction, the reachable-set certificate and Spacer, run as a portfolio.

Each strategy module returns a typed :class:`~ownership.engines.prove.outcome.Outcome`;
:func:`~ownership.engines.prove.portfolio.prove` is the entry point.
"""

from ownership.engines.prove.portfolio import prove

__all__ = ["prove"]
