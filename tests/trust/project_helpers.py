"""Pure helpers of the project a spec models (not a spec): constants, functions, a dataclass, an Enum."""

import enum
from dataclasses import dataclass

LIMIT = 2
NAMES = ("a", "b")
ALLOWED = frozenset({0, 1})
used: list[int] = []  # the project's own bookkeeping, which the spec never reads (it reads s.used)


class Phase(enum.Enum):
    IDLE = 0
    RUNNING = 1


@dataclass(frozen=True)
class Budget:
    tokens: int

    def left(self, used: int) -> int:
        return self.tokens - used


def below_limit(n: int) -> bool:
    """Whether ``n`` is under the project's LIMIT."""
    return n < LIMIT and len(ALLOWED) == LIMIT


def budget() -> Budget:
    return Budget(tokens=LIMIT)
