"""Checks on what a user types, made before anything expensive runs.

The command line calls these so that bad input fails fast with one located
line (``error[OWN014..019]``) instead of a Python traceback after a long
check: output paths are checked before the engine starts, numbers against
their meaning, ``--param`` against repetition and ``--free``, and the size of
an instance before it is built (a domain of a billion pages would otherwise
hang while its tables are allocated).
"""

from __future__ import annotations

import hashlib
import itertools
import math
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from ownership.errors import Code, OwnershipError

if TYPE_CHECKING:
    from ownership.lang.model import Spec

DEFAULT_MAX_DOMAIN = 64
"""Largest domain (pages, requests, value set) built without ``--max-domain``.

Explicit-state search over a domain this large is already far beyond what
finishes; the limit exists to refuse typos such as ``-p pages=1000000000``
before their tables are allocated, not to bound real models.
"""


# -- output paths ------------------------------------------------------------


def _refuse(option: str, target: Path | str, message: str) -> OwnershipError:
    return OwnershipError(Code.OUTPUT_PATH, f"{option}: {message}", str(target))


def _creatable(folder: Path, option: str, target: Path) -> None:
    """``folder`` exists as a writable folder or can be created (its nearest existing ancestor is one)."""
    p = folder
    while not p.exists():
        if os.path.lexists(p):  # a dangling symbolic link: mkdir would fail on it
            raise _refuse(option, target, f"{p} is a broken symbolic link")
        if p.parent == p:
            break
        p = p.parent
    if not p.is_dir():
        raise _refuse(option, target, f"{p} is a file, not a folder")
    if not os.access(p, os.W_OK | os.X_OK):
        raise _refuse(option, target, f"{p} is not writable")


def check_output_file(path: Path, option: str) -> None:
    """Refuse an output file that is a folder or whose folder cannot be created (OWN014)."""
    if path.is_dir():
        raise _refuse(option, path, "is a folder; name a file")
    _creatable(path.parent, option, path)


def check_output_dir(path: Path, option: str) -> None:
    """Refuse an output folder that is a file or cannot be created (OWN014)."""
    if path.exists() and not path.is_dir():
        raise _refuse(option, path, "is a file, not a folder")
    _creatable(path, option, path)


STDOUT = Path("-")
"""What :func:`output_file` returns for ``-`` when the option may write to standard output."""


def output_file(option: str, *, stdout: bool = False) -> Callable[[str | Path], Path]:
    """A typer ``parser=`` for an output file option: refuses the empty string and unwritable places.

    Typer turns ``--json ""`` into ``Path(".")``, so the empty string is only
    visible here, before the conversion.  With ``stdout``, ``-`` is
    :data:`STDOUT` (standard output), not a file named ``-``.
    """

    def parse(text: str | Path) -> Path:
        if not str(text).strip():
            raise OwnershipError(Code.OUTPUT_PATH, f"{option}: empty path; name a file")
        if stdout and str(text) == "-":
            return STDOUT
        path = Path(text)
        check_output_file(path, option)
        return path

    return parse


def output_dir(option: str) -> Callable[[str | Path], Path]:
    """A typer ``parser=`` for an output folder option (see :func:`output_file`)."""

    def parse(text: str | Path) -> Path:
        if not str(text).strip():
            raise OwnershipError(Code.OUTPUT_PATH, f"{option}: empty path; name a folder")
        path = Path(text)
        check_output_dir(path, option)
        return path

    return parse


@contextmanager
def writing(path: Path, option: str) -> Iterator[None]:
    """Turn an ``OSError`` while writing ``path`` (full disk, a race) into OWN014."""
    try:
        yield
    except OSError as exc:
        where = exc.filename if isinstance(exc.filename, str) else str(path)
        raise _refuse(option, where, f"cannot write: {exc.strerror or exc}") from None


# -- numbers -----------------------------------------------------------------


def check_count(option: str, value: int | None, minimum: int) -> None:
    """Refuse an integer option below ``minimum`` (OWN015); ``None`` means not given."""
    if value is not None and value < minimum:
        what = "non-negative" if minimum == 0 else f"at least {minimum}"
        raise OwnershipError(Code.BAD_NUMBER, f"{option} must be {what}, got {value}")


