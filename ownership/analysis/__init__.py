"""Analyses of specs themselves (rather than of the protocols they model): mutation testing
(:mod:`ownership.analysis.mutate`), and ``--explain``'s diagnosis of a violation (:mod:`ownership.analysis.explain`)."""
