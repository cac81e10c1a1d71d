"""``ownership graph``: the reachable state graph of one instance, written to a file."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ownership import inputs
from ownership.errors import Code, OwnershipError


@dataclass(frozen=True)
class GraphOutcome:
    """What was written: the file, the graph's size and its violations."""

    out: Path
    states: int
    transitions: int
    violating: int
    """States that violate a checked invariant."""
    flagged_steps: int = 0
    """Edges with a step the spec flags as violating a checked invariant (a violation, whatever state it reaches)."""
    flagged_states: int = 0
    """States reached only through flagged steps."""

    def summary(self) -> str:
        """What the export's line says: the size, and every kind of violation in the graph."""
        line = (f"wrote {self.out}: {self.states:,} states, {self.transitions:,} transitions, "
                f"{self.violating:,} violating states, {self.flagged_steps:,} violating steps")
        if self.flagged_states:
            line += f" ({self.flagged_states:,} state{'s' if self.flagged_states != 1 else ''} reached only through one)"
        return line


def export_graph(spec_path: Path, out: Path, params: Mapping[str, int], *, max_states: int, symmetry: bool,
                 max_domain: int) -> GraphOutcome:
    """Load the spec, build its state graph (at most ``max_states`` states) and write it to ``out``."""
    from ownership.engines.graph import GraphOptions, flagged_edges, flagged_nodes, state_graph, violating_nodes
    from ownership.lang.instance import Instance
    from ownership.render.graphfile import SUFFIXES, write_graph
    from ownership.session.run import load

    if out.suffix.lower() not in SUFFIXES:
        raise OwnershipError(Code.BAD_OPTION, f"--out {out}: use a .graphml, .gexf or .dot file")
    inputs.check_count("--max-states", max_states, 1)
    inputs.check_count("--max-domain", max_domain, 1)
    spec = load(spec_path)
    inputs.check_instance_size(spec, params, max_domain)
    g = state_graph(Instance(spec, params), GraphOptions(max_states=max_states, symmetry=symmetry))
    with inputs.writing(out, "--out"):
        write_graph(g, out)
    return GraphOutcome(out, g.number_of_nodes(), g.number_of_edges(), len(violating_nodes(g)),
                        len(flagged_edges(g)), len(flagged_nodes(g)))