def parse_workers(option: str, value: str) -> int | None:
    """``auto`` (``None``: one process, every core past a size) or a number of workers, 1 or more (OWN015)."""
    if value.strip().lower() == "auto":
        return None
    try:
        count = int(value)
    except ValueError:
        raise OwnershipError(Code.BAD_NUMBER, f"{option} must be auto or a number of workers, got {value!r}") from None
    check_count(option, count, 1)
    return count


def check_seconds(option: str, value: float | None) -> None:
    """Refuse a duration that is not a finite number of seconds above zero (OWN015)."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise OwnershipError(Code.BAD_NUMBER, f"{option} must be a finite number of seconds above 0, got {value}")


def check_search_limits(max_depth: int | None, max_states: int | None, max_seconds: float | None) -> None:
    """Refuse a search's depth, state and time limits out of range (OWN015), named by their flags."""
    check_count("--max-depth", max_depth, 0)
    check_count("--max-states", max_states, 1)
    check_seconds("--max-seconds", max_seconds)


_SIZE = re.compile(r"(?P<number>\d+(?:\.\d*)?|\.\d+)\s*(?:(?P<unit>[kmgt])(?P<suffix>ib|b)?|b)?", re.IGNORECASE)
_POWERS = {"k": 1, "m": 2, "g": 3, "t": 4}


def parse_size(option: str, text: str) -> int | None:
    """A memory size in bytes: ``500M``, ``4G``, ``2.5GiB``, ``1000000``; ``none`` is no limit (``None``).

    K, M, G and T are powers of 1024, with or without ``iB`` (``4G`` and
    ``4GiB`` are the same); ``KB``, ``MB``, ``GB`` and ``TB`` are powers of
    1000; a plain number (or one ending in ``B``) is bytes.  Anything else,
    or a size below one byte, is OWN015, named by ``option``.
    """
    spelled = text.strip()
    if spelled.lower() == "none":
        return None
    hint = "give a size such as 500M, 4G, 2.5GiB or a number of bytes, or none for no limit"
    m = _SIZE.fullmatch(spelled.replace("_", ""))
    if m is None:
        raise OwnershipError(Code.BAD_NUMBER, f"{option} {text!r}: not a size; {hint}")
    unit = (m["unit"] or "").lower()
    if not unit and "." in m["number"]:
        raise OwnershipError(Code.BAD_NUMBER, f"{option} {text!r}: a number of bytes is a whole number; {hint}")
    base = 1000 if (m["suffix"] or "").lower() == "b" else 1024
    size = float(m["number"]) * base ** _POWERS[unit] if unit else int(m["number"])
    if size < 1:
        raise OwnershipError(Code.BAD_NUMBER, f"{option} must be at least 1 byte, got {text!r}; {hint}")
    return int(size)


def memory_size(option: str) -> Callable[[str], str]:
    """A typer ``parser=`` for a memory-size option: refuses a bad size at once (OWN015), keeps the text as written."""

    def parse(text: str) -> str:
        parse_size(option, text)
        return text.strip()

    return parse


def memory_budget(value: int | str | None, option: str = "--max-memory") -> int | None:
    """The budget in bytes for a setting: ``None`` is the default share of the machine, ``"none"`` no limit.

    ``value`` is a size as written (``"4G"``) or a number of bytes; the
    default is :func:`ownership.core.memory.default_budget`.
    """
    if value is None:
        from ownership.core.memory import default_budget

        return default_budget()
    if isinstance(value, int):
        check_count(option, value, 1)
        return value
    return parse_size(option, value)


def check_optimised(free: Sequence[str], minimize: str | None, maximize: str | None) -> None:
    """Refuse ``--minimize``/``--maximize`` of a parameter that is not ``--free`` (OWN013)."""
    for flag, name in (("--minimize", minimize), ("--maximize", maximize)):
        if name is not None and free and name not in free:
            raise OwnershipError(Code.BAD_OPTION, f"{flag} {name}: not a --free parameter (free: {', '.join(free)})")


# -- parameters --------------------------------------------------------------


def parse_params(items: Sequence[str] | None, free: Sequence[str] = ()) -> dict[str, int]:
    """``--param NAME=VALUE`` items as a dict; a name given twice or also ``--free`` is OWN016."""
    seen_free: set[str] = set()
    for name in free:
        if name in seen_free:
            raise OwnershipError(Code.PARAM_CONFLICT, f"--free {name} given twice")
        seen_free.add(name)
    out: dict[str, int] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise OwnershipError(Code.BAD_PARAM, f"--param expects NAME=VALUE, got {item!r}")
        try:
            number = int(value.replace("_", ""))
        except ValueError:
            raise OwnershipError(Code.BAD_PARAM, f"--param {name}: {value!r} is not an integer") from None
        if name in out:
            raise OwnershipError(
                Code.PARAM_CONFLICT, f"--param {name} given twice ({name}={out[name]} and {name}={number}); give it once"
            )
        if name in seen_free:
            raise OwnershipError(
                Code.PARAM_CONFLICT, f"--param {name}={number} and --free {name}: a parameter is either fixed or free"
            )
        out[name] = number
    return out


