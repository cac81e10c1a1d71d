"""``ownership graph``'s file: the reachable state graph as GraphML, GEXF or DOT."""

from __future__ import annotations

from pathlib import Path
from typing import Any

SUFFIXES = (".graphml", ".gexf", ".dot", ".gv")
"""The file names ``ownership graph --out`` writes, by suffix."""


def write_graph(g: Any, out: Path) -> None:
    """Write the networkx graph ``g`` in the format the suffix of ``out`` names."""
    import networkx as nx

    suffix = out.suffix.lower()
    out.parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".graphml":
        nx.write_graphml(g, out)
    elif suffix == ".gexf":
        nx.write_gexf(g, out)
    else:
        out.write_text(graph_dot(g))


def graph_dot(g: Any) -> str:
    """The state graph as DOT: a node per state (violating ones red), an edge per transition."""
    lines = ["digraph states {"]
    for n, d in g.nodes(data=True):
        color = ', color="red"' if d["violates"] else ""
        lines.append(f'  {n} [label="{n}\\nd={d["depth"]}"{color}];')
    for a, b, d in g.edges(data=True):
        label = d["action"].replace('"', "'")
        lines.append(f'  {a} -> {b} [label="{label}"];')
    lines.append("}")
    return "\n".join(lines) + "\n"
