"""Silent misses in the modelling language: each spec here was PROVED (or accepted) without being checked.

* a forgotten ``@spec.action`` named in a module-level tuple, dict or ``__all__`` (OWN071 stayed quiet);
* a derived spec that redefines a base's plain helper with ``def``, which the base's actions never call (OWN008);
* negative values for counts and sizes declared without ``min=`` (OWN011 at the declaration; OWN007).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from ownership.cli import app
from ownership.core.result import Verdict
from ownership.engines.explore import explore
from ownership.errors import Code, OwnershipError
from ownership.lang.instance import Instance
from ownership.lang.loader import load_spec
from ownership.testing import run_check

TRUST = Path(__file__).resolve().parent / "trust"
TUPLE = TRUST / "lang_unregistered_in_tuple.py"
REDEFINED = TRUST / "lang_derived_redefines_helper.py"
NEGATIVE = TRUST / "lang_negative_params.py"


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def check(path: Path, *extra: str, tmp: Path):
    return invoke("check", str(path), "--no-render", "--no-progress", "--out", str(tmp / "ce"), *extra)


def line_of(path: Path, text: str) -> int:
    return next(i for i, ln in enumerate(path.read_text().splitlines(), start=1) if text in ln)


def one_error(res, code: str) -> str:  # noqa: ANN001 - a click Result
    """The run's only output line, an ``error[code]`` line (no traceback)."""
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error[{code}]: "), res.output
    assert "Traceback" not in res.output
    return lines[0]


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    path.write_text(text)
    return path


HEAD = '''from ownership import Enum, Ownership, Spec, require, safe, violates

spec = Spec("{name}", expect=safe())
Req = spec.domain("Req", 2, symmetric=True, names="AB")
own = Ownership(spec, requests=Req)
pool = own.pool("kv", 2)
Phase = Enum("Phase", "IDLE RUNNING DONE")
spec.var("phase", Phase, per=Req, init=Phase.IDLE)


@spec.action
def start(s, r: Req):
    require(s.phase[r] == Phase.IDLE)
    pool.write(s, r, pool.alloc(s, r, 1))
    s.phase[r] = Phase.RUNNING

'''


# -- OWN071: a forgotten @spec.action, whatever else names it -------------------------------------


def test_a_forgotten_action_named_in_a_tuple_is_reported_and_not_a_pass(tmp_path: Path) -> None:
    spec = load_spec(TUPLE)
    [w] = spec.warnings
    assert w.code is Code.UNREGISTERED_ACTION and w.subject == "finish"
    assert w.line == line_of(TUPLE, "def finish") and "add @spec.action" in w.message
    res = check(TUPLE, tmp=tmp_path)
    assert res.exit_code == 3, res.output
    assert res.stdout.startswith("PROVED (vacuous: 1 warning: OWN071)"), res.output
    folder = tmp_path / "specs"
    folder.mkdir()
    shutil.copy(TUPLE, folder / TUPLE.name)
    test = invoke("test", str(folder))
    assert test.exit_code == 1, test.output


@pytest.mark.parametrize("mention", [
    "HANDLERS = {'finish': finish}",
    "STEPS = [start, finish]",
    "print(finish.__name__, file=open(__import__('os').devnull, 'w'))",
    "KEEP = sorted([finish, start], key=lambda f: f.__name__)",
])
def test_a_module_level_mention_does_not_hide_a_forgotten_action(mention: str, tmp_path: Path) -> None:
    path = write(tmp_path, "mention", HEAD.format(name="mention") + (
        "\ndef finish(s, r: Req):\n    require(s.phase[r] == Phase.RUNNING)\n    pool.free(s, r)\n"
        "    s.phase[r] = Phase.DONE\n\n\n"
        f"{mention}\nown.invariants('no_double_ownership')\n"
    ))
    assert [w.subject for w in load_spec(path).warnings] == ["finish"], mention


def test_functions_the_spec_runs_are_not_reported(tmp_path: Path) -> None:
    """Called by name from an action or invariant, looped over by an action, kept by a declaration: quiet.

    Also a function that only a module-level tuple names, next to each (so the test fails where that
    tuple hid it).
    """
    path = write(tmp_path, "runs", HEAD.format(name="runs") + '''
def _release(s, r: Req):
    pool.free(s, r)


def _mark_done(s, r: Req):
    s.phase[r] = Phase.DONE


AFTER_RELEASE = (_mark_done,)


@spec.action
def finish(s, r: Req):
    require(s.phase[r] == Phase.RUNNING)
    _release(s, r)
    for step in AFTER_RELEASE:
        step(s, r)


def _running(s, r: Req):
    return s.phase[r] == Phase.RUNNING


@spec.invariant
def running_holds_a_page(s) -> bool:
    return all(bool(pool.pages_of(s, r)) for r in s.all(Req) if _running(s, r))


def idle(s):
    return all(s.phase[r] != Phase.RUNNING for r in s.all(Req))


def forgotten(s, r: Req):
    s.phase[r] = Phase.IDLE


TABLE = (forgotten, _running, idle)
own.invariants("no_double_ownership", "pages_returned_when_idle", idle=idle)
''')
    spec = load_spec(path)
    assert [w.subject for w in spec.warnings] == ["forgotten"]
    assert explore(Instance(spec)).verdict is Verdict.PROVED


