"""Analyses of specs themselves (rather than of the protocols they model): mutation testing."""
