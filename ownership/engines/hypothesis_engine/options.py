"""The hypothesis engine's options: the frozen dataclass the registry builds from a check's settings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ownership.errors import Code, OwnershipError

if TYPE_CHECKING:
    from ownership.session.settings import Settings



@dataclass(frozen=True)
class HypothesisOptions:
    """Options of the stateful (random) engine.

    ``seed`` fixes Hypothesis' random choices (a run without one prints the
    seed it used); ``derandomize`` derives the seed from the test itself, so
    every run gives the same result (CI mode).
    """

    max_examples: int = 200
    steps: int = 50
    seed: int | None = None
    derandomize: bool = False
    invariants: tuple[str, ...] | None = None
    progress_every: float = 1.0
    walks: int | None = None
    """Swarm random walks tried before Hypothesis' search (``None``: five per example; 0: none)."""
    exhaustive_states: int = 20_000
    """The breadth-first phase's cap (``--max-states``; 0: none): a space this small is searched
    exhaustively and answered exactly; a larger one seeds the walks with the deepest states found."""
    workers: int | None = None
    """The random phase as a swarm of this many worker processes (:mod:`.swarm`); ``None``: one, or with ``ray``
    one per CPU of the cluster.  The breadth-first phase runs before, in this process."""
    ray: str | None = None
    """The swarm's workers as Ray actors on this cluster (``auto`` or an address)."""
    deadlock: bool = False
    """Also look for deadlocks (``--deadlock``): exactly when the breadth-first phase exhausts the space, else by walks."""
    symmetry: bool = True
    """Symmetry reduction in the breadth-first phase (``--no-symmetry``); with it, the spec's symmetry
    is checked first (OWN061), as the explorer does."""

    @classmethod
    def from_settings(cls, settings: Settings) -> HypothesisOptions:
        """The random engine's options for a check (the search limits of the other engines are refused)."""
        if settings.option("free") or settings.max_depth is not None:
            raise OwnershipError(
                Code.BAD_OPTION, "the hypothesis engine takes --max-examples, --steps, --seed, --derandomize, "
                "--max-states (its breadth-first phase), --no-symmetry and --max-seconds (not --free or --max-depth)"
            )
        options = cls(
            max_examples=settings.option("max_examples") if settings.option("max_examples") is not None else cls.max_examples,
            steps=settings.option("steps") if settings.option("steps") is not None else cls.steps,
            seed=settings.option("seed"), derandomize=settings.option("derandomize"), invariants=settings.invariants, walks=settings.option("walks"),
            exhaustive_states=settings.max_states if settings.max_states is not None else cls.exhaustive_states,
            symmetry=settings.symmetry, workers=settings.option("workers"), ray=settings.option("ray"),
            deadlock=settings.option("deadlock"),
        )
        options.validate()
        return options

    def validate(self) -> None:
        """Refuse counts out of range (OWN015), named by their flags."""
        from ownership import inputs

        inputs.check_count("--seed", self.seed, 0)
        inputs.check_count("--max-examples", self.max_examples, 1)
        inputs.check_count("--steps", self.steps, 1)
        inputs.check_count("--walks", self.walks, 0)
        inputs.check_count("--max-states", self.exhaustive_states, 0)
        inputs.check_count("--workers", self.workers, 1)

    @property
    def swarm(self) -> bool:
        """Whether the random phase runs on several workers or Ray actors."""
        return self.ray is not None or (self.workers or 1) > 1

    @property
    def walk_budget(self) -> int:
        """How many random walks run before Hypothesis."""
        return 5 * self.max_examples if self.walks is None else self.walks