# -- OWN008: a derived spec's plain def of a base function ----------------------------------------


def test_a_derived_spec_redefining_a_plain_helper_is_refused(tmp_path: Path) -> None:
    with pytest.raises(OwnershipError) as err:
        load_spec(REDEFINED)
    assert err.value.code is Code.REDEFINITION_IGNORED
    assert err.value.file == str(REDEFINED) and err.value.line == line_of(REDEFINED, "def release")
    assert "@spec.replace" in err.value.message and "lang_base_plain_helper.py:" in err.value.message
    line = one_error(check(REDEFINED, tmp=tmp_path), "OWN008")
    assert f"lang_derived_redefines_helper.py:{err.value.line}: function release redefines release" in line
    assert check(REDEFINED, tmp=tmp_path).exit_code == 2


BASE = HEAD + '''
{helper}def release(s, r):
    pool.free(s, r)


@spec.action
def finish(s, r: Req):
    require(s.phase[r] == Phase.RUNNING)
    pool.read(s, r, pool.pages_of(s, r))
    release(s, r)
    s.phase[r] = Phase.DONE


@spec.invariant
def done_holds_nothing(s) -> bool:
    return all(not pool.pages_of(s, r) for r in s.all(Req) if s.phase[r] == Phase.DONE)


own.invariants("no_double_ownership")
'''

DERIVED = '''import {base} as base
from ownership import require, violates

spec = base.spec.derive("{name}", expect=violates("done_holds_nothing"))


{body}
'''


@pytest.mark.parametrize(("helper", "body", "fix"), [
    ("", "def release(s, r):\n    pass\n", "declare the original with @spec.helper"),
    ("@spec.helper\n", "def release(s, r):\n    pass\n", "write it with @spec.replace to replace the @spec.helper release"),
    ("", "@spec.helper\ndef release(s, r):\n    pass\n", "a @spec.helper of this spec does not replace a plain function"),
    ("", "def finish(s, r: base.Req):\n    require(s.phase[r] == base.Phase.RUNNING)\n"
         "    s.phase[r] = base.Phase.DONE\n", "write it with @spec.replace to replace the action finish"),
])
def test_every_plain_redefinition_the_base_never_calls_is_refused(helper: str, body: str, fix: str,
                                                                   tmp_path: Path) -> None:
    base_name = f"base_{abs(hash((helper, body))):x}"
    write(tmp_path, base_name, BASE.format(name=base_name, helper=helper))
    derived = write(tmp_path, "derived", DERIVED.format(base=base_name, name="derived", body=body))
    with pytest.raises(OwnershipError) as err:
        load_spec(derived)
    assert err.value.code is Code.REDEFINITION_IGNORED, err.value
    first = next(i for i, ln in enumerate(body.splitlines(), start=1) if ln.startswith(("@", "def ")))
    assert fix in err.value.message and err.value.line == line_of(derived, body.splitlines()[0]) + first - 1
    assert "which changes nothing" in one_error(check(derived, tmp=tmp_path), "OWN008")


def test_a_replaced_helper_takes_effect_and_a_helper_of_its_own_is_fine(tmp_path: Path) -> None:
    """The way the refusal points to works; a same-named function the derived spec does call is not refused."""
    base_name = "base_replace_works"
    write(tmp_path, base_name, BASE.format(name=base_name, helper="@spec.helper\n"))
    replaced = write(tmp_path, "replaced", DERIVED.format(base=base_name, name="replaced", body=(
        "@spec.replace\ndef release(s, r):\n    pass\n")))
    assert explore(Instance(load_spec(replaced))).violated == "done_holds_nothing"
    own_helper = write(tmp_path, "own_helper", DERIVED.format(base="base_plain_own", name="own_helper", body=(
        "def release(s, r):\n    pass\n\n\n@spec.replace\ndef finish(s, r: base.Req):\n"
        "    require(s.phase[r] == base.Phase.RUNNING)\n    release(s, r)\n    s.phase[r] = base.Phase.DONE\n"
    )))
    write(tmp_path, "base_plain_own", BASE.format(name="base_plain_own", helper=""))
    assert explore(Instance(load_spec(own_helper))).violated == "done_holds_nothing"
    with pytest.raises(OwnershipError) as err:  # and the plain redefinition next to it is refused
        load_spec(write(tmp_path, "plain", DERIVED.format(base=base_name, name="plain", body=(
            "def release(s, r):\n    pass\n"))))
    assert err.value.code is Code.REDEFINITION_IGNORED


# -- parameters: counts and sizes -------------------------------------------------------------------


@pytest.mark.parametrize(("param", "value", "bound"), [
    ("prompt_tokens", "-3", ">= 0"), ("page_size", "-2", ">= 0"), ("requests", "0", ">= 1"), ("requests", "-1", ">= 1"),
])
def test_a_negative_count_on_the_command_line_is_refused_at_its_declaration(param: str, value: str, bound: str,
                                                                              tmp_path: Path) -> None:
    res = check(NEGATIVE, "-p", f"{param}={value}", tmp=tmp_path)
    assert res.exit_code == 2, res.output
    line = one_error(res, "OWN011")
    decl = line_of(NEGATIVE, f'spec.param("{param}"')
    assert f"lang_negative_params.py:{decl}: parameter {param}={value} is outside its range ({bound})" in line
    assert "declare min=" in line


