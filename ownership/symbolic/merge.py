"""Spec functions rewritten so that ``and``/``or``/``not`` and fall-through ``if``\\ s merge instead of forking.

Under the Z3 engines every ``bool()`` of a solver term forks the running
path (:mod:`ownership.symbolic.paths`), so ``all(a or b for r in ...)`` or
``for r in ...: if c[r]: pool.free(s, r)`` costs 2**n runs of the function.
The Z3 engines therefore run a rewritten copy of each action, invariant and
terminal predicate (same file, same line numbers, same closure values):

* ``a or b`` / ``a and b`` evaluate ``b`` under the condition that decides
  it, and combine both into one term when both are truth values;
* ``not x`` of a solver term is one term;
* ``all``/``any`` combine solver terms into one conjunction/disjunction, and
  the filter of their generator (``all(x for r in R if c)``) joins the
  element (``(not c) or x``) instead of forking per element;
* ``if c: A else: B`` whose branches fall through (no ``return``,
  ``break``, ``continue``, ``yield``, no local name used after the ``if``)
  runs both branches *guarded*: each write becomes ``If(guard, new, old)``,
  a ``require`` failing inside a branch disables the step only where the
  guard holds, and choices made inside a branch are replayed only where it
  was taken (see :class:`Guard`).

A concrete condition (a Python bool, or a term that simplifies to a
constant) takes the original code path.  Functions whose source cannot be
read run unchanged (they fork as before).
"""

from __future__ import annotations

import ast
import builtins
import copy
import inspect
import textwrap
import types
from collections.abc import Callable, Iterable
from typing import Any

import z3

from ownership.lang.guard import Disabled
from ownership.symbolic.paths import PathExplorer
from ownership.symbolic.terms import Sym

_PREFIX = "_ownership_merge_"


def _cond(x: Any) -> z3.BoolRef | None:
    """The truth of ``x`` as a non-constant Boolean term of a merging path explorer, else ``None``."""
    if not isinstance(x, Sym) or not isinstance(x.ex, PathExplorer) or not x.ex.merging:
        return None
    e = x.e
    if not z3.is_bool(e):
        e = e != z3.BitVecVal(0, e.size()) if isinstance(e, z3.BitVecRef) else e != 0
    e = z3.simplify(e)
    if z3.is_true(e) or z3.is_false(e):
        return None
    return e


def _truth(x: Any) -> z3.BoolRef | None:
    """``x`` as a Boolean term if it is a truth value (Python bool or Boolean ``Sym``), else ``None``."""
    if isinstance(x, bool):
        return z3.BoolVal(x)
    if isinstance(x, Sym) and z3.is_bool(x.e):
        return x.e
    return None


class Guard:
    """Run a block only where ``cond`` holds, on the same path (the ``with`` of a rewritten ``if``).

    While the block runs, ``cond`` is on the path condition and on the
    explorer's guard stack (the symbolic view guards every write with it).
    On leaving, what the block added to the path condition and to the
    assumptions holds only under ``cond``, and its recorded choices are
    replayed only where ``cond`` held.  A ``Disabled`` raised in the block
    (a failing ``require``) makes the path take ``not cond`` instead.
    """

    def __init__(self, ex: PathExplorer, cond: z3.BoolRef) -> None:
        self.ex = ex
        self.cond = cond

    def __enter__(self) -> Guard:
        ex, view = self.ex, self.ex.view
        self.pc_len = len(ex.pc)
        self.constraints_len = len(view.constraints) if view is not None else 0
        self.picks_len = len(view.picks) if view is not None else 0
        self.decided = dict(ex.decided)  # what the block decides holds only under cond
        ex.pc.append(self.cond)
        ex.guards.append(self.cond)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> bool:
        ex, view, g = self.ex, self.ex.view, self.cond
        ex.guards.pop()
        ex.decided = self.decided
        if kind is not None and not issubclass(kind, Disabled):
            return False
        added = ex.pc[self.pc_len + 1:]
        del ex.pc[self.pc_len:]
        if kind is not None:
            ex.pc.append(z3.Not(g))  # the block's require failed: this path is the one where cond is false
        else:
            ex.pc.extend(z3.Implies(g, e) for e in added)
        if view is not None:
            view.constraints[self.constraints_len:] = [z3.Implies(g, c) for c in view.constraints[self.constraints_len:]]
            view.picks[self.picks_len:] = [_guarded_pick(g, p) for p in view.picks[self.picks_len:]]
        return kind is not None


