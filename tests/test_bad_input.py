"""Bad input of every kind ends in one located error line and a documented exit status.

A matrix over every command and every option that takes a path or a number:
each bad form must give exactly one line ``error[OWNxxx]: ...`` naming the
file (and line where there is one), exit 2 (usage or spec error), never a
Python traceback and never a silent exit 0.  Output paths are checked before
the engine runs, so a long check never ends in an unwritable report.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import CORPUS, ROOT, SPECS
from ownership.cli import app

TOY = str(CORPUS / "toy_double_free.py")  # violates in a few steps: every output is written
SAFE = str(CORPUS / "toy_safe_counter.py")
V21 = str(SPECS / "sglang_disagg_v0_5_19.py")
COMMITTED = ROOT / "counterexamples" / "sglang_disagg_v0_5_19"


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every case runs in a scratch folder: a case that is not refused must not write into the checkout."""
    monkeypatch.chdir(tmp_path)


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def error_line(res, code: str, *needles: str, exit_code: int = 2) -> str:
    """The single error line of a run that must fail with ``code``."""
    out = res.output
    assert "Traceback" not in out, out
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    lines = [ln for ln in out.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, out
    line = lines[0]
    assert line.startswith(f"error[{code}]: "), line
    for needle in needles:
        assert needle in line, line
    assert res.exit_code == exit_code, (res.exit_code, out)
    return line


@pytest.fixture
def bad(tmp_path: Path) -> dict[str, str]:
    """Bad output locations: a folder, a path under a regular file, the empty string."""
    afile = tmp_path / "afile"
    afile.write_text("not a folder\n")
    folder = tmp_path / "folder"
    folder.mkdir()
    return {
        "dir": str(folder),
        "under_file": str(afile / "sub" / "x.json"),
        "file": str(afile),
        "empty": "",
    }


# -- output files: --json, --junit, --sarif, report --out, graph --out, render -o ----------------

FILE_OPTIONS = [
    ("check", "--json", [TOY]),
    ("check", "--junit", [TOY]),
    ("check", "--sarif", [TOY]),
    ("test", "--json", [str(CORPUS)]),
    ("test", "--junit", [str(CORPUS)]),
    ("test", "--sarif", [str(CORPUS)]),
    ("report", "--out", [TOY]),
    ("graph", "--out", [TOY]),
]


@pytest.mark.parametrize(("command", "option", "rest"), FILE_OPTIONS, ids=[f"{c} {o}" for c, o, _ in FILE_OPTIONS])
@pytest.mark.parametrize("form", ["dir", "under_file", "empty"])
def test_unwritable_output_file_is_refused_before_the_run(
    command: str, option: str, rest: list[str], form: str, bad: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the run must not write counterexamples/ before failing
    target = bad[form]
    if command == "graph" and form != "empty":
        target = target if form == "dir" else str(Path(target).with_suffix(".graphml"))
        if form == "dir":
            target = str(Path(target) / "g.graphml")
            Path(target).mkdir()
    if command == "report" and form == "under_file":
        target = str(Path(target).with_suffix(".html"))
    line = error_line(invoke(command, *rest, option, target), "OWN014", option)
    if form == "empty":
        assert "empty path" in line
    else:
        assert target in line or str(Path(target).parent) in line or str(tmp_path / "afile") in line
    assert not (tmp_path / "counterexamples").exists()


OUT_DIRS = [
    ("check", [TOY]),
    ("test", [str(CORPUS)]),
    ("prove", [TOY, "--max-k", "0", "--no-spacer", "--reach-states", "0"]),
    ("mbt", [str(ROOT / "examples" / "paged_allocator" / "allocator_spec.py"), "--adapter", "x:Y"]),
]


@pytest.mark.parametrize(("command", "rest"), OUT_DIRS, ids=[c for c, _ in OUT_DIRS])
@pytest.mark.parametrize("form", ["file", "under_file", "empty"])
def test_unwritable_out_folder_is_refused_before_the_run(
    command: str, rest: list[str], form: str, bad: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    target = bad[form]
    line = error_line(invoke(command, *rest, "--out", target), "OWN014", "--out")
    if form != "empty":
        assert str(tmp_path / "afile") in line
    assert not (tmp_path / "counterexamples").exists()


def test_render_output_is_checked(tmp_path: Path, bad: dict[str, str]) -> None:
    trace = tmp_path / "t.json"
    shutil.copy(COMMITTED / "trace.json", trace)
    for form in ("dir", "under_file", "empty"):
        target = bad[form] if form != "under_file" else str(Path(bad[form]).with_suffix(".svg"))
        error_line(invoke("render", str(trace), "-o", target), "OWN014", "--out")
    # A suffix that names another format than --format would write PNG bytes into a .svg file.
    error_line(invoke("render", str(trace), "--format", "png", "-o", str(tmp_path / "x.svg")), "OWN013", ".svg", "png")
    res = invoke("render", str(trace), "--format", "dot", "-o", str(tmp_path / "x.gv"))
    assert res.exit_code == 0, res.output


def test_graph_suffix_is_checked(tmp_path: Path) -> None:
    error_line(invoke("graph", TOY, "--out", str(tmp_path / "g.txt")), "OWN013", ".graphml")


def test_a_broken_output_folder_is_named_even_when_it_breaks_late(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The default folder counterexamples/<spec>/ is a file: found before the run.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "counterexamples").write_text("")
    line = error_line(invoke("check", TOY, "--no-render"), "OWN014", "counterexamples")
    assert "not a folder" in line


@pytest.mark.skipif(not hasattr(__import__("os"), "geteuid") or __import__("os").geteuid() == 0, reason="root writes anywhere")
def test_read_only_folder_is_refused(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        error_line(invoke("check", TOY, "--json", str(ro / "r.json")), "OWN014", "not writable")
    finally:
        ro.chmod(0o700)


# -- numbers -------------------------------------------------------------------------------------

NUMBERS = [
    ["check", TOY, "--max-depth", "-1"],
    ["check", TOY, "--max-states", "0"],
    ["check", TOY, "--max-states", "-5"],
    ["check", TOY, "--max-seconds", "-1"],
    ["check", TOY, "--max-seconds", "0"],
    ["check", TOY, "--max-seconds", "nan"],
    ["check", TOY, "--engine", "bmc", "--solver-timeout", "-1"],
    ["check", TOY, "--engine", "bmc", "--solver-timeout", "0"],
    ["check", TOY, "--engine", "bmc", "--solver-timeout", "inf"],
    ["check", TOY, "--engine", "hypothesis", "--max-examples", "0"],
    ["check", TOY, "--engine", "hypothesis", "--steps", "0"],
    ["check", TOY, "--engine", "hypothesis", "--seed", "-1"],
    ["prove", TOY, "--max-k", "-1"],
    ["prove", TOY, "--solver-timeout", "-1"],
    ["prove", TOY, "--spacer-timeout", "0"],
    ["graph", TOY, "--out", "g.graphml", "--max-states", "0"],
    ["report", TOY, "--max-depth", "-1"],
    ["report", TOY, "--max-states", "0"],
    ["report", TOY, "--max-seconds", "-2"],
    ["report", TOY, "--engine", "bmc", "--solver-timeout", "0"],
    ["test", str(CORPUS), "--max-seconds", "0"],
    ["mbt", TOY, "--adapter", "x:Y", "--max-examples", "0"],
    ["mbt", TOY, "--adapter", "x:Y", "--steps", "-3"],
    ["mbt", TOY, "--adapter", "x:Y", "--seed", "-1"],
]


@pytest.mark.parametrize("args", NUMBERS, ids=[" ".join(a[2:] if a[0] != "check" else a[2:]) + f" ({a[0]})" for a in NUMBERS])
def test_out_of_range_numbers_are_refused(args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    option = next(a for a in args if a.startswith("--max") or a in ("--solver-timeout", "--spacer-timeout", "--steps", "--seed"))
    error_line(invoke(*args), "OWN015", option)


MAX_DOMAIN_ZERO = [
    ["check", TOY],
    ["prove", TOY],
    ["graph", TOY, "--out", "g.dot"],
    ["report", TOY],
    ["test", str(CORPUS)],
    ["replay", str(COMMITTED / "trace.json"), "--spec", V21],
    ["mbt", TOY, "--adapter", "x:Y"],
]


@pytest.mark.parametrize("args", MAX_DOMAIN_ZERO, ids=[a[0] for a in MAX_DOMAIN_ZERO])
def test_max_domain_must_be_positive_on_every_command(args: list[str]) -> None:
    error_line(invoke(*args, "--max-domain", "0"), "OWN015", "--max-domain")


@pytest.mark.parametrize("args", [
    ["check", TOY, "--max-depth", "x"],
    ["prove", TOY, "--reach-states", "lots"],
    ["check", TOY, "--max-domain", "many"],
    ["check", TOY, "--max-seconds", "soon"],
    ["prove", TOY, "--max-k", "2.5"],
    ["graph", TOY, "--out", "g.dot", "--max-states", "many"],
])
def test_non_numeric_numbers_are_refused(args: list[str]) -> None:
    error_line(invoke(*args), "OWN013", "Invalid value")


@pytest.mark.parametrize("args", [
    ["prove", TOY, "--reach-states", "-1"],
    ["prove", TOY, "--spacer-timeout", "0"],
    ["check", TOY, "--engine", "hypothesis", "--walks", "-2"],
    ["check", TOY, "--engine", "bmc", "--solver-timeout", "-1"],
])
def test_engine_flags_out_of_range_are_refused_by_their_declared_range(args: list[str]) -> None:
    error_line(invoke(*args), "OWN015", args[-2])


@pytest.mark.parametrize(("args", "owners"), [
    (["check", TOY, "--seed", "3"], "--seed is an option of --engine hypothesis, not of explore"),
    (["check", TOY, "--engine", "bmc", "--kernel", "python"], "--kernel is an option of --engine explore, not of bmc"),
    (["check", TOY, "--engine", "hypothesis", "--solver-timeout", "2"],
     "--solver-timeout is an option of --engine bmc or prove, not of hypothesis"),
])
def test_an_engine_flag_for_an_engine_that_does_not_take_it_is_refused(args: list[str], owners: str) -> None:
    error_line(invoke(*args, "--no-render"), "OWN013", owners)


def test_zero_depth_is_allowed_and_checks_the_initial_state() -> None:
    # No action fires within 0 steps: the verdict is vacuous, so it is accepted only on request.
    res = invoke("check", SAFE, "--max-depth", "0", "--no-render", "--allow-vacuous")
    assert res.exit_code == 0, res.output
    assert res.output.startswith("BOUNDED_OK (vacuous: 2 actions not seen to fire: prefill, decode_and_finish)")
    assert invoke("check", SAFE, "--max-depth", "0", "--no-render").exit_code == 3


# -- parameters ----------------------------------------------------------------------------------


def test_a_parameter_given_twice_is_refused() -> None:
    error_line(invoke("check", TOY, "-p", "pages=1", "-p", "pages=2"), "OWN016", "pages", "twice")


def test_a_parameter_both_free_and_fixed_is_refused() -> None:
    error_line(
        invoke("check", V21, "--free", "prompt_tokens", "-p", "prompt_tokens=5"), "OWN016", "prompt_tokens", "--free"
    )
    error_line(invoke("prove", V21, "--free", "prompt_tokens", "-p", "prompt_tokens=5"), "OWN016", "prompt_tokens")
    error_line(invoke("check", V21, "--free", "prompt_tokens", "--free", "prompt_tokens"), "OWN016", "twice")


@pytest.mark.parametrize("command", ["check", "graph", "prove", "report"])
def test_a_huge_domain_is_refused_up_front(command: str, tmp_path: Path) -> None:
    extra = ["--out", str(tmp_path / "g.dot")] if command == "graph" else []
    extra = ["--out", str(tmp_path / "r.html")] if command == "report" else extra
    line = error_line(
        invoke(command, V21, "-p", "prefill_pool_tokens=1000000000", *extra), "OWN017",
        "PrefillPage", "500,000,000", "--max-domain", "sglang_disagg_v0_5_19.py",
    )
    assert "state" in line


def test_max_domain_raises_the_limit() -> None:
    # 70 prefill pages: refused by default, accepted (and quick to refuse for depth) with --max-domain.
    error_line(invoke("check", V21, "-p", "prefill_pool_tokens=140"), "OWN017", "70")
    res = invoke("check", V21, "-p", "prefill_pool_tokens=140", "--max-domain", "100", "--max-depth", "1", "--no-render",
                 "--allow-vacuous")  # most actions need more than one step: vacuous, accepted on purpose
    assert res.exit_code == 0, res.output
    error_line(invoke("check", V21, "--max-domain", "0"), "OWN015", "--max-domain")


def test_a_huge_value_set_is_refused(tmp_path: Path) -> None:
    spec = tmp_path / "vals.py"
    spec.write_text(
        "from ownership import Spec\nspec = Spec('vals')\nspec.param('n', 3, min=1)\n"
        "L = spec.values('L', lambda p: range(p.n))\nspec.var('x', int, init=0)\n"
        "@spec.action\ndef a(s, v: L):\n    s.x = v\n"
        "@spec.invariant\ndef ok(s):\n    return True\n"
    )
    error_line(invoke("check", str(spec), "-p", "n=100000000"), "OWN017", "L", "100,000,000")


# -- specs -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("content", "code", "needle"), [
    (b"\x7fELF\x02\x01\x01\x00\x00\x00\xff\xfe", "OWN018", "binary"),
    ("# caf\u00e9\nx = 1\n".encode("latin-1"), "OWN018", "UTF-8"),
    (b"from ownership import Spec\nspec = Spec('x'\n", "OWN001", "syntax error"),
    (b"", "OWN003", "defines no Spec"),
    (b"raise RuntimeError('boom')\n", "OWN002", "RuntimeError: boom"),
    (b"import sys\nsys.exit(3)\n", "OWN002", "SystemExit"),
    (b"import nonexistent_module_xyz\n", "OWN002", "ModuleNotFoundError"),
], ids=["binary", "latin-1", "syntax", "empty", "raises", "sys.exit", "bad import"])
@pytest.mark.parametrize("command", ["check", "prove", "graph", "list", "test"])
def test_bad_spec_files(command: str, content: bytes, code: str, needle: str, tmp_path: Path) -> None:
    spec = tmp_path / "spec.py"
    spec.write_bytes(content)
    args = {
        "check": ["check", str(spec)],
        "prove": ["prove", str(spec)],
        "graph": ["graph", str(spec), "--out", str(tmp_path / "g.dot")],
        "list": ["list", str(tmp_path)],
        "test": ["test", str(tmp_path)],
    }[command]
    res = invoke(*args)
    if command == "test":  # test lists every spec, then its summary
        assert "Traceback" not in res.output
        assert res.exit_code == 2, res.output
        assert f"error[{code}]: {spec}" in res.output and needle in res.output
        return
    error_line(res, code, str(spec), needle)


def test_a_spec_in_another_encoding_is_refused_even_with_a_coding_line(tmp_path: Path) -> None:
    # Reports and diagnoses quote spec lines as UTF-8, so a latin-1 spec is refused where it is loaded.
    text = Path(SAFE).read_text()
    spec = tmp_path / "enc.py"
    spec.write_bytes(("# -*- coding: latin-1 -*-\n# caf\u00e9\n" + text).encode("latin-1"))
    error_line(invoke("check", str(spec), "--no-render"), "OWN018", f"{spec}:2:", "UTF-8")


@pytest.mark.parametrize("command", ["list", "test"])
def test_a_spec_folder_that_is_missing_a_file_or_empty(command: str, tmp_path: Path) -> None:
    error_line(invoke(command, str(tmp_path / "nowhere")), "OWN013", "nowhere", "not a directory")
    error_line(invoke(command, TOY), "OWN013", "not a directory")
    (tmp_path / "empty").mkdir()
    if command == "test":
        error_line(invoke(command, str(tmp_path / "empty")), "OWN013", "no spec files here")


def test_replay_with_a_bad_spec_file(tmp_path: Path) -> None:
    trace = str(COMMITTED / "trace.json")
    binary = tmp_path / "bin.py"
    binary.write_bytes(b"\x00\x01")
    error_line(invoke("replay", trace, "--spec", str(binary)), "OWN018", "bin.py")
    error_line(invoke("replay", trace, "--spec", str(tmp_path)), "OWN002", "is a directory")


def test_a_spec_path_that_is_missing_or_a_folder(tmp_path: Path) -> None:
    error_line(invoke("check", str(tmp_path / "nope.py")), "OWN002", "no such spec file")
    error_line(invoke("check", str(tmp_path)), "OWN002", "is a directory")
    error_line(invoke("check", ""), "OWN002")


# -- traces --------------------------------------------------------------------------------------


def trace_data() -> dict:
    return json.loads((COMMITTED / "trace.json").read_text())


def write_trace(tmp_path: Path, data: object) -> str:
    p = tmp_path / "t.json"
    p.write_text(data if isinstance(data, str) else json.dumps(data, indent=1))
    return str(p)


def mutate(**changes: object) -> dict:
    data = trace_data()
    data.update(changes)
    return data


def bad_step(**changes: object) -> dict:
    data = trace_data()
    data["steps"][2].update(changes)
    return data


TRACES = [
    ("not json", "{\n nope", "OWN020", "not JSON"),
    ("binary", "\udcff", "OWN020", ""),
    ("a list", [], "OWN020", "not a JSON object"),
    ("steps not a list", mutate(steps={}), "OWN020", "steps"),
    ("step not an object", mutate(steps=[1]), "OWN020", "step 1"),
    ("extra not an object", mutate(extra="x"), "OWN020", "extra"),
    ("params not ints", mutate(params={"requests": "two"}), "OWN020", "params"),
    ("initial state wrong", mutate(initial={}), "OWN019", "initial state"),
    ("unknown invariant", mutate(violation="no_such_invariant"), "OWN019", "no_such_invariant"),
    ("unknown action", bad_step(action="no_such_action"), "OWN019", "no_such_action"),
    ("unknown element", bad_step(args=["Z"]), "OWN019", "'Z'"),
    ("wrong arity", bad_step(args=[]), "OWN019", "argument"),
    ("unknown param", mutate(params={"nope": 1}), "OWN020", "nope"),
    ("huge param", mutate(params={"prefill_pool_tokens": 10**9}), "OWN017", "PrefillPage"),
]


@pytest.mark.parametrize(("data", "code", "needle"), [t[1:] for t in TRACES], ids=[t[0] for t in TRACES])
def test_bad_traces_on_replay(data: object, code: str, needle: str, tmp_path: Path) -> None:
    if data == "\udcff":
        p = tmp_path / "t.json"
        p.write_bytes(b"\x00\xff\xfe binary")
        path = str(p)
    else:
        path = write_trace(tmp_path, data)
    error_line(invoke("replay", path, "--spec", V21), code, path, needle)


@pytest.mark.parametrize(("data", "code", "needle"), [t[1:] for t in TRACES[:7]], ids=[t[0] for t in TRACES[:7]])
def test_bad_traces_on_render(data: object, code: str, needle: str, tmp_path: Path) -> None:
    if data == "\udcff":
        p = tmp_path / "t.json"
        p.write_bytes(b"\x00\xff\xfe binary")
        path = str(p)
    else:
        path = write_trace(tmp_path, data)
    error_line(invoke("render", path, "--format", "dot"), code, path, needle)


def test_a_trace_with_a_malformed_schema_still_renders_or_fails_in_one_line(tmp_path: Path) -> None:
    data = trace_data()
    data["extra"]["schema"] = {"pools": "nope", "requests": 3}
    res = invoke("render", write_trace(tmp_path, data), "--format", "dot")
    assert "Traceback" not in res.output
    assert res.exit_code in (0, 2), res.output
    if res.exit_code == 2:
        error_line(res, "OWN020", "schema")


def test_impossible_picks_are_a_divergence_not_a_crash(tmp_path: Path) -> None:
    # The picks fit the spec's shape (a list of values) but are not among the choices: the trace diverges.
    res = invoke("replay", write_trace(tmp_path, bad_step(picks=["x", {"y": 1}])), "--spec", V21)
    assert res.exit_code == 1, res.output
    assert res.output.startswith("DIVERGED") and "step 3" in res.output and "picks" in res.output


def test_a_trace_for_another_spec(tmp_path: Path) -> None:
    path = write_trace(tmp_path, mutate(spec="other_spec"))
    error_line(invoke("replay", path, "--spec", V21), "OWN021", "other_spec")
    path = write_trace(tmp_path, mutate(spec_path="nowhere/none.py"))
    error_line(invoke("replay", path), "OWN021", "nowhere/none.py")


# -- unknown flags and missing arguments -----------------------------------------------------------


@pytest.mark.parametrize("command", ["check", "list", "replay", "render", "test", "graph", "report", "prove", "mbt"])
def test_unknown_flags(command: str) -> None:
    error_line(invoke(command, "--no-such-flag"), "OWN013", "--no-such-flag")


@pytest.mark.parametrize("args", [["check"], ["replay"], ["render"], ["graph", TOY], ["prove"], ["mbt", TOY]])
def test_missing_arguments(args: list[str]) -> None:
    error_line(invoke(*args), "OWN013", "Missing")


def test_an_unknown_command() -> None:
    error_line(invoke("chekc", TOY), "OWN013", "chekc")


# -- ownership test ------------------------------------------------------------------------------


def test_test_param_unknown_to_a_spec_is_an_error_for_that_spec(tmp_path: Path) -> None:
    for name in ("toy_double_free.py", "toy_safe_counter.py"):
        shutil.copy(CORPUS / name, tmp_path / name)
    # toy_safe_counter declares `need`; toy_double_free does not.
    res = invoke("test", str(tmp_path), "-p", "need=1")
    assert "Traceback" not in res.output
    assert res.exit_code == 2, res.output
    assert "PASS  toy_safe_counter" in res.output
    assert "error[OWN010]" in res.output and "toy_double_free.py" in res.output and "'need'" in res.output
    assert "1 passed, 0 failed, 1 error" in res.output


def test_test_reports_every_spec_when_one_fails_to_load(tmp_path: Path) -> None:
    for name in ("toy_double_free.py", "toy_safe_counter.py"):
        shutil.copy(CORPUS / name, tmp_path / name)
    (tmp_path / "a_broken.py").write_text("from ownership import Spec\nspec = Spec('x'\n")
    res = invoke("test", str(tmp_path), "--json", str(tmp_path / "r.json"))
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    assert f"ERROR  {tmp_path / 'a_broken.py'}: error[OWN001]: {tmp_path / 'a_broken.py'}:2:" in res.output
    assert "PASS  toy_double_free" in res.output and "PASS  toy_safe_counter" in res.output
    assert "2 passed, 0 failed, 1 error" in res.output
    report = json.loads((tmp_path / "r.json").read_text())
    assert [s["status"] for s in report["specs"]] == ["error", "passed", "passed"]


# -- committed counterexamples -------------------------------------------------------------------


@pytest.mark.slow
def test_check_with_other_flags_never_overwrites_the_committed_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Work on a copy of the repository's layout so the real committed files are never at risk.
    shutil.copytree(COMMITTED, tmp_path / "counterexamples" / "sglang_disagg_v0_5_19")
    monkeypatch.chdir(tmp_path)
    committed = tmp_path / "counterexamples" / "sglang_disagg_v0_5_19"
    before = {p.name: p.read_bytes() for p in committed.iterdir()}
    runs = [
        ["-p", "requests=2", "-p", "prompt_tokens=5"],
        ["-i", "no_foreign_read"],
        ["--max-depth", "20"],
        ["--no-symmetry"],
        ["--engine", "bmc", "--max-depth", "15"],
    ]
    written = set()
    for flags in runs:
        res = invoke("check", V21, "--no-render", "--no-progress", *flags)
        assert res.exit_code == 1, res.output
        wrote = next(ln for ln in res.output.splitlines() if ln.strip().startswith("wrote "))
        folder = Path(wrote.split("wrote ", 1)[1].split(",")[0]).parent
        assert folder != Path("counterexamples/sglang_disagg_v0_5_19"), (flags, wrote)
        assert folder.parts[:2] == ("counterexamples", "sglang_disagg_v0_5_19"), wrote
        written.add(folder)
        assert f"ownership replay {folder / 'trace.json'}" in res.output
    assert len(written) == len(runs)  # each set of flags has a folder of its own
    after = {p.name: p.read_bytes() for p in committed.iterdir() if p.is_file()}
    assert after == before
    # The default run (the README's first command) still writes the committed files.
    res = invoke("check", V21, "--no-progress")
    assert res.exit_code == 1
    assert "wrote counterexamples/sglang_disagg_v0_5_19/trace.json" in res.output
    # Same counterexample (only spec_path differs: the spec lies outside this working directory).
    assert json.loads((committed / "trace.json").read_text())["steps"] == json.loads(before["trace.json"])["steps"]
    # --out names the folder: then it is written, whatever the flags.
    res = invoke("check", V21, "--no-render", "-i", "no_foreign_read", "--out", str(committed))
    assert res.exit_code == 1 and f"wrote {committed / 'trace.json'}" in res.output


def test_parameters_equal_to_the_defaults_are_the_committed_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    res = invoke("check", TOY, "--no-render", "-p", "pages=2")
    assert res.exit_code == 1
    assert "wrote counterexamples/toy_double_free/trace.json" in res.output


# -- the documentation ---------------------------------------------------------------------------


def test_every_error_code_is_in_the_documented_table_with_its_exit_status() -> None:
    import re

    from ownership.errors import Code, ExitCode, OwnershipError

    doc = (ROOT / "docs" / "cli.md").read_text()
    table = doc.split("## Error codes", 1)[1]
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| (OWN\d{3}) \| ([^|]+) \|", table, re.M)}
    for code in Code:
        assert code.label in rows, f"{code.label} ({code.value[1]}) is missing from docs/cli.md's error table"
        assert rows[code.label].strip() == code.value[1], code.label
    # The exit-status table names exactly the codes that exit 4.
    status_4 = next(line for line in doc.splitlines() if line.startswith("| 4 |"))
    internal = {c.label for c in Code if OwnershipError(c, "").exit_code is ExitCode.INTERNAL}
    assert set(re.findall(r"OWN\d{3}", status_4)) == internal


def test_minimize_names_a_free_parameter() -> None:
    error_line(
        invoke("check", V21, "--free", "prompt_tokens", "--minimize", "nope"), "OWN013", "--minimize nope", "not a --free"
    )


def test_engine_all_refuses_an_option_before_running_any_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    import ownership.engines.registry as engines

    ran: list[str] = []
    real = engines.run_engine
    monkeypatch.setattr(engines, "run_engine", lambda name, *a, **k: ran.append(name) or real(name, *a, **k))
    error_line(invoke("check", TOY, "--engine", "all", "--max-depth", "3"), "OWN013", "hypothesis")
    assert ran == []


@pytest.mark.parametrize("flags", [["--json", "afile/r.json"], ["--out", "afile"], []], ids=["--json", "--out", "default"])
def test_output_paths_are_checked_before_any_engine_runs(
    flags: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ownership.engines.registry as engines

    (tmp_path / "afile").write_text("")
    if not flags:
        (tmp_path / "counterexamples").write_text("")  # the default folder cannot be created
    ran: list[str] = []
    monkeypatch.setattr(engines, "run_engine", lambda name, *a, **k: ran.append(name))
    error_line(invoke("check", TOY, *flags), "OWN014")
    assert ran == []
