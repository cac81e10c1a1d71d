"""A registry object of the project a spec models, with a memo inside it (not a spec).

The memo is an attribute of a module-level object of the project's own class,
which a reading of the code does not see changing: only running it does.
"""


class _Registry:
    def __init__(self) -> None:
        self.asked: dict[int, bool] = {}

    def first(self, r: int) -> bool:
        """True the first time request ``r`` is asked about."""
        if r in self.asked:
            return False
        self.asked[r] = True
        return True


REGISTRY = _Registry()


def may_retry(r: int) -> bool:
    """Whether request ``r`` may be retried: once per request, remembered by REGISTRY."""
    return REGISTRY.first(r)