def _guarded_pick(g: z3.BoolRef, pick: Any) -> Callable[[Callable[[z3.ExprRef], Any]], list[Any]]:
    """A recorded choice replayed only in models where the guard ``g`` held."""

    def extract(ev: Callable[[z3.ExprRef], Any]) -> list[Any]:
        if not z3.is_true(ev(g)):
            return []
        return list(pick(ev)) if callable(pick) else [pick]

    return extract


def merge_if(c: Any) -> Guard | None:
    """The guard of a rewritten ``if`` (``None``: the condition is concrete, run the original ``if``)."""
    e = _cond(c)
    return None if e is None else Guard(c.ex, e)


def when(guard: Guard, taken: bool) -> Guard:
    """The guard of one branch of a merged ``if``."""
    return guard if taken else Guard(guard.ex, z3.Not(guard.cond))


def bool_op(is_and: bool, *thunks: Callable[[], Any]) -> Any:
    """``a and b ...`` / ``a or b ...`` with the later operands evaluated under the condition that needs them."""
    x = thunks[0]()
    if len(thunks) == 1:
        return x
    c = _cond(x)
    if c is None:  # concrete: Python's short circuit
        if bool(x) != is_and:
            return x
        return bool_op(is_and, *thunks[1:])
    xt = _truth(x)
    with Guard(x.ex, c if is_and else z3.Not(c)):
        y = bool_op(is_and, *thunks[1:])
    yt = _truth(y)
    if xt is None or yt is None:  # not both truth values: keep Python's value semantics (forks)
        return (y if x else x) if is_and else (x if x else y)
    return Sym(z3.And(xt, yt) if is_and else z3.Or(xt, yt), x.ex)


def not_(x: Any) -> Any:
    """``not x``: one term for a solver term."""
    c = _cond(x)
    if c is None:
        return not x
    return Sym(z3.Not(c), x.ex)


def all_(items: Iterable[Any]) -> Any:
    """``all(...)`` whose solver-term elements become one conjunction."""
    terms: list[z3.BoolRef] = []
    ex: Any = None
    for x in items:
        c = _cond(x)
        if c is None:
            if not x:
                return False
            continue
        terms.append(c)
        ex = x.ex
    return Sym(z3.And(terms), ex) if terms else True


def any_(items: Iterable[Any]) -> Any:
    """``any(...)`` whose solver-term elements become one disjunction."""
    terms: list[z3.BoolRef] = []
    ex: Any = None
    for x in items:
        c = _cond(x)
        if c is None:
            if x:
                return True
            continue
        terms.append(c)
        ex = x.ex
    return Sym(z3.Or(terms), ex) if terms else False


HELPERS: dict[str, Any] = {
    f"{_PREFIX}bool_op": bool_op, f"{_PREFIX}not": not_, f"{_PREFIX}if": merge_if, f"{_PREFIX}when": when,
    "all": all_, "any": any_,
}


# -- the rewriting ---------------------------------------------------------------------------


_EXITS = (ast.Return, ast.Break, ast.Continue, ast.Yield, ast.YieldFrom, ast.Await, ast.Raise, ast.Global, ast.Nonlocal)


def _stored(nodes: Iterable[ast.AST]) -> set[str]:
    out: set[str] = set()
    for n in nodes:
        for sub in ast.walk(n):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, (ast.Store, ast.Del)):
                out.add(sub.id)
            elif isinstance(sub, (ast.FunctionDef, ast.ClassDef)):
                out.add(sub.name)
            elif isinstance(sub, (ast.Import, ast.ImportFrom)):
                out.update((a.asname or a.name).split(".")[0] for a in sub.names)
    return out


