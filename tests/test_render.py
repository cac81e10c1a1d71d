"""The counterexample picture: DOT text, rendering, renderer lookup, output files."""

from __future__ import annotations

import dataclasses
import json
import os
import stat
import sys
from pathlib import Path

import pytest

from ownership.core.events import Write
from ownership.core.schema import UNKNOWN_SCHEMA
from ownership.core.trace import Step, Trace, TraceKind
from ownership.errors import Code, OwnershipError
from ownership.render import graphviz_bin
from ownership.render.dot import trace_to_dot
from ownership.render.dot_model import RED
from ownership.render.files import write_counterexample

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def dot(trace: Trace) -> str:
    return trace_to_dot(trace)


@pytest.fixture()
def needs_renderer() -> None:
    if graphviz_bin.find_renderer() is None:
        pytest.skip("no Graphviz renderer installed")


def _script(tmp_path: Path, name: str, body: str) -> Path:
    """An executable Python script standing in for a renderer."""
    path = tmp_path / name
    path.write_text(f"#!{sys.executable}\nimport sys\n{body}\n", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


# -- DOT -----------------------------------------------------------------------------
def test_dot_is_deterministic(trace: Trace, dot: str) -> None:
    assert trace_to_dot(trace) == dot
    reloaded = Trace.from_json(json.loads(trace.dumps()))
    assert trace_to_dot(reloaded) == dot


def test_dot_is_ascii_graphviz(dot: str) -> None:
    assert dot.isascii()
    assert dot.startswith("digraph counterexample {")
    assert dot.rstrip().endswith("}")


def test_dot_names_the_offending_read(dot: str) -> None:
    # Apostrophes are escaped in HTML labels.
    assert "B reads D0, which holds A&#x27;s KV (no_foreign_read)" in dot
    assert "D0 written by A (prefill_send(A) copies P0-&gt;D0)" in dot
    assert "step 9: A frees D0" in dot
    assert "read by B" in dot
    assert RED in dot
    assert "HTTP 200" in dot
    assert "no_read_of_unwritten" not in dot  # not checked by this spec, so not flagged


def test_dot_has_lanes_and_pages(trace: Trace, dot: str) -> None:
    for req in ("request A", "request B"):
        assert req in dot
    for page in ("P0", "P1", "P2", "D0", "D1", "D2", "D3"):
        assert f"<B>{page}</B>" in dot
    for step in trace.steps:
        assert step.call in dot
    # Pool bookkeeping and ghosts are drawn as the grid, not listed as changes.
    assert "decode_holders" not in dot
    assert "read_foreign" not in dot


def test_dot_escapes_html(trace: Trace) -> None:
    weird = dataclasses.replace(trace, spec="a<b>&\"c\" \u00e9", schema=UNKNOWN_SCHEMA)
    text = trace_to_dot(weird)
    assert "a&lt;b&gt;&amp;&quot;c&quot; &#233;" in text
    assert text.isascii()


def _minimal(steps: int, **kw: object) -> Trace:
    states = [{"n": i, "who": {"x": None if i == 0 else "x"}} for i in range(steps + 1)]
    return Trace(
        spec="counter",
        spec_path=None,
        params={},
        initial=states[0],
        steps=tuple(Step("inc", (), (), (), states[i]) for i in range(1, steps + 1)),
        **kw,  # type: ignore[arg-type]
    )


def test_dot_without_schema_is_a_step_list() -> None:
    text = trace_to_dot(_minimal(2, violation="small"))
    assert "inc()" in text
    assert "n=2" in text
    assert "small is violated after step 2" in text


def test_dot_zero_steps_and_deadlock(trace: Trace) -> None:
    empty = trace_to_dot(dataclasses.replace(trace, steps=(), violation=None))
    assert "initial state" in empty
    assert "0 steps, no violation" in empty
    stuck = dataclasses.replace(trace, steps=trace.steps[:10], violation=None, kind=TraceKind.DEADLOCK)
    assert "deadlock after step 10" in trace_to_dot(stuck)


def test_dot_flags_state_anomalies(trace: Trace) -> None:
    state = json.loads(json.dumps(trace.steps[9].state))
    state["decode_free"]["D0"] = 1  # held by B and on the free list
    steps = (*trace.steps[:9], dataclasses.replace(trace.steps[9], state=state))
    text = trace_to_dot(dataclasses.replace(trace, steps=steps, violation="no_double_ownership"))
    assert "D0 is held by B and also on the free list" in text


def test_dot_unowned_write_is_primary() -> None:
    base = _minimal(1, violation="no_unowned_write")
    step = dataclasses.replace(
        base.steps[0],
        events=(Write(pool="decode", req="B", page="D3", violates="no_unowned_write"),),
    )
    text = trace_to_dot(dataclasses.replace(base, steps=(step,)))
    assert "B writes D3 in the decode pool, a page it does not hold (no_unowned_write)" in text


# -- rendering ---------------------------------------------------------------------------
@pytest.mark.usefixtures("needs_renderer")
def test_svg_shows_the_headline(dot: str) -> None:
    svg = graphviz_bin.render(dot, "svg").decode("utf-8")
    assert "<svg" in svg
    assert "B reads D0, which holds A" in svg
    assert "no_foreign_read" in svg


@pytest.mark.usefixtures("needs_renderer")
def test_png_is_a_png(dot: str) -> None:
    assert graphviz_bin.render(dot, "png").startswith(PNG_MAGIC)


@pytest.mark.usefixtures("needs_renderer")
@pytest.mark.parametrize("kind", ["no_schema", "zero", "deadlock"])
def test_fallback_pictures_render(trace: Trace, kind: str) -> None:
    if kind == "no_schema":
        t = _minimal(3)
    elif kind == "zero":
        t = dataclasses.replace(trace, steps=(), violation=None)
    else:
        t = dataclasses.replace(trace, steps=trace.steps[:4], violation=None, kind=TraceKind.DEADLOCK)
    assert b"<svg" in graphviz_bin.render(trace_to_dot(t), "svg")


def test_render_rejects_unknown_format() -> None:
    with pytest.raises(OwnershipError) as err:
        graphviz_bin.render("digraph {}", "pdf")
    assert err.value.code is Code.BAD_OPTION


# -- finding a renderer ------------------------------------------------------------------------
skip_on_windows = pytest.mark.skipif(os.name == "nt", reason="uses a script with a #! line as the renderer")


@skip_on_windows
def test_env_var_names_the_renderer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _script(tmp_path, "my-dot", "sys.stdin.read(); sys.stdout.write('<svg>' + sys.argv[1] + '</svg>')")
    monkeypatch.setenv(graphviz_bin.ENV_VAR, str(fake))
    assert graphviz_bin.find_renderer() == [str(fake)]
    assert graphviz_bin.render("digraph {}", "svg") == b"<svg>-Tsvg</svg>"
    assert "my-dot" in graphviz_bin.renderer_name()


def test_env_var_naming_nothing_is_an_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(graphviz_bin.ENV_VAR, str(tmp_path / "no-such-dot"))
    with pytest.raises(OwnershipError) as err:
        graphviz_bin.find_renderer()
    assert err.value.code is Code.NO_RENDERER
    assert graphviz_bin.ENV_VAR in err.value.message
    assert graphviz_bin.renderer_name().startswith("none")


def test_nothing_found(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(graphviz_bin.ENV_VAR, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setattr(graphviz_bin.sysconfig, "get_path", lambda name: str(tmp_path))
    assert graphviz_bin.find_renderer() is None
    with pytest.raises(OwnershipError) as err:
        graphviz_bin.render("digraph {}", "svg")
    assert err.value.code is Code.NO_RENDERER
    assert "pip install graphviz-pure" in err.value.message
    assert "\n" not in err.value.one_line()
    assert graphviz_bin.renderer_name().startswith("none")


@skip_on_windows
def test_graphviz_pure_next_to_interpreter(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    bindir = tmp_path / "venv-bin"
    bindir.mkdir()
    pure = _script(bindir, "graphviz-pure", "pass")
    monkeypatch.delenv(graphviz_bin.ENV_VAR, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(sys, "executable", str(bindir / "python"))
    assert graphviz_bin.find_renderer() == [str(pure)]


@skip_on_windows
def test_dot_on_path_comes_first(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    dot = _script(tmp_path, "dot", "pass")
    monkeypatch.delenv(graphviz_bin.ENV_VAR, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert graphviz_bin.find_renderer() == [str(dot)]


@skip_on_windows
def test_failing_renderer_is_reported(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    bad = _script(tmp_path, "bad-dot", "sys.stderr.write('Error: syntax error in line 1\\nnear x\\n'); sys.exit(3)")
    monkeypatch.setenv(graphviz_bin.ENV_VAR, str(bad))
    with pytest.raises(OwnershipError) as err:
        graphviz_bin.render("digraph {", "png")
    assert err.value.code is Code.RENDER_FAILED
    assert "syntax error in line 1 near x" in err.value.message
    assert "\n" not in err.value.one_line()


# -- files -------------------------------------------------------------------------------------------
@pytest.mark.usefixtures("needs_renderer")
def test_write_counterexample(trace: Trace, tmp_path: Path) -> None:
    out = tmp_path / "cex" / "sglang"
    paths = write_counterexample(trace, out, formats=("svg", "png"))
    assert [p.name for p in paths] == ["trace.json", "trace.itf.json", "trace.dot", "trace.svg", "trace.png"]
    assert Trace.load(out / "trace.json").dumps() == trace.dumps()
    assert json.loads((out / "trace.itf.json").read_text())["#meta"]["format"] == "ITF"
    assert (out / "trace.dot").read_text() == trace_to_dot(trace)
    assert (out / "trace.svg").read_bytes().lstrip().startswith(b"<?xml")
    assert (out / "trace.png").read_bytes().startswith(PNG_MAGIC)


def test_write_counterexample_keeps_text_without_renderer(
    trace: Trace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(graphviz_bin, "find_renderer", lambda: None)
    with pytest.raises(OwnershipError) as err:
        write_counterexample(trace, tmp_path)
    assert err.value.code is Code.NO_RENDERER
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trace.dot", "trace.itf.json", "trace.json"]


def test_every_vocabulary_event_is_said_in_words_from_its_fields() -> None:
    """A kind with no sentence of its own reads as its docstring with the event's values, never as a field dump."""
    import dataclasses
    import typing

    from ownership.core.events import DECLARED, HandleSettled, HandOff, JobStarted, Tombstone
    from ownership.render.text import describe_event

    for cls in DECLARED:
        hints = typing.get_type_hints(cls)
        values = {f.name: (("P0",) if "tuple" in str(hints[f.name]) else "A")
                  for f in dataclasses.fields(cls) if f.name != "violates"}
        text = describe_event(cls(**values, violates="inv"))  # type: ignore[arg-type]
        assert text is not None and "``" not in text and ": pool " not in text, (cls.__name__, text)
    assert describe_event(JobStarted(channel="send", pool="kv", req="A", pages=("K0",))) is None  # not shown unless it breaks something
    assert describe_event(HandOff(pool="kv", req="A", node="x", pages=("K0",))) == \
        "A's page table lets go of K0 and cache node x holds them"
    assert describe_event(HandleSettled(pool="kv", req="A", handle="R0", outcome="FAILED")) == "A's operation R0 ends FAILED"
    assert describe_event(Tombstone(pool="swa", node="x", violates="inv")) == "Cache node x becomes a tombstone  <-- inv"
