"""The events a step records: one frozen dataclass per kind the vocabulary emits.

An event is something an action did that a reader of the trace should see:
a page allocated, written, read, freed or copied, a prefix published, an
in-flight write posted.  Each kind is declared here with its fields, so the
renderers match on the type (``isinstance(e, Read)``) and read attributes
(``e.page``) rather than comparing kind strings and looking fields up by
name.  Every event carries ``violates``: the invariant it breaks, or
``None``.

A spec's own events (``s.emit("reply", req=..., status=200)``) go through
:func:`make_event`, which gives a declared type when the kind and fields fit
one and a :class:`SpecEvent` (kind and fields as given) otherwise, so any
user event is kept and shown.

The JSON form (``trace.json``) is the one events always had: ``{"kind": ...,
<fields in declaration order>, "violates": ...}`` with ``violates`` only when
set and an optional field only when present.  :func:`make_event` gives a
declared type only to input whose keys are in that order, so reading and
writing a trace gives back the same bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

_OPTIONAL = {"optional": True}
"""Field metadata: left out of the JSON form (and absent on input) when ``None``."""


@dataclass(frozen=True, kw_only=True)
class Event:
    """Something an action did; ``violates`` names the invariant it breaks, if any."""

    KIND: ClassVar[str] = ""
    violates: str | None = None

    @property
    def kind(self) -> str:
        """The kind as written in ``trace.json`` (``"read"``, ``"prefix_hit"``, ...)."""
        return self.KIND

    def payload(self) -> tuple[tuple[str, Any], ...]:
        """The fields as written in ``trace.json``, in order, without ``kind`` and ``violates``."""
        out: list[tuple[str, Any]] = []
        for f in fields(self):
            if f.name == "violates" or f.metadata.get("in_kind"):
                continue
            value = getattr(self, f.name)
            if value is None and f.metadata.get("optional"):
                continue
            out.append((f.name, list(value) if isinstance(value, tuple) else value))
        return tuple(out)

    def get(self, name: str, default: Any = None) -> Any:
        """Field ``name`` as written in ``trace.json``, for wording an event of any kind.

        Renderers read a declared kind's attributes; this is for what every
        event may have (a spec's own event too): who did it, which page.
        """
        return next((v for k, v in self.payload() if k == name), default)

    def touches(self, pool: str) -> list[str]:
        """The pages of ``pool`` this event is about: its ``page`` then its ``pages``, if its ``pool`` is ``pool``."""
        if self.get("pool") != pool:
            return []
        page = self.get("page")
        return ([] if page is None else [str(page)]) + [str(p) for p in self.get("pages") or []]

    def to_json(self) -> dict[str, Any]:
        """The JSON object of this event in a trace file."""
        out: dict[str, Any] = {"kind": self.kind, **dict(self.payload())}
        if self.violates:
            out["violates"] = self.violates
        return out

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> Event:
        """The event a ``trace.json`` object describes (``KeyError`` without ``kind``)."""
        rest = {k: v for k, v in data.items() if k not in ("kind", "violates")}
        return make_event(str(data["kind"]), rest, data.get("violates"))

    @classmethod
    def _parse(cls, kind: str, data: Mapping[str, Any], violates: str | None) -> Event | None:
        """An instance of ``cls`` for exactly these fields, or ``None`` when they do not fit it."""
        declared = [f for f in fields(cls) if f.name != "violates" and not f.metadata.get("in_kind")]
        names = [f.name for f in declared]
        keys = list(data)
        if keys != [n for n in names if n in data]:
            return None  # an unknown field, or the declared ones in another order
        values: dict[str, Any] = {}
        for f in declared:
            if f.name not in data:
                if not f.metadata.get("optional"):
                    return None
                continue
            value = data[f.name]
            if f.metadata.get("optional") and value is None:
                return None  # would be left out on output: not the same JSON
            if f.metadata.get("many"):
                if not isinstance(value, (list, tuple)):
                    return None
                value = tuple(value)
            values[f.name] = value
        return cls(violates=violates, **values, **cls._kind_fields(kind))

    @classmethod
    def _kind_fields(cls, kind: str) -> dict[str, Any]:
        """Fields carried in the kind itself (see :class:`WritePosted`)."""
        return {}


def _many() -> Any:
    """A list field (stored as a tuple, written as a JSON list)."""
    return field(metadata={"many": True})


# -- page pools (vocab/pool.py) ------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class Alloc(Event):
    """``req`` takes ``pages`` of ``pool`` off the free list (in page-table order)."""

    KIND: ClassVar[str] = "alloc"
    pool: str
    req: str
    pages: tuple[str, ...] = _many()


@dataclass(frozen=True, kw_only=True)
class Write(Event):
    """``req`` writes its KV into ``page`` (``"(beyond table)"`` for a transfer overflow)."""

    KIND: ClassVar[str] = "write"
    pool: str
    req: str
    page: str


@dataclass(frozen=True, kw_only=True)
class Read(Event):
    """``req`` reads ``page``, which holds the KV of ``content`` (``None``: never written)."""

    KIND: ClassVar[str] = "read"
    pool: str
    req: str
    page: str
    content: str | None


@dataclass(frozen=True, kw_only=True)
class Free(Event):
    """``req`` returns ``pages`` to the free list; a refcounted pool adds the count and who still uses them."""

    KIND: ClassVar[str] = "free"
    pool: str
    req: str
    pages: tuple[str, ...] = _many()
    refcount: str | None = field(default=None, metadata=_OPTIONAL)
    error: str | None = field(default=None, metadata=_OPTIONAL)
    still_used_by: tuple[str, ...] | None = field(default=None, metadata={"optional": True, "many": True})


@dataclass(frozen=True, kw_only=True)
class Transfer(Event):
    """The KV of ``req`` is copied from pool ``src`` to ``dst``: ``pages`` are ``"P0->D0"`` pairs."""

    KIND: ClassVar[str] = "transfer"
    req: str
    src: str
    dst: str
    pages: tuple[str, ...] = _many()

    def pairs(self) -> list[tuple[str, str]]:
        """``pages`` as (source page, destination page)."""
        out = []
        for pair in self.pages:
            src, _, dst = str(pair).partition("->")
            out.append((src, dst))
        return out

    def touches(self, pool: str) -> list[str]:
        """Both sides count: the source pages if ``pool`` is ``src``, the destination pages if it is ``dst``."""
        out: list[str] = []
        for src, dst in self.pairs():
            if self.src == pool:
                out.append(src)
            if self.dst == pool:
                out.append(dst)
        return out


# -- reference counts (vocab/refcount.py) ----------------------------------------------
@dataclass(frozen=True, kw_only=True)
class Decref(Event):
    """``req`` drops one reference to ``page`` (``refcount`` is ``"2->1"``); the page stays allocated."""

    KIND: ClassVar[str] = "decref"
    pool: str
    req: str
    page: str
    refcount: str


# -- tiers (vocab/tiers.py) ----------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class CopyFailed(Event):
    """A backup of ``req`` from tier ``src`` to ``dst`` could not start (``reason``)."""

    KIND: ClassVar[str] = "copy_failed"
    req: str
    src: str
    dst: str
    reason: str


@dataclass(frozen=True, kw_only=True)
class Demote(Event):
    """``req`` leaves tier ``src`` for ``dst``; ``note`` says whether a committed copy exists."""

    KIND: ClassVar[str] = "demote"
    req: str
    src: str
    dst: str
    note: str


# -- in-flight writes (vocab/inflight.py) ---------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class WritePosted(Event):
    """Channel ``channel`` posts a write of ``req``'s KV into ``pages``: kind ``"<channel> write posted"``."""

    SUFFIX: ClassVar[str] = " write posted"
    channel: str = field(metadata={"in_kind": True})
    pool: str
    req: str
    pages: tuple[str, ...] = _many()

    @property
    def kind(self) -> str:
        return f"{self.channel}{self.SUFFIX}"

    @classmethod
    def _kind_fields(cls, kind: str) -> dict[str, Any]:
        return {"channel": kind[: -len(cls.SUFFIX)]}


@dataclass(frozen=True, kw_only=True)
class WriteInFlight(Event):
    """``page`` is freed while ``req``'s write into it has not landed."""

    KIND: ClassVar[str] = "write still in flight"
    pool: str
    req: str
    page: str


@dataclass(frozen=True, kw_only=True)
class FreeDeferred(Event):
    """``req`` finishes but its ``pages`` are held until its transfer is fenced."""

    KIND: ClassVar[str] = "free deferred"
    pool: str
    req: str
    pages: tuple[str, ...] = _many()


# -- in-flight reads, memory registration, deadlines (vocab/reads.py, regions.py, clock.py) ---
@dataclass(frozen=True, kw_only=True)
class ReadPosted(Event):
    """Channel ``channel`` posts a read of ``req``'s ``pages`` (an RDMA read, an offload job's copy)."""

    KIND: ClassVar[str] = "read posted"
    channel: str
    pool: str
    req: str
    pages: tuple[str, ...] = _many()


@dataclass(frozen=True, kw_only=True)
class ReadInFlight(Event):
    """``page`` is freed while ``req``'s read of it has not landed."""

    KIND: ClassVar[str] = "read still in flight"
    pool: str
    req: str
    page: str


@dataclass(frozen=True, kw_only=True)
class Registered(Event):
    """``pages`` of ``pool`` are registered with the transfer engine (``register_memory``)."""

    KIND: ClassVar[str] = "registered"
    pool: str
    pages: tuple[str, ...] = _many()


@dataclass(frozen=True, kw_only=True)
class Deregistered(Event):
    """``pages`` of ``pool`` are deregistered (``deregister_memory``): no transfer may touch them."""

    KIND: ClassVar[str] = "deregistered"
    pool: str
    pages: tuple[str, ...] = _many()


@dataclass(frozen=True, kw_only=True)
class TransferOnDeregistered(Event):
    """``page`` is deregistered while ``req``'s ``channel`` transfer of it is outstanding."""

    KIND: ClassVar[str] = "transfer on deregistered memory"
    channel: str
    pool: str
    req: str
    page: str


@dataclass(frozen=True, kw_only=True)
class DeadlineExpired(Event):
    """Deadline ``deadline`` (a timeout, a lease, a TTL) of ``req`` passes; ``req`` is absent for a global one."""

    KIND: ClassVar[str] = "deadline expired"
    deadline: str
    req: str | None = field(default=None, metadata=_OPTIONAL)


# -- prefix caches (vocab/prefix.py) ----------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class PrefixHit(Event):
    """``req`` matches cached ``node`` and maps ``page``, whose content is ``kv``'s."""

    KIND: ClassVar[str] = "prefix_hit"
    pool: str
    req: str
    page: str
    node: str
    kv: str


@dataclass(frozen=True, kw_only=True)
class PrefixRead(Event):
    """``req`` reads the shared prefix ``page`` of ``node``, which holds ``kv``'s content."""

    KIND: ClassVar[str] = "prefix_read"
    pool: str
    req: str
    page: str
    node: str
    kv: str


@dataclass(frozen=True, kw_only=True)
class Publish(Event):
    """``req`` publishes ``page`` as the cached copy of ``node``."""

    KIND: ClassVar[str] = "publish"
    pool: str
    req: str
    page: str
    node: str


@dataclass(frozen=True, kw_only=True)
class Evict(Event):
    """The cache (or ``req``) evicts ``node``'s ``page``; ``in_use_by`` still read it."""

    KIND: ClassVar[str] = "evict"
    pool: str
    req: str
    page: str
    node: str
    in_use_by: tuple[str, ...] = _many()


# -- content identity (vocab/content.py) -----------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class ContentHit(Event):
    """``req`` looks up index key ``entry`` for content ``key`` and gets ``page``, which holds ``holds``."""

    KIND: ClassVar[str] = "content_hit"
    pool: str
    req: str
    page: str
    entry: str
    key: str
    holds: str


@dataclass(frozen=True, kw_only=True)
class ContentRead(Event):
    """``req`` reads ``page`` expecting content ``expected``; it holds ``holds``, written by ``writer``."""

    KIND: ClassVar[str] = "content_read"
    pool: str
    req: str
    page: str
    expected: str
    holds: str
    writer: str

# -- hand-off to a cache (vocab/cache.py) ---------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class HandOff(Event):
    """``req``'s page table lets go of ``pages`` and cache node ``node`` holds them (no free)."""

    KIND: ClassVar[str] = "hand_off"
    pool: str
    req: str
    node: str
    pages: tuple[str, ...] = _many()


@dataclass(frozen=True, kw_only=True)
class CacheHit(Event):
    """``req`` matches cache node ``node``: its table maps ``pages`` and the node is locked."""

    KIND: ClassVar[str] = "cache_hit"
    pool: str
    req: str
    node: str
    pages: tuple[str, ...] = _many()


@dataclass(frozen=True, kw_only=True)
class CacheRelease(Event):
    """Cache node ``node`` returns ``pages`` to the free list; ``in_use_by`` still map them."""

    KIND: ClassVar[str] = "cache_release"
    pool: str
    node: str
    pages: tuple[str, ...] = _many()
    in_use_by: tuple[str, ...] = _many()


@dataclass(frozen=True, kw_only=True)
class Tombstone(Event):
    """Cache node ``node`` becomes a tombstone: it stays in the tree, holds nothing and cannot be matched."""

    KIND: ClassVar[str] = "tombstone"
    pool: str
    node: str


@dataclass(frozen=True, kw_only=True)
class NodeSplit(Event):
    """Cache node ``node`` is split: ``pages`` (its value from the split point on) move to ``into``."""

    KIND: ClassVar[str] = "split"
    pool: str
    node: str
    into: str
    pages: tuple[str, ...] = _many()

# -- operations per request (vocab/handles.py) ------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class HandlePosted(Event):
    """``req``'s operation ``handle`` is posted; it covers ``pages`` until it is terminal."""

    KIND: ClassVar[str] = "handle posted"
    pool: str
    req: str
    handle: str
    pages: tuple[str, ...] = _many()


@dataclass(frozen=True, kw_only=True)
class HandleSettled(Event):
    """``req``'s operation ``handle`` is terminal: ``outcome`` is ``DONE``, ``FAILED`` or ``CANCELLED``."""

    KIND: ClassVar[str] = "handle settled"
    pool: str
    req: str
    handle: str
    outcome: str


@dataclass(frozen=True, kw_only=True)
class OperationPending(Event):
    """``page`` is released while ``req``'s operation ``handle`` on it is not terminal."""

    KIND: ClassVar[str] = "operation still pending"
    pool: str
    req: str
    handle: str
    page: str


# -- jobs with their own references (vocab/jobs.py) ---------------------------------------------
@dataclass(frozen=True, kw_only=True)
class JobStarted(Event):
    """A job of ``req`` (``channel``: a send, store, save) takes its own reference on ``pages``."""

    KIND: ClassVar[str] = "job started"
    channel: str
    pool: str
    req: str
    pages: tuple[str, ...] = _many()


@dataclass(frozen=True, kw_only=True)
class JobKeeps(Event):
    """``req`` releases ``pages`` but its job still references them: they stay off the free list."""

    KIND: ClassVar[str] = "job keeps"
    channel: str
    pool: str
    req: str
    pages: tuple[str, ...] = _many()


@dataclass(frozen=True, kw_only=True)
class JobDone(Event):
    """``req``'s job completes ``age`` lifecycles after the one that started it; ``pages`` return to the free list."""

    KIND: ClassVar[str] = "job done"
    channel: str
    pool: str
    req: str
    age: int
    pages: tuple[str, ...] = _many()


@dataclass(frozen=True, kw_only=True)
class JobHolds(Event):
    """``page`` goes to the free list while ``req``'s job still references it."""

    KIND: ClassVar[str] = "job still holds"
    channel: str
    pool: str
    req: str
    page: str


@dataclass(frozen=True, kw_only=True)
class StaleCompletion(Event):
    """The completion of a job ``age`` lifecycles old is applied to request id ``req``'s current lifecycle."""

    KIND: ClassVar[str] = "stale completion"
    channel: str
    req: str
    age: int


# -- specs ----------------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class Reply(Event):
    """The client of ``req`` gets HTTP ``status`` (emitted by specs: ``s.emit("reply", ...)``)."""

    KIND: ClassVar[str] = "reply"
    req: str
    status: Any


@dataclass(frozen=True, kw_only=True)
class SpecEvent(Event):
    """A spec's own event: any kind, any fields, kept as given."""

    name: str
    fields: tuple[tuple[str, Any], ...] = ()

    @property
    def kind(self) -> str:
        return self.name

    def payload(self) -> tuple[tuple[str, Any], ...]:
        return self.fields


DECLARED: tuple[type[Event], ...] = (
    Alloc, Write, Read, Free, Transfer, Decref, CopyFailed, Demote, WriteInFlight, FreeDeferred,
    PrefixHit, PrefixRead, Publish, Evict, Reply,
    ReadPosted, ReadInFlight, Registered, Deregistered, TransferOnDeregistered, DeadlineExpired,
    ContentHit, ContentRead,
    HandOff, CacheHit, CacheRelease, Tombstone, NodeSplit,
    HandlePosted, HandleSettled, OperationPending,
    JobStarted, JobKeeps, JobDone, JobHolds, StaleCompletion,
)
"""Every declared kind with a fixed name (:class:`WritePosted`'s name is its channel's)."""

_BY_KIND: Mapping[str, type[Event]] = {cls.KIND: cls for cls in DECLARED}


def make_event(kind: str, data: Mapping[str, Any], violates: str | None = None) -> Event:
    """The declared event for ``kind`` and ``data`` when they fit one, else a :class:`SpecEvent`."""
    cls = _BY_KIND.get(kind)
    if cls is None and kind.endswith(WritePosted.SUFFIX) and len(kind) > len(WritePosted.SUFFIX):
        cls = WritePosted
    typed = cls._parse(kind, data, violates) if cls is not None else None
    return typed if typed is not None else SpecEvent(name=kind, fields=tuple(data.items()), violates=violates)