def _loaded_outside(fn: ast.AST, stmt: ast.If) -> set[str]:
    inside = {id(n) for n in ast.walk(stmt)}
    return {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and id(n) not in inside}


def _falls_through(stmt: ast.If, fn: ast.AST) -> bool:
    """Both branches end by falling through, and the names they bind are not read outside them."""
    body = [*stmt.body, *stmt.orelse]
    for n in body:
        for sub in ast.walk(n):
            if isinstance(sub, _EXITS):
                return False
            # a loop's own break/continue are fine, but ast.walk cannot tell: be conservative
    return not (_stored(body) & _loaded_outside(fn, stmt))


def _calls_any(stmt: ast.If, names: frozenset[str]) -> bool:
    """A branch calls one of ``names`` by its plain name."""
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in names
               for b in (*stmt.body, *stmt.orelse) for n in ast.walk(b))


class _Rewrite(ast.NodeTransformer):
    def __init__(self, fn: ast.AST, merge_ifs: bool, spec_functions: frozenset[str] = frozenset()) -> None:
        self.fn = fn
        self.merge_ifs = merge_ifs
        self.spec_functions = spec_functions
        """Plain functions of the spec's own module: their bodies may fork (they are not rewritten)."""
        self.count = 0

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        self.generic_visit(node)
        if any(isinstance(n, (ast.NamedExpr, ast.Yield, ast.YieldFrom, ast.Await)) for v in node.values for n in ast.walk(v)):
            return node
        thunks = [ast.Lambda(args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
                             body=v) for v in node.values]
        call = ast.Call(func=ast.Name(f"{_PREFIX}bool_op", ast.Load()),
                        args=[ast.Constant(isinstance(node.op, ast.And)), *thunks], keywords=[])
        return ast.copy_location(call, node)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        # all(x for r in R if c) is all((not c) or x for r in R), any(x for r in R if c) is any(c and x ...):
        # the filter's test then merges into the element instead of forking per element.
        if (isinstance(node.func, ast.Name) and node.func.id in ("all", "any") and len(node.args) == 1
                and not node.keywords and isinstance(node.args[0], (ast.GeneratorExp, ast.ListComp))):
            comp = node.args[0]
            last = comp.generators[-1]
            if last.ifs and not last.is_async:
                test = last.ifs[0] if len(last.ifs) == 1 else ast.BoolOp(op=ast.And(), values=last.ifs)
                if node.func.id == "all":
                    elt: ast.expr = ast.BoolOp(op=ast.Or(), values=[ast.UnaryOp(op=ast.Not(), operand=test), comp.elt])
                else:
                    elt = ast.BoolOp(op=ast.And(), values=[test, comp.elt])
                comp.elt = ast.copy_location(elt, comp.elt)
                last.ifs = []
        self.generic_visit(node)
        return node

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        if not isinstance(node.op, ast.Not):
            return node
        return ast.copy_location(ast.Call(func=ast.Name(f"{_PREFIX}not", ast.Load()), args=[node.operand], keywords=[]), node)

    def visit_If(self, node: ast.If) -> Any:
        # A branch calling a function of the spec's module keeps forking: that function's own
        # conditions fork inside the merged branch, and both branches' forks would multiply.
        mergeable = self.merge_ifs and _falls_through(node, self.fn) and not _calls_any(node, self.spec_functions)
        self.generic_visit(node)
        if not mergeable:
            return node
        self.count += 1
        c, g = f"{_PREFIX}c{self.count}", f"{_PREFIX}g{self.count}"

        def name(n: str, store: bool = False) -> ast.Name:
            return ast.Name(n, ast.Store() if store else ast.Load())

        def branch(taken: bool, body: list[ast.stmt]) -> ast.With:
            guard = ast.Call(func=name(f"{_PREFIX}when"), args=[name(g), ast.Constant(taken)], keywords=[])
            return ast.With(items=[ast.withitem(context_expr=guard)], body=body or [ast.Pass()])

        out = [
            ast.Assign(targets=[name(c, True)], value=node.test),
            ast.Assign(targets=[name(g, True)],
                       value=ast.Call(func=name(f"{_PREFIX}if"), args=[name(c)], keywords=[])),
            ast.If(test=ast.Compare(left=name(g), ops=[ast.IsNot()], comparators=[ast.Constant(None)]),
                   body=[branch(True, node.body), branch(False, node.orelse)],
                   orelse=[ast.If(test=name(c), body=node.body, orelse=node.orelse)]),
        ]
        for stmt in out:
            ast.copy_location(stmt, node)
        return out


