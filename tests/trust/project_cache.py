"""A helper of the project a spec models, cached with functools.cache (not a spec).

The cache is keyed by the view object, which is the same in every state: the
helper answers what it said in the first state it saw.
"""

import functools


@functools.cache
def is_running(s, r: int) -> bool:
    """Whether request ``r`` runs (cached: wrongly, for a view whose cells change)."""
    return bool(s.running[r])
