"""The runtime ownership monitor: an engine's page events checked online (docs/monitor.md).

``Monitor`` receives alloc/share/write/cache/transfer/read/free/finish events
with the meanings of the event log (docs/event-log.md), raises
``OwnershipViolation`` at the first one that breaks an invariant, and can write
the events as a JSON-lines log for ``ownership validate``.  Engine
instrumentation lives in submodules (``ownership.monitor.sglang``) that import
the engine only when called.
"""

from ownership.monitor.core import INVARIANTS, MalformedEventError, Monitor, Node, OwnershipViolation
from ownership.monitor.log import SCHEMA, apply, monitor_from_header

__all__ = ["INVARIANTS", "SCHEMA", "MalformedEventError", "Monitor", "Node", "OwnershipViolation", "apply",
           "monitor_from_header"]