def _build(fdef: ast.FunctionDef, name: str, free: tuple[str, ...], first: int, file: str) -> types.CodeType | None:
    """A module defining a factory that takes ``fn``'s free variables and returns the function ``fdef``."""
    factory = ast.FunctionDef(
        name=f"{_PREFIX}factory",
        args=ast.arguments(posonlyargs=[], args=[ast.arg(arg=v) for v in free], kwonlyargs=[], kw_defaults=[], defaults=[]),
        body=[fdef, ast.Return(ast.Name(name, ast.Load()))], decorator_list=[], returns=None,
    )
    module = ast.Module(body=[factory], type_ignores=[])
    ast.fix_missing_locations(module)
    ast.increment_lineno(module, first - 1)
    try:
        return compile(module, file, "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return None


def _function_code(module: types.CodeType, name: str) -> bytes | None:
    """The bytecode of function ``name`` inside the factory of a module built by :func:`_build`."""
    for factory in module.co_consts:
        if isinstance(factory, types.CodeType):
            for c in factory.co_consts:
                if isinstance(c, types.CodeType) and c.co_name == name:
                    return c.co_code
    return None


def rewrite(fn: Callable[..., Any], *, merge_ifs: bool = True) -> Callable[..., Any]:
    """``fn`` rewritten as the module docstring says, or ``fn`` itself if its source cannot be read."""
    code = getattr(fn, "__code__", None)
    if code is None or fn.__name__ == "<lambda>":
        return fn
    try:
        lines, first = inspect.getsourcelines(fn)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError, IndentationError):
        return fn
    if not tree.body or not isinstance(tree.body[0], ast.FunctionDef) or tree.body[0].name != fn.__name__:
        return fn
    fdef = tree.body[0]
    fdef.decorator_list = []
    # The source read must be the code that runs (a file rewritten since it was imported is not).
    plain = _build(copy.deepcopy(fdef), fn.__name__, code.co_freevars, first, code.co_filename)
    if plain is None or _function_code(plain, fn.__name__) != code.co_code:
        return fn
    module = fn.__module__
    spec_functions = frozenset(n for n, v in fn.__globals__.items()
                               if isinstance(v, types.FunctionType) and v.__module__ == module)
    rewriter = _Rewrite(fdef, merge_ifs, spec_functions)
    fdef = rewriter.visit(fdef)
    compiled = _build(fdef, fn.__name__, code.co_freevars, first, code.co_filename)
    if compiled is None:
        return fn
    glob = dict(fn.__globals__)
    # (a module that defines its own all/any keeps them)
    glob.update({k: v for k, v in HELPERS.items() if k.startswith(_PREFIX) or k not in glob})
    glob.setdefault("__builtins__", builtins)
    try:
        exec(compiled, glob)  # noqa: S102 - the spec's own function, recompiled
        cells = [c.cell_contents for c in (fn.__closure__ or ())]
        new = glob[f"{_PREFIX}factory"](*cells)
    except Exception:  # noqa: BLE001 - an unusual function (empty closure cell, ...): run it as it is
        return fn
    if not isinstance(new, types.FunctionType):
        return fn
    new.__dict__.update(fn.__dict__)
    return new
