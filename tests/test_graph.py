"""The networkx state graph agrees with the explorer."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
from typer.testing import CliRunner

from conftest import SPECS, instance
from ownership.cli import app
from ownership.engines.explore import explore
from ownership.engines.graph import state_graph, violating_nodes


def test_graph_has_the_explorers_states() -> None:
    g = state_graph(instance("sglang_disagg_v0_5_21"))
    assert g.number_of_nodes() == explore(instance("sglang_disagg_v0_5_21")).stats.states
    assert violating_nodes(g) == []


def test_shortest_path_to_a_violation_matches_the_counterexample() -> None:
    g = state_graph(instance("sglang_disagg_v0_5_19"))
    bad = violating_nodes(g)
    lengths = nx.single_source_shortest_path_length(g, 0)
    assert min(lengths[n] for n in bad) == 15


def test_graph_command_writes_graphml(tmp_path: Path) -> None:
    out = tmp_path / "g.graphml"
    res = CliRunner().invoke(app, ["graph", str(SPECS / "sglang_single_node.py"), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert nx.read_graphml(out).number_of_nodes() == 57
