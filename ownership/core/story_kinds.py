"""The stories of violations that are not reads: what led to the offending event, and its root cause.

:func:`beats_of` words the history of a stale prefix hit (the publish of a
page nobody wrote), an eviction in use (the hit that left the entry
evictable), a free racing a write (the posted write, the free), a late write
(the free before it), a second free (the reference dropped before it, or the
early free that left the count at zero), a read of other content (the lookup
that handed the page over), a cache release in use (the match that locked
it), a release under a pending operation (a sibling's failure), a free under
a job's reference or a stale completion (the reuse of the id) as
:class:`~ownership.core.pages.Beat` records, and names the root-cause step;
:func:`state_beats` tells a state invariant the last step broke without an
event saying so.  Reads have their page history in
:mod:`ownership.core.story`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ownership.core.events import (
    Alloc,
    CacheHit,
    CacheRelease,
    ContentHit,
    ContentRead,
    Decref,
    Event,
    Evict,
    Free,
    HandlePosted,
    HandleSettled,
    HandOff,
    JobDone,
    JobHolds,
    JobStarted,
    OperationPending,
    PrefixHit,
    PrefixRead,
    Publish,
    StaleCompletion,
    Tombstone,
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
    elif isinstance(e, ContentRead):
        beats, cause = _content_beats(e, k, before, calls)
    elif isinstance(e, CacheRelease):
        beats = _release_beats(e, k, before, calls)
    elif isinstance(e, OperationPending):
        beats, cause = _handle_beats(e, k, before, calls)
    elif isinstance(e, (JobHolds, StaleCompletion)):
        beats, cause = _job_beats(trace, e, k, before, calls)
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


def _content_beats(
    e: ContentRead, k: int, past: Sequence[tuple[int, Event]], calls: Mapping[int, str]
) -> tuple[list[Beat], int]:
    """A read of a page holding other content than the reader expects: the write, the publish, the lookup that handed it over.

    The root cause is the lookup (a ``content_hit``) that handed the reader
    a page already holding other content than the key it looked up: an
    index key that does not tell the two contents apart (a colliding hash,
    a key without its scope).  Without one, a write by another request into
    the page after the reader got it; else the read itself.
    """
    page, pool = e.page, e.pool
    beats: list[Beat] = []
    cause = k
    hit = next(((j, x) for j, x in past if isinstance(x, ContentHit) and x.pool == pool and x.page == page
                and x.req == e.req), None)
    upto = hit[0] if hit is not None else k
    write = next(((j, x) for j, x in past if isinstance(x, Write) and x.pool == pool and x.page == page
                  and j <= upto), None)
    pub = next(((j, x) for j, x in past if isinstance(x, Publish) and x.pool == pool and x.page == page
                and j <= upto), None)
    if write is not None and pub is not None and write[0] == pub[0]:
        j, w = write
        beats.append(Beat(j, f"{w.req} writes {e.holds}'s KV into {page} and publishes it as entry {pub[1].node} "
                             f"({calls[j]})"))
    else:
        if write is not None:
            j, w = write
            beats.append(Beat(j, f"{w.req} writes {e.holds}'s KV into {page} ({calls[j]})"))
        if pub is not None:
            j, p = pub
            beats.append(Beat(j, f"{p.req} publishes {page} as entry {p.node} ({calls[j]})"))
    if hit is not None and hit[1].holds != e.expected:
        j, h = hit
        beats.append(Beat(j, f"{h.req}'s lookup of {h.key} hits entry {h.entry} and is handed {page}, which holds "
                             f"{h.holds}'s KV: the entry does not tell {h.holds} from {e.expected} ({calls[j]})"))
        cause = j
    else:
        if hit is not None:
            j, h = hit
            beats.append(Beat(j, f"{h.req}'s lookup of {h.key} hits entry {h.entry} and is handed {page} "
                                 f"({calls[j]})"))
        # Overwritten after the reader got it: a write by another request, later than the hit.
        late = next(((j, x) for j, x in past if isinstance(x, Write) and x.pool == pool and x.page == page
                     and x.req != e.req and j >= upto and (write is None or j > write[0])), None)
        if late is not None:
            j, w = late
            beats.append(Beat(j, f"{w.req} writes {page}, which {e.req} holds expecting {e.expected}'s KV "
                                 f"({calls[j]})"))
            cause = j
    beats.append(Beat(k, f"{e.req} reads {page} expecting {e.expected}'s KV and gets {e.holds}'s, written by "
                         f"{e.writer} ({calls[k]})"))
    return beats, cause


def _release_beats(
    e: CacheRelease, k: int, past: Sequence[tuple[int, Event]], calls: Mapping[int, str]
) -> list[Beat]:
    """A cache node returning pages requests still map: the match that locked them, a tombstone since, the release."""
    beats: list[Beat] = []
    users = set(e.in_use_by)
    hits = [(j, x) for j, x in past if isinstance(x, CacheHit) and x.pool == e.pool and x.node == e.node
            and x.req in users and set(x.pages) & set(e.pages)]
    first = min((j for j, _ in hits), default=k)
    for j, h in sorted(hits, key=lambda jx: jx[0]):
        beats.append(Beat(j, f"{h.req} matches node {h.node}: its table maps {', '.join(h.pages)} and the node is "
                             f"locked ({calls[j]})"))
    for j, t in past:
        if isinstance(t, Tombstone) and t.node == e.node and first <= j < k:
            beats.append(Beat(j, f"node {t.node} becomes a tombstone of the {t.pool} pool; its {e.pool} pages "
                                 f"stay locked ({calls[j]})"))
            break
    users_text = ", ".join(e.in_use_by) or "a request"
    verb = "maps" if len(e.in_use_by) == 1 else "map"
    beats.append(Beat(k, f"node {e.node} returns {', '.join(e.pages)} to the {e.pool} free list while "
                         f"{users_text} still {verb} {'it' if len(e.pages) == 1 else 'them'} ({calls[k]})"))
    return beats


def _handle_beats(
    e: OperationPending, k: int, past: Sequence[tuple[int, Event]], calls: Mapping[int, str]
) -> tuple[list[Beat], int]:
    """A page released while one of its request's operations is pending: the posts, a sibling's failure, the release.

    When another operation of the same request ended in failure (or was
    cancelled) after this one was posted, that is the root cause: the
    request was given up on one handle's outcome while a sibling was still
    in flight.  Otherwise the release itself.
    """
    beats: list[Beat] = []
    cause = k
    post = next(((j, x) for j, x in past if isinstance(x, HandlePosted) and x.pool == e.pool and x.req == e.req
                 and x.handle == e.handle and e.page in x.pages), None)
    since = post[0] if post is not None else 0
    if post is not None:
        j = post[0]
        same = [x.handle for i, x in reversed(past) if i == j and isinstance(x, HandlePosted) and x.req == e.req
                and x.pool == e.pool and e.page in x.pages]
        word = "handles" if len(same) > 1 else "handle"
        beats.append(Beat(j, f"{calls[j]} posts {e.req}'s {word} {', '.join(same)} on {e.page}"))
    sibling = next(((j, x) for j, x in past if isinstance(x, HandleSettled) and x.pool == e.pool
                    and x.req == e.req and x.handle != e.handle and x.outcome != "DONE" and j >= since), None)
    if sibling is not None:
        j, x = sibling
        beats.append(Beat(j, f"{e.req}'s handle {x.handle} ends {x.outcome} and is taken for the request's "
                             f"outcome, while {e.handle} on {e.page} is still in flight ({calls[j]})"))
        cause = j
    beats.append(Beat(k, f"{e.page} is released while {e.req}'s handle {e.handle} on it is still pending, to land "
                         f"in whoever holds {e.page} next ({calls[k]})"))
    return beats, cause


def _job_beats(
    trace: Trace, e: JobHolds | StaleCompletion, k: int, past: Sequence[tuple[int, Event]], calls: Mapping[int, str]
) -> tuple[list[Beat], int]:
    """A free under a job's own reference, or a stale completion: the job's start, the reuse of its id, the completion.

    A job started by request id ``r`` that is still running when ``r``
    starts another job began in an earlier lifecycle of the id: the id was
    reused while it ran.  That reuse is the root cause (from there on a
    completion or a free addressed by the id alone reaches both
    lifecycles); without one, the offending step itself.
    """
    beats: list[Beat] = []
    cause = k
    starts = [(j, x) for j, x in reversed(past) if isinstance(x, JobStarted) and x.channel == e.channel
              and x.req == e.req]  # in step order
    if isinstance(e, JobHolds):
        old = next(((j, x) for j, x in reversed(starts) if e.page in x.pages), None)
        reuse = next(((j, x) for j, x in starts if old is not None and j > old[0]), None)
    else:
        age = e.age if isinstance(e.age, int) else 0  # a hand-made event may carry anything
        old = starts[-(age + 1)] if 0 < age < len(starts) else None
        reuse = starts[-age] if old is not None else None
    if old is not None:
        j, x = old
        beats.append(Beat(j, f"{x.req}'s {x.channel} job takes its own reference to {', '.join(x.pages)} "
                             f"({calls[j]})"))
    if reuse is not None:
        j, x = reuse
        held = f" still holds {e.page}" if isinstance(e, JobHolds) else " is still running"
        beats.append(Beat(j, f"request id {x.req} is reused ({calls[j]}): a new lifecycle starts while the "
                             f"{x.channel} job of the previous one{held}"))
        cause = j
    if isinstance(e, StaleCompletion):
        beats.append(Beat(k, f"the completion of {e.req}'s {e.channel} job from {e.age} lifecycle"
                             f"{'s' if e.age != 1 else ''} back is applied to {e.req}'s current lifecycle ({calls[k]})"))
        return beats, cause
    step = trace.steps[k - 1].events
    done = next((x for x in step if isinstance(x, JobDone) and x.channel == e.channel and x.req == e.req), None)
    free = next((x for x in step if isinstance(x, Free) and e.page in x.touches(e.pool)), None)
    how = f"{e.req}'s {e.channel} job of age {done.age} completes and " if done is not None else ""
    who = free.req if free is not None else "a request"
    pages = ", ".join(free.pages) if free is not None else e.page
    whose = f"the {e.channel} job of {e.req}'s earlier lifecycle" if reuse is not None else f"{e.req}'s {e.channel} job"
    beats.append(Beat(k, f"{how}{who}'s pages {pages} go back to the free list ({calls[k]}): {e.page} is still held "
                         f"by {whose}"))
    return beats, cause


def state_beats(
    trace: Trace, pools: Sequence[PoolShape], calls: Mapping[int, str]
) -> tuple[list[Beat], int | None]:
    """The story of a state invariant that the last step broke without any event saying so, and its root cause.

    The last step is the symptom and, unless its events say otherwise, the
    root cause.  A hand-off to a cache node (``hand_off``) of a request's
    pages of one pool, whose pages of another pool the same request freed
    earlier and hands nothing of, leaves the node holding one half of a pair:
    the request's allocation, that free and the hand-off are the story.
    Otherwise the last step's events on pages, each after the previous event
    on the same pages.
    """
    k = len(trace.steps)
    if k == 0:
        return [], None
    last = trace.steps[k - 1].events
    past = [(j, x) for j in range(k - 1, 0, -1) for x in reversed(trace.steps[j - 1].events)]
    names = {p.name for p in pools} | {str(x.get("pool")) for _, x in past if x.get("pool") is not None}
    for h in last:
        if not isinstance(h, HandOff):
            continue
        for other in sorted(names - {h.pool}):
            if any(isinstance(x, (HandOff, Tombstone)) and x.pool == other and x.node == h.node for x in last):
                continue  # the node gets its pages of that pool too, or is a tombstone there
            alloc = next(((j, x) for j, x in past if isinstance(x, Alloc) and x.req == h.req and x.pool == other),
                         None)
            freed = next(((j, x) for j, x in past if isinstance(x, Free) and x.req == h.req and x.pool == other
                          and (alloc is None or j >= alloc[0])), None)
            if freed is None:
                continue
            beats: list[Beat] = []
            if alloc is not None:
                j = alloc[0]
                got = [x for i, x in reversed(past) if i == j and isinstance(x, Alloc) and x.req == h.req]
                given = " and ".join(f"{', '.join(x.pages)} ({x.pool})" for x in got)
                beats.append(Beat(j, f"{calls[j]} gives {h.req} {given}"))
            j, f = freed
            beats.append(Beat(j, f"{h.req}'s {other} page{'s' if len(f.pages) != 1 else ''} {', '.join(f.pages)} "
                                 f"go{'es' if len(f.pages) == 1 else ''} back to the free list ({calls[j]}); "
                                 f"its {h.pool} pages stay"))
            beats.append(Beat(k, f"{h.req} hands {', '.join(h.pages)} to node {h.node} of the {h.pool} pool but no "
                                 f"{other} page, and {h.node} is not a tombstone of the {other} pool: "
                                 f"{', '.join(f.pages)} went back at step {j} ({calls[k]})"))
            return beats, k
    beats = []
    for x in last:
        pages = [p for pool in names for p in x.touches(pool)]
        if not pages:
            continue
        prev = next(((j, y) for j, y in past if set(pages) & {p for pool in names for p in y.touches(pool)}), None)
        if prev is not None and all(b.step != prev[0] for b in beats):
            j, y = prev
            beats.append(Beat(j, f"{y.kind} by {y.get('req', '?')} on {', '.join(y.touches(str(y.get('pool'))))} "
                                 f"({calls[j]})"))
        beats.append(Beat(k, f"{x.kind} by {x.get('req', '?')} on {', '.join(pages)} ({calls[k]})"))
    return sorted(beats, key=lambda b: b.step or 0), k
