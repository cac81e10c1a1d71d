"""What the Z3 engines cannot run, found by reading the spec's code before any engine does.

Under bmc and prove a state cell is a solver term, not a number.  The engines
accept almost every idiom the documentation teaches on such terms (tables
indexed by a value held in state, loops over returned page sets, ``and``/
``or``/``if``), but one thing cannot work in Python at all: a *Python*
sequence (a module constant, a local list) indexed by a value read from the
state, or ``range()`` of one.  Python asks the term for a concrete int there,
and there is none.  bmc refuses such a spec with OWN006 when it reaches the
line; :func:`symbolic_obstacles` finds the same lines by reading the code,
so the explorer can say so at load time in the same words
(:data:`INDEX_HINT`) instead of leaving the user to find out later.

The reading is deliberately simple: a name is *state-derived* when it is
assigned from an expression that reads ``s.<variable>`` (or another
state-derived name), and a subscript of anything that is not a state
variable, or a ``range()``, with a state-derived index is reported.  Loops
over ``s.all(Domain)`` give domain elements, which are concrete under every
engine.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

INDEX_HINT = ("index with domain elements or use the ownership vocabulary "
              "(for a constant table: `for q in s.all(D): if value == q: ... TABLE[q]`)")
"""How to fix a state value used as a Python index; bmc's OWN006 message ends with the same words."""

_CONCRETE_ATTRS = frozenset({"all", "params", "recording", "name_of", "checks", "emit", "flag", "terminal"})
"""Attributes of the state view whose values are concrete under every engine."""


@dataclass(frozen=True)
class Obstacle:
    """A line the Z3 engines cannot run, and why."""

    file: str
    line: int
    function: str
    message: str


def symbolic_obstacles(spec: Any) -> list[Obstacle]:
    """Every line of the spec's actions, helpers, invariants and terminal predicate that bmc and prove cannot run."""
    out: list[Obstacle] = []
    seen: set[int] = set()
    functions: list[tuple[str, Callable[..., Any]]] = [(f"action {a.name}", a.fn) for a in spec.actions.values()]
    functions += [(f"invariant {i.name}", i.fn) for i in spec.invariants.values()]
    functions += [(f"helper {n}", fn) for n, fn in spec.helpers.items()]
    if spec.done is not None:
        functions.append(("the terminal predicate", spec.done))
    for what, fn in functions:
        out.extend(_obstacles_in(fn, what, seen))
    return sorted(out, key=lambda o: (o.file, o.line))


def _obstacles_in(fn: Callable[..., Any], what: str, seen: set[int]) -> Iterator[Obstacle]:
    fn = getattr(fn, "__wrapped__", fn)
    code = getattr(fn, "__code__", None)
    if code is None or id(code) in seen:
        return
    seen.add(id(code))
    try:
        lines, first = inspect.getsourcelines(fn)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError):
        return  # no source to read (a lambda in a REPL, a C function): nothing to say
    func = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)), None)
    if func is None or not func.args.args:
        return
    state = func.args.args[0].arg
    tainted = _state_derived(func, state)
    for node in ast.walk(func):
        index: ast.expr | None = None
        if isinstance(node, ast.Subscript) and not _rooted_at(node.value, state):
            index = node.slice
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range":
            index = next((a for a in node.args if _reads_state(a, state, tainted)), None)
        if index is not None and isinstance(node, ast.expr) and _reads_state(index, state, tainted):
            target = ast.unparse(node.value) if isinstance(node, ast.Subscript) else "range()"
            yield Obstacle(code.co_filename, first + node.lineno - 1, what,
                           f"{what} uses a value read from the state as a Python index ({ast.unparse(node)}): "
                           f"{target} is not a state variable, so bmc and prove cannot run it; {INDEX_HINT}")
    # Plain functions of the spec's module that this one calls are part of it.
    env = getattr(fn, "__globals__", {})
    for name in code.co_names:
        inner = env.get(name)
        if inspect.isfunction(inner) and inner.__module__ == fn.__module__:
            yield from _obstacles_in(inner, f"helper {name}", seen)


def _rooted_at(expr: ast.expr, state: str) -> bool:
    """``s.x``, ``s.x[r]``, ``s.x[r][p]``: a state variable (which the engines index symbolically)."""
    while isinstance(expr, ast.Subscript):
        expr = expr.value
    return isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == state


def _reads_state(expr: ast.AST, state: str, tainted: set[str]) -> bool:
    for node in ast.walk(expr):
        if isinstance(node, ast.Name) and node.id in tainted:
            return True
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == state
                and node.attr not in _CONCRETE_ATTRS):
            return True
    return False


def _state_derived(func: ast.FunctionDef | ast.AsyncFunctionDef, state: str) -> set[str]:
    """Local names assigned (directly or through others) from a state read, to a fixed point."""
    tainted: set[str] = set()
    while True:
        before = len(tainted)
        for node in ast.walk(func):
            targets: list[ast.expr] = []
            value: ast.expr | None = None
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, ast.AnnAssign | ast.AugAssign) and node.value is not None:
                targets, value = [node.target], node.value
            elif isinstance(node, ast.For | ast.comprehension):
                targets, value = [node.target], node.iter
                if _over_domain(value, state):
                    continue
            elif isinstance(node, ast.NamedExpr):
                targets, value = [node.target], node.value
            if value is not None and _reads_state(value, state, tainted):
                for t in targets:
                    tainted.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
        if len(tainted) == before:
            return tainted


def _over_domain(expr: ast.expr, state: str) -> bool:
    """``s.all(D)`` or ``range(<no state>)``: a loop whose elements are concrete under every engine."""
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "all":
        return isinstance(expr.func.value, ast.Name) and expr.func.value.id == state
    return False