# -- instance size -------------------------------------------------------------


def _count(values: object, cap: int) -> int:
    """Distinct values of a value set, counting at most ``cap`` of them (ranges exactly)."""
    if isinstance(values, range):
        return len(values)
    if isinstance(values, (list, tuple, set, frozenset)) and len(values) <= cap:
        return len(set(values))
    if hasattr(values, "__len__") and len(values) > cap:  # type: ignore[arg-type]
        return len(values)  # type: ignore[arg-type]
    return len(set(itertools.islice(iter(values), cap + 1)))  # type: ignore[call-overload]


def check_instance_size(spec: Spec, overrides: Mapping[str, int], max_domain: int, flag: str = "--max-domain") -> None:
    """Refuse (OWN017) an instance with a domain or value set of more than ``max_domain`` elements.

    ``flag`` is how the caller's front end spells the limit (``--max-domain``
    on the command line, ``max_domain`` in the Python API): the message says
    to raise it.

    Runs before :class:`~ownership.lang.instance.Instance` allocates anything:
    it resolves only the sizes, then names the largest domain, the parameter
    values behind it and the size of one state (cells) and of one expansion
    (action instances), so a typo in ``--param`` is refused at once instead
    of hanging silently.  Unknown or out-of-range parameters are left to the
    instance, which reports them (OWN010/OWN011).
    """
    from ownership.lang.declarations import Params, Values

    values = spec.default_params()
    for name, v in overrides.items():
        if name not in spec.params:
            return
        if isinstance(v, bool) or not isinstance(v, int) or not spec.params[name].allows(v):
            return  # not an int, or out of range: the instance refuses it at the declaration (OWN011)
        values[name] = v
    params = Params(values)
    sizes: dict[str, int] = {}
    for d in spec.domains.values():
        try:
            sizes[d.name] = d.resolve_size(params)
        except Exception:  # noqa: BLE001 - user code; the instance reports it (OWN011)
            return
    cap = max_domain * 1000
    for vs in spec.value_sets.values():
        try:
            sizes[vs.name] = _count(vs.values(params), cap)
        except Exception:  # noqa: BLE001 - user code; the instance reports it
            return
    too_big = {n: s for n, s in sizes.items() if s > max_domain}
    if not too_big:
        return
    name, size = max(too_big.items(), key=lambda kv: kv[1])
    cells = sum(math.prod(sizes.get(d.name, 0) for d in v.index) for v in spec.vars.values())
    moves = sum(
        math.prod(sizes.get(d.name, 0) for d in a.arg_domains) for a in spec.actions.values()
    )
    changed = ", ".join(f"{k}={v}" for k, v in overrides.items())
    kind = "value set" if isinstance(spec.value_sets.get(name), Values) else "domain"
    raise OwnershipError(
        Code.INSTANCE_TOO_LARGE,
        f"{kind} {name} would have {size:,} elements"
        + (f" with {changed}" if changed else "")
        + f", more than {flag} {max_domain}: one state would hold {cells:,} cells and each state "
        f"would try {moves:,} action instances; lower the parameters, or raise {flag} if you mean it",
        spec.file,
        spec.line,
    )


# -- where counterexamples go ----------------------------------------------------


def run_slug(flags: Sequence[str]) -> str:
    """A short folder name for a run's search flags: ``max-depth-20``, ``invariant-no_foreign_read``.

    Flags that do not fit a portable file name, or a long list of them, keep a
    readable prefix and end in a hash of the whole list, so two different
    runs never share a folder.
    """
    words = [f.lstrip("-") for f in flags]
    joined = "_".join(words)
    safe = re.sub(r"[^A-Za-z0-9._=+-]+", "-", joined).strip("-.")
    if safe == joined and len(safe) <= 60:
        return safe
    digest = hashlib.sha1("\0".join(flags).encode()).hexdigest()[:8]
    return f"{safe[:50].rstrip('-_.')}-{digest}"
