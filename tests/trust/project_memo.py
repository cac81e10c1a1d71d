"""Request bookkeeping of the project a spec models, kept in a module-level memo (not a spec).

``may_retry(r)`` answers yes only the first time it is asked about request
``r``: whatever calls it first for ``r`` decides every later answer.
"""

_ASKED: dict[int, bool] = {}


def may_retry(r: int) -> bool:
    """Whether request ``r`` may be retried: once per request, remembered in ``_ASKED``."""
    if r in _ASKED:
        return False
    _ASKED[r] = True
    return True
