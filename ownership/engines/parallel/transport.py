"""Where the workers of a parallel run live: one process each on this machine, or Ray actors.

A :class:`Workers` pool holds one object per worker, built in the worker by
a picklable factory (a :class:`~ownership.engines.parallel.shard.Shard` of
the sharded search, a swarm worker of the random engine), and calls its
methods: all at once (:meth:`Workers.call_each`,
which returns when every worker has answered: the level's barrier) or one
(:meth:`Workers.call_one`).  Results and errors come back as data: an
:class:`~ownership.errors.OwnershipError` raised in a worker (a located spec
error) is raised again here as itself, anything else as
:class:`WorkerError` with the worker's traceback.  Progress messages a
shard sends while it works reach ``on_progress``.

:class:`LocalWorkers` forks (or spawns) processes talking over pipes; the
Ray pool is in :mod:`ownership.engines.parallel.raypool`.
"""

from __future__ import annotations

import multiprocessing
import signal
import traceback
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection, wait
from typing import Any, Protocol

from ownership.errors import Code, OwnershipError

ProgressHook = Callable[[tuple[Any, ...]], None]
Report = Callable[[tuple[Any, ...]], None]
Factory = Callable[..., Any]
"""Builds a worker's object in the worker: called with ``report=`` (progress messages to the coordinator, or
``None``); module-level callables and ``functools.partial`` of them pickle, as spawned processes and Ray need."""


def forks() -> bool:
    """Whether local workers are forked here (else spawned): forked workers share the coordinator's ``hash()``."""
    return "fork" in multiprocessing.get_all_start_methods()


class WorkerError(RuntimeError):
    """A worker raised something other than a spec error, or died: the run cannot go on."""


class WorkerMemoryError(WorkerError):
    """A worker ran out of memory (a MemoryError under an address-space limit): the run ends at the memory limit."""


class WorkersNotStartedError(RuntimeError):
    """The workers could not be started here (no memory to fork, a library that cannot load)."""


class Workers(Protocol):
    """A pool of workers, each serving one object built by its factory."""

    count: int
    description: str
    """Where they run, for the verdict's notes: ``2 worker processes``, ``4 Ray actors at ADDRESS``."""

    def call_each(self, method: str, args: Sequence[tuple[Any, ...]]) -> list[Any]:
        """Call ``method`` on every worker, worker ``i`` with ``args[i]``; their results in worker order."""
        ...

    def call_one(self, index: int, method: str, *args: Any) -> Any:
        """Call ``method`` on worker ``index``."""
        ...

    def close(self) -> None:
        """Stop every worker (also one still busy)."""
        ...


def encode_error(exc: BaseException) -> tuple[Any, ...]:
    """An exception raised in a worker, as data that pickles (an OwnershipError's fields, or its traceback)."""
    if isinstance(exc, OwnershipError):
        return ("own", exc.code.name, exc.message, exc.file, exc.line)
    if isinstance(exc, MemoryError):
        return ("memory", "MemoryError", "")
    return ("crash", f"{type(exc).__name__}: {exc}", traceback.format_exc())


def raise_error(error: tuple[Any, ...], worker: int) -> None:
    """Raise again what :func:`encode_error` encoded."""
    if error[0] == "own":
        raise OwnershipError(Code[error[1]], error[2], error[3], error[4])
    if error[0] == "memory":
        raise WorkerMemoryError(f"worker {worker} ran out of memory")
    raise WorkerError(f"worker {worker} failed: {error[1]}\n{error[2]}")


def _serve(conn: Connection, factory: Factory) -> None:
    """A worker process: build its object, then answer calls until the pipe closes."""
    # Ctrl-C reaches the whole process group: the coordinator answers it and stops the workers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        served = factory(report=conn.send)
    except BaseException as exc:  # noqa: BLE001 - sent to the coordinator, which raises it
        conn.send(("error", encode_error(exc)))
        return
    conn.send(("ok", None))
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        method, args = msg
        try:
            conn.send(("ok", getattr(served, method)(*args)))
        except BaseException as exc:  # noqa: BLE001 - sent to the coordinator, which raises it
            conn.send(("error", encode_error(exc)))


