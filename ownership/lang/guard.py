"""Guards: :func:`require` and the check that a guard or an invariant gives a bool.

An action's guard that does not hold raises :class:`Disabled`, which the
engines catch to mean "not enabled here"; a guard that is not a bool (the
truth of a number or a container) is refused with a located error.
"""

from __future__ import annotations

from ownership.errors import Code, OwnershipError, caller_location


class Disabled(Exception):  # noqa: N818 - a control-flow signal, not an error
    """Raised by :func:`require` when an action's guard does not hold."""


def require(condition: object) -> None:
    """Guard: the action is not enabled unless ``condition`` holds.

    ``condition`` must be a bool (a symbolic bool under the Z3 engines):
    ``require(len(xs))`` or ``require(xs)`` is refused (OWN065), since the
    truth of a number or a container is rarely the condition meant.
    """
    if condition is True:
        return
    if condition is False:
        raise Disabled
    if not is_truth_value(condition):
        file, line = caller_location(2)
        raise OwnershipError(
            Code.SPEC_NOT_BOOL,
            f"require() takes a bool, got {describe_type(condition)}: write the condition meant, "
            "e.g. require(len(x) > 0) or require(x is not None)",
            file,
            line,
        )
    if not condition:
        raise Disabled


def is_truth_value(value: object) -> bool:
    """A bool, or a symbolic bool of the Z3 engines (what guards and invariants must give)."""
    if isinstance(value, bool):
        return True
    # The Z3 engines' symbolic values say themselves whether they stand for a bool.
    probe = getattr(type(value), "is_truth_value", None)
    return bool(probe(value)) if probe is not None else False


def describe_type(value: object) -> str:
    """``a list``, ``an int (3)``, ``None``: how an error names a value that is not a bool."""
    if value is None:
        return "None"
    name = type(value).__name__
    if getattr(type(value), "is_truth_value", None) is not None:
        return "a symbolic integer"
    shown = f" ({value!r})" if isinstance(value, (int, float, str)) else ""
    article = "an" if name[:1].lower() in "aeiou" else "a"
    return f"{article} {name}{shown}"
