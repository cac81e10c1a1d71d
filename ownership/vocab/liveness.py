"""Built-in temporal properties: pages that come back, requests that finish.

``own.properties(ended=..., started=...)`` registers them on the spec (or
on a derived one with ``spec=``), each per request:

* ``pages_return``: ``ended(r) ~> r holds no page`` in any pool of the
  :class:`~ownership.vocab.pool.Ownership`: every page a finished or aborted
  request holds is eventually freed (now, or later by a sweep or a timeout);
* ``requests_finish``: ``started(r) ~> ended(r)``: every admitted request
  eventually finishes or fails.

They replace the idle-predicate approximation ``pages_returned_when_idle``,
which needs a hand-written idle predicate and flags the moment between an
abort and a later sweep in a correct fix.  Whether they hold depends on which
actions are fair: see ``docs/liveness.md``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ownership.errors import Code, OwnershipError, caller_location
from ownership.lang.elements import ix
from ownership.lang.model import Spec

if TYPE_CHECKING:
    from ownership.vocab.pool import Ownership

NAMES = ("pages_return", "requests_finish")
"""The built-in temporal properties, in the order they are registered."""


def register(own: Ownership, names: Sequence[str], ended: Callable[[Any, Any], Any] | None,
             started: Callable[[Any, Any], Any] | None, spec: Spec | None) -> None:
    """Register the built-in properties ``names`` (all those whose predicates are given, when none are named)."""
    where = caller_location(3)
    target = spec or own.spec
    needs = {"pages_return": ("ended",), "requests_finish": ("started", "ended")}
    given = {"ended": ended, "started": started}
    for name in names:
        if name not in NAMES:
            raise OwnershipError(Code.UNKNOWN_INVARIANT, f"no built-in temporal property {name!r} (known: "
                                 f"{', '.join(NAMES)})", *where)
    chosen = list(names) or [n for n in NAMES if all(given[k] is not None for k in needs[n])]
    if not chosen:
        raise OwnershipError(Code.PROPERTY_INVALID, "own.properties needs ended= (a function of the state and a "
                             "request: it finished or was aborted), and started= for requests_finish", *where)
    for name in chosen:
        missing = [k for k in needs[name] if given[k] is None]
        if missing:
            raise OwnershipError(Code.PROPERTY_INVALID, f"{name} needs {' and '.join(m + '=' for m in missing)} "
                                 "(a function of the state and a request)", *where)
    pools = own.pools

    def holds_no_page(s: Any, r: Any) -> bool:
        """The request holds no page in any pool."""
        bit = ix(r)
        return all(not (h >> bit & 1) for pool in pools for h in getattr(s, pool.holders_var))

    assert ended is not None
    for name in chosen:
        if name == "pages_return":
            target.leads_to(ended, holds_no_page, each=own.requests, name=name)
        else:
            assert started is not None
            target.leads_to(started, ended, each=own.requests, name=name)
        # Located where the spec asked for it (reports and OWN115 point there, not here).
        target.properties[name] = dataclasses.replace(target.properties[name], file=where[0], line=where[1])