class LocalWorkers:
    """One process per worker on this machine, over pipes (forked where the platform can, else spawned)."""

    def __init__(self, factories: Sequence[Factory], on_progress: ProgressHook | None = None,
                 idle: Callable[[], None] | None = None, idle_every: float = 1.0) -> None:
        ctx: Any = multiprocessing.get_context("fork" if forks() else "spawn")
        self.count = len(factories)
        self.description = f"{self.count} worker processes"
        self.on_progress = on_progress
        self.idle, self.idle_every = idle, idle_every
        self.conns: list[Connection] = []
        self.procs: list[Any] = []
        try:
            self._start(ctx, factories)
        except (OSError, MemoryError) as exc:  # fork or a pipe refused: no memory, too many processes
            self.close()
            raise WorkersNotStartedError(f"{type(exc).__name__}: {exc}") from None
        try:
            self._gather(range(self.count))
        except WorkerError as exc:
            self.close()
            raise WorkersNotStartedError(str(exc).splitlines()[0]) from None
        except BaseException:
            self.close()
            raise

    def _start(self, ctx: Any, factories: Sequence[Factory]) -> None:
        for i, factory in enumerate(factories):
            mine, theirs = ctx.Pipe()
            proc = ctx.Process(target=_serve, args=(theirs, factory), daemon=True, name=f"ownership-worker-{i}")
            proc.start()
            theirs.close()
            self.conns.append(mine)
            self.procs.append(proc)

    def call_each(self, method: str, args: Sequence[tuple[Any, ...]]) -> list[Any]:
        for conn, a in zip(self.conns, args, strict=True):
            conn.send((method, a))
        return self._gather(range(self.count))

    def call_one(self, index: int, method: str, *args: Any) -> Any:
        self.conns[index].send((method, args))
        return self._gather([index])[0]

    def _gather(self, indices: Sequence[int] | range) -> list[Any]:
        """Every answer of the workers ``indices`` (progress messages go to the hook meanwhile)."""
        results: dict[int, Any] = {}
        errors: dict[int, tuple[Any, ...]] = {}
        waiting = {self.conns[i]: i for i in indices}
        sentinels = {self.procs[i].sentinel: i for i in indices}
        while waiting:
            ready = wait([*waiting, *(s for s, i in sentinels.items() if self.conns[i] in waiting)],
                         timeout=self.idle_every)
            if not ready and self.idle is not None:
                self.idle()
            for obj in ready:
                if obj in sentinels and not isinstance(obj, Connection):
                    i = sentinels[obj]
                    conn = self.conns[i]
                    if conn in waiting and not conn.poll():
                        del waiting[conn]
                        errors[i] = ("crash", f"the worker process ended (exit code {self.procs[i].exitcode})", "")
                    continue
                assert isinstance(obj, Connection)
                i = waiting.get(obj, -1)
                if i < 0:
                    continue
                try:
                    kind, payload = (msg := obj.recv())[0], msg[1:]
                except (EOFError, OSError):
                    del waiting[obj]
                    errors[i] = ("crash", "the worker process closed its pipe", "")
                    continue
                if kind == "progress":
                    if self.on_progress is not None:
                        self.on_progress(msg)
                    continue
                del waiting[obj]
                if kind == "ok":
                    results[i] = payload[0]
                else:
                    errors[i] = payload[0]
        if errors:
            first = min(errors)
            raise_error(errors[first], first)
        return [results[i] for i in indices]

    def close(self) -> None:
        for conn in self.conns:
            try:
                conn.send(None)
            except (OSError, ValueError):
                pass
        for proc in self.procs:
            proc.join(timeout=0.2)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=2)
        for conn in self.conns:
            conn.close()
        self.conns, self.procs = [], []
