"""The stories of violations that are not reads: what led to the offending event, and its root cause.

:func:`beats_of` words the history of a stale prefix hit (the publish of a
page nobody wrote), an eviction in use (the hit that left the entry
evictable), a free racing a write (the posted write, the free), a late write
(the free before it), a second free (the reference dropped before it, or the
early free that left the count at zero) as :class:`~ownership.core.pages.Beat`
records, and names the root-cause step.  Reads have their page history in
:mod:`ownership.core.story`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ownership.core.events import (
    Decref,
    Event,
    Evict,
    Free,
    PrefixHit,
    PrefixRead,
    Publish,
    Write,
    WriteInFlight,
    WritePosted,
)
from ownership.core.pages import Beat, PoolShape, Violation, cell, earlier, pending, show_value, truthy
from ownership.core.trace import Trace


def beats_of(
    trace: Trace, pools: Sequence[PoolShape], flag: Violation, calls: Mapping[int, str]
) -> tuple[list[Beat], int]:
    """The story of a violating event other than a read, and its root-cause step (the offending step itself when nothing before it explains it)."""
    e, k = flag.event, flag.step
    before = earlier(trace, flag)
    beats: list[Beat] = []
    cause = k
    if isinstance(e, (PrefixHit, PrefixRead)):
        held = "no prefix's KV (nothing wrote it)" if e.kv in (None, "-", "") else f"the KV of {e.kv}, not of {e.node}"
        pub = next(((j, x) for j, x in before if isinstance(x, Publish) and x.pool == e.pool and x.page == e.page),
                   None)
        if pub is not None:
            j, p = pub
            beats.append(Beat(j, f"{p.req} publishes {e.page} as the cached {p.node} ({calls[j]}), "
                                 f"though {e.page} holds {held}"))
            cause = j
        what = "prefix hit on" if isinstance(e, PrefixHit) else "read of the shared prefix"
        beats.append(Beat(k, f"{e.req}'s {what} {e.node} maps {e.page}, which holds {held} ({calls[k]})"))
    elif isinstance(e, Evict):
        users = set(e.in_use_by)
        hit = next(((j, x) for j, x in before if isinstance(x, PrefixHit) and x.pool == e.pool and x.page == e.page
                    and x.req in users), None)
        pub = next(((j, x) for j, x in before if isinstance(x, Publish) and x.pool == e.pool and x.page == e.page
                    and (hit is None or j <= hit[0])), None)
        if pub is not None:
            j, p = pub
            beats.append(Beat(j, f"{p.req} publishes {e.page} as the cached {p.node} ({calls[j]})"))
        if hit is not None:
            j, h = hit
            beats.append(Beat(j, f"{h.req}'s prefix hit maps {e.page} ({h.node}) into its page table but leaves "
                                 f"{h.node} evictable ({calls[j]})"))
            cause = j
        who = ", ".join(e.in_use_by) or "a request"
        beats.append(Beat(k, f"{e.req} evicts {e.node} and frees {e.page} while {who}'s page table still maps it "
                             f"({calls[k]})"))
    elif isinstance(e, WriteInFlight):
        post = _posted(before, e.pool, e.page, e.req)
        if post is not None:
            j, w = post
            beats.append(Beat(j, f"{calls[j]} posts {_a(w.channel)} write of {w.req}'s KV into {e.page}"))
        free = next((x for j, x in before if j == k and isinstance(x, Free) and e.page in x.touches(e.pool)), None)
        who = free.req if free is not None else "a request"
        write = f"{e.req}'s {post[1].channel} write" if post is not None else f"{e.req}'s write"
        beats.append(Beat(k, f"{who} frees {e.page} while {write} into it is still in flight, to land in whoever "
                             f"holds {e.page} next ({calls[k]})"))
    elif isinstance(e, Write):
        freed = next(((j, x) for j, x in before if isinstance(x, Free) and x.req == e.req
                      and e.page in x.touches(e.pool)), None)
        post = _posted([(j, x) for j, x in before if freed is None or j <= freed[0]], e.pool, e.page, e.req)
        if post is not None:
            j, w = post
            beats.append(Beat(j, f"{calls[j]} posts {_a(w.channel)} write of {w.req}'s KV into {e.page}"))
        if freed is not None:
            j, f = freed
            still = " while that write is still in flight" if post is not None else ""
            beats.append(Beat(j, f"{f.req} frees {e.page}{still} ({calls[j]})"))
            cause = j
            beats.append(Beat(k, f"{e.req}'s write lands in {e.page}, a page it no longer holds ({calls[k]})"))
        else:
            beats.append(Beat(k, f"{e.req} writes {e.page}, a page it does not hold ({calls[k]})"))
    elif isinstance(e, Free):
        beats, cause = _free_beats(trace, pools, flag, calls, before)
    else:
        beats = _marked_beats(trace, pools, flag, calls)
    return sorted(beats, key=lambda b: b.step or 0), cause


def _marked_beats(
    trace: Trace, pools: Sequence[PoolShape], flag: Violation, calls: Mapping[int, str]
) -> list[Beat]:
    """Any other violating event on a page of a drawn pool: what the page's marks say led up to it.

    The start of every operation still pending on the page (``pending``
    marks) and the step each set ``flag`` mark was raised, then the event
    itself: a vocabulary's own kinds (a read still in flight, a transfer on
    deregistered memory) get their history from the marks they declare.
    """
    e, k, page = flag.event, flag.step, flag.page
    pool = next((p for p in pools if p.name == flag.pool), None)
    if pool is None or page is None or page not in pool.pages:
        return []
    states = trace.states
    beats: list[Beat] = []
    for m in pool.marks:
        if m.role == "pending":
            for who in pending(states[k - 1], m, page):
                start = k - 1
                while start > 0 and who in pending(states[start - 1], m, page):
                    start -= 1
                if start > 0:
                    beats.append(Beat(start, f"{m.label} ({who}) on {page} starts ({calls[start]})"))
        elif m.role == "flag" and truthy(cell(states[k], m.var, page)):
            start = k
            while start > 0 and truthy(cell(states[start - 1], m.var, page)):
                start -= 1
            if start > 0:
                beats.append(Beat(start, f"{page} becomes {m.label} ({calls[start]})"))
    if beats:
        shown = ", ".join(f"{name} {value}" for name, value in e.payload() if name not in ("pool", "page"))
        beats.append(Beat(k, f"{e.kind} on {page}{f' ({shown})' if shown else ''} ({calls[k]})"))
    return beats


def _a(word: str) -> str:
    """``word`` with its indefinite article (``an rdma``, ``a gpu``)."""
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"


def _posted(past: Sequence[tuple[int, Event]], pool: str, page: str, req: str) -> tuple[int, WritePosted] | None:
    """The latest posted write of ``req`` into ``page`` among ``past``."""
    return next(((j, x) for j, x in past if isinstance(x, WritePosted) and x.pool == pool and x.req == req
                 and page in x.pages), None)


def _free_beats(
    trace: Trace, pools: Sequence[PoolShape], flag: Violation, calls: Mapping[int, str],
    past: Sequence[tuple[int, Event]],
) -> tuple[list[Beat], int]:
    """A free that breaks an invariant: who shares the page, the reference dropped before, the free itself."""
    e = flag.event
    assert isinstance(e, Free)
    k, page = flag.step, flag.page or ""
    beats: list[Beat] = []
    cause = k
    dropped = next(((j, x) for j, x in past if isinstance(x, (Decref, Free)) and x.req == e.req
                    and page in x.touches(e.pool)), None)
    # A count driven below zero: someone else's free already took it to zero while this request still used it.
    premature = next(((j, x) for j, x in past if isinstance(x, Free) and x.req != e.req
                      and e.req in (x.still_used_by or ()) and page in x.touches(e.pool)), None)
    if premature is not None and (dropped is None or premature[0] > dropped[0]):
        j, x = premature
        before = [(i, y) for i, y in past if i < j]
        theirs = next(((i, y) for i, y in before if isinstance(y, (Decref, Free)) and y.req == x.req
                       and page in y.touches(e.pool)), None)
        if theirs is not None:
            i, y = theirs
            how = f" (refcount {y.refcount})" if y.refcount else ""
            beats.append(Beat(i, f"{y.req} drops its reference to {page}{how} ({calls[i]})"))
        beats.append(Beat(j, f"{x.req} frees {page}{' again' if theirs else ''} while {e.req} still uses it"
                             f"{f' (refcount {x.refcount})' if x.refcount else ''} ({calls[j]})"))
        cause = theirs[0] if theirs is not None else j
        beats.append(Beat(k, f"{e.req} frees {page}, no longer counted{f': refcount {e.refcount}' if e.refcount else ''}"
                             f"{f' ({e.error})' if e.error else ''} ({calls[k]})"))
        return beats, cause
    users = list(e.still_used_by or ())
    pool = next((p for p in pools if p.name == e.pool), None)
    if pool is not None and users:
        states = trace.states
        count = next((m for m in pool.marks if m.role == "count"), None)
        for j in range(k, 0, -1):
            before = cell(states[j - 1], pool.holders, page) or []
            after = cell(states[j], pool.holders, page) or []
            joined = [u for u in users if u in after and u not in before]
            if joined:
                ref = ""
                if count is not None:
                    ref = f" ({count.label} {show_value(cell(states[j - 1], count.var, page))}->" \
                          f"{show_value(cell(states[j], count.var, page))})"
                beats.append(Beat(j, f"{calls[j]} shares {page} with {', '.join(joined)}{ref}"))
                break
    if dropped is not None:
        j, drop = dropped
        how = f" (refcount {drop.refcount})" if drop.refcount else ""
        beats.append(Beat(j, f"{e.req} drops its reference to {page}{how} ({calls[j]})"))
        cause = j
    again = " again" if dropped is not None else ""
    count_text = f": refcount {e.refcount}" if e.refcount else ""
    still = f", back on the free list while {', '.join(users)} still use{'s' if len(users) == 1 else ''} it" if users else ""
    error = f" ({e.error})" if e.error else ""
    beats.append(Beat(k, f"{e.req} frees {page}{again}{count_text}{still}{error} ({calls[k]})"))
    return beats, cause