def test_a_negative_count_through_the_python_api_is_refused() -> None:
    spec = load_spec(NEGATIVE)
    for params in ({"prompt_tokens": -3}, {"page_size": -2}, {"requests": 0}):
        with pytest.raises(OwnershipError) as err:
            Instance(spec, params)
        assert err.value.code is Code.BAD_PARAM and err.value.file == spec.params[next(iter(params))].file
        assert err.value.line == line_of(NEGATIVE, f'spec.param("{next(iter(params))}"')
        with pytest.raises(OwnershipError):
            run_check(NEGATIVE, params=params)
    wrongs: tuple[Any, ...] = (2.5, True, "3")  # converted silently before (int(2.5) == 2)
    for wrong in wrongs:
        with pytest.raises(OwnershipError) as err:
            Instance(spec, {"prompt_tokens": wrong})
        assert err.value.code is Code.BAD_PARAM and "is not an integer" in err.value.message
        with pytest.raises(OwnershipError) as err:
            run_check(NEGATIVE, params={"prompt_tokens": wrong})
        assert err.value.code is Code.BAD_PARAM, err.value


def test_declared_ranges_allow_what_they_say(tmp_path: Path) -> None:
    path = write(tmp_path, "ranges", '''from ownership import Spec, require

spec = Spec("ranges")
spec.param("offset", 0, min=-2)
spec.param("requests", 1, min=0)
spec.param("slots", 2)
Req = spec.domain("Req", "requests")
Slot = spec.domain("Slot", "slots")
spec.var("x", int, init=0)


@spec.action
def step(s):
    require(s.x < 1)
    s.x = s.x + 1


@spec.invariant
def small(s) -> bool:
    return s.x <= 1
''')
    spec = load_spec(path)
    assert Instance(spec, {"offset": -2, "requests": 0}).sizes["Req"] == 0
    assert spec.params["slots"].min == 1 and spec.params["offset"].min == -2
    with pytest.raises(OwnershipError) as err:
        Instance(spec, {"slots": 0})
    assert err.value.code is Code.BAD_PARAM and "it sizes domain Slot" in err.value.message
    assert err.value.line == line_of(path, 'spec.param("slots"')


@pytest.mark.parametrize(("decl", "says"), [
    ('spec.param("offset", -1)', "default -1 is outside its range (>= 0); declare min=-1"),
    ('spec.param("n", 2, min=3, max=2)', "min=3 is above max=2"),
    ('spec.param("n", 2, min=0.5)', "min= must be an int"),
    ('spec.param("requests", 0)\nReq = spec.domain("Req", "requests")', "whose default 0 leaves it empty"),
])
def test_a_declaration_that_cannot_hold_is_refused_where_it_is_written(decl: str, says: str, tmp_path: Path) -> None:
    path = write(tmp_path, "decl", f'from ownership import Spec\n\nspec = Spec("decl")\n{decl}\n')
    with pytest.raises(OwnershipError) as err:
        load_spec(path)
    assert err.value.code is Code.PARAM_DECLARATION and says in err.value.message, err.value
    assert err.value.file == str(path) and err.value.line == len(path.read_text().splitlines())


def test_an_inherited_parameter_is_refused_at_the_base_declaration(tmp_path: Path) -> None:
    base = write(tmp_path, "base_counts", NEGATIVE.read_text())
    derived = write(tmp_path, "derived_counts", "import base_counts as base\n\n"
                    "spec = base.spec.derive('derived_counts')\n")
    res = check(derived, "-p", "page_size=-2", tmp=tmp_path)
    assert res.exit_code == 2, res.output
    line = one_error(res, "OWN011")
    decl = line_of(base, 'spec.param("page_size"')
    assert f"base_counts.py:{decl}: parameter page_size=-2" in line


def test_a_derived_spec_redefining_a_base_constant_is_refused(tmp_path: Path) -> None:
    """``LIMIT = 2`` in the derived file leaves the base's actions reading the base's ``LIMIT``."""
    write(tmp_path, "base_limit", BASE.format(name="base_limit", helper="").replace(
        "pool.write(s, r, pool.alloc(s, r, 1))", "pool.write(s, r, pool.alloc(s, r, PAGES))").replace(
        "from ownership import", "PAGES = 1\nfrom ownership import"))
    derived = write(tmp_path, "derived_limit", "import base_limit as base\n\nPAGES = 2\n"
                    "SAME = 'unrelated'\nspec = base.spec.derive('derived_limit')\n")
    with pytest.raises(OwnershipError) as err:
        load_spec(derived)
    assert err.value.code is Code.REDEFINITION_IGNORED and err.value.line == 3, err.value
    assert "PAGES = 2 redefines PAGES of another spec (base_limit.py, where it is 1)" in err.value.message
