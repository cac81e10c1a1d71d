"""Grants of the project a spec models, counted in a module-level integer (not a spec)."""

GRANTS = 0


def first_grant() -> bool:
    """Whether this is the first grant handed out in the process (the count lives in GRANTS)."""
    global GRANTS
    GRANTS += 1
    return GRANTS == 1
