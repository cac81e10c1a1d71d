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
    """The state graph as DOT: a node per state, an edge per transition; violations in red.

    A violating state is a red node; a flagged step (``s.flag``, an event
    marked ``violates=``) is a red edge labelled with the invariant it
    violates, and a state reached only through flagged steps is a dashed red
    node, since its state alone may satisfy every invariant.
    """
    lines = ["digraph states {"]
    for n, d in g.nodes(data=True):
        style = ""
        if d["violates"]:
            style = f', color="red", tooltip="violates {d["violates"]}"'
        elif d.get("flagged"):
            style = f', color="red", style="dashed", tooltip="reached only by a step violating {d["flagged"]}"'
        lines.append(f'  {n} [label="{n}\\nd={d["depth"]}"{style}];')
    for a, b, d in g.edges(data=True):
        label = d["action"].replace('"', "'")
        if d.get("violates"):
            lines.append(f'  {a} -> {b} [label="{label}\\nviolates {d["violates"]}", color="red", fontcolor="red"];')
        else:
            lines.append(f'  {a} -> {b} [label="{label}"];')
    lines.append("}")
    return "\n".join(lines) + "\n"
