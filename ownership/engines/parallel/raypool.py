"""The shards on Ray actors: the same sharded search on a Ray cluster (``--ray auto|ADDRESS``).

Ray is an optional extra (``pip install 'kv-ownership[ray]'``) imported only
here.  ``auto`` joins the cluster this machine belongs to (``RAY_ADDRESS``, or
one started with ``ray start``) or, if there is none, starts a local one for
the run and stops it after; an address joins that cluster.  Each actor
builds its shard from the spec file's absolute path, so every node must see
the spec (and the modules it imports) at the same path, with the same
contents (the description's digest is checked), and have this package
installed.  Workers are not forked here, so shards are chosen by
:func:`~ownership.engines.parallel.shard.shard_of`, the same on every node.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from ownership.engines.parallel.transport import Factory, encode_error, raise_error
from ownership.errors import Code, OwnershipError


class _Actor:
    """One worker's object in a Ray actor; every call answers ``("ok", result)`` or ``("error", encoded)``."""

    def __init__(self, factory: Factory) -> None:
        self.error: tuple[Any, ...] | None = None
        self.served: Any = None
        try:
            self.served = factory(report=None)
        except BaseException as exc:  # noqa: BLE001 - sent to the coordinator, which raises it
            self.error = encode_error(exc)

    def call(self, method: str, args: tuple[Any, ...]) -> tuple[str, Any]:
        if self.error is not None or self.served is None:
            return ("error", self.error)
        try:
            return ("ok", getattr(self.served, method)(*args))
        except BaseException as exc:  # noqa: BLE001 - sent to the coordinator, which raises it
            return ("error", encode_error(exc))


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise OwnershipError(Code.BAD_OPTION, "--ray needs Ray: pip install 'kv-ownership[ray]'") from None
    return ray


class RaySession:
    """The run's connection to a Ray cluster: joined, or started for the run and stopped after (:meth:`close`)."""

    def __init__(self, address: str) -> None:
        started = time.perf_counter()
        ray = self.ray = _ray()
        self.address = address
        self.ours = not ray.is_initialized()
        self.started_cluster = False
        if self.ours:
            os.environ.setdefault("RAY_AUTH_MODE", "disabled")
            quiet = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.WARNING}
            try:
                try:
                    ray.init(address="auto" if address == "auto" else address, **quiet)
                except ConnectionError:
                    if address != "auto":
                        raise
                    ray.init(**quiet)  # no cluster to join: a local one, for this run
                    self.started_cluster = True
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise OwnershipError(Code.BAD_OPTION, f"--ray {address}: cannot reach a Ray cluster: {exc}") from None
        self.seconds = time.perf_counter() - started

    @property
    def cpus(self) -> int:
        """The cluster's CPUs: the actors a run starts unless --workers says how many."""
        return max(1, int(self.ray.cluster_resources().get("CPU", 1)))

    @property
    def where(self) -> str:
        return "a local Ray cluster started for this run" if self.started_cluster else f"the Ray cluster at {self.address}"

    def close(self) -> None:
        """Leave the cluster (which stops it if this run started it)."""
        if self.ours:
            self.ray.shutdown()


class RayWorkers:
    """One Ray actor per worker (see the module docstring)."""

    def __init__(self, session: RaySession, factories: Sequence[Factory],
                 idle: Callable[[], None] | None = None, idle_every: float = 1.0) -> None:
        started = time.perf_counter()
        self.ray = session.ray
        self.count = len(factories)
        self.idle, self.idle_every = idle, idle_every
        actor = self.ray.remote(num_cpus=1)(_Actor)
        self.actors = [actor.remote(f) for f in factories]
        try:
            self.call_each("ready", [() for _ in factories])
        except BaseException:
            self.close()
            raise
        self.startup = session.seconds + time.perf_counter() - started
        self.description = f"{self.count} Ray actors on {session.where}"

    def call_each(self, method: str, args: Sequence[tuple[Any, ...]]) -> list[Any]:
        refs = [a.call.remote(method, x) for a, x in zip(self.actors, args, strict=True)]
        pending = list(refs)
        while pending:
            _, pending = self.ray.wait(pending, num_returns=len(pending), timeout=self.idle_every)
            if pending and self.idle is not None:
                self.idle()
        answers = self.ray.get(refs)
        results: list[Any] = []
        for i, (kind, payload) in enumerate(answers):
            if kind != "ok":
                raise_error(payload, i)
            results.append(payload)
        return results

    def call_one(self, index: int, method: str, *args: Any) -> Any:
        kind, payload = self.ray.get(self.actors[index].call.remote(method, args))
        if kind != "ok":
            raise_error(payload, index)
        return payload

    def close(self) -> None:
        for a in self.actors:
            try:
                self.ray.kill(a)
            except Exception:  # noqa: BLE001 - already gone
                pass
        self.actors = []
