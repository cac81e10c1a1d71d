"""Mutant generation: small faults made in the spec file's own code from its AST, with ids stable across edits."""

from __future__ import annotations

import ast
import difflib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ownership.errors import Code, OwnershipError

KINDS = ("delete-require", "flip-compare", "swap-boolop", "negate-if", "drop-call", "const+1", "const-1")
"""Mutation operators, in the order mutants at the same place are listed."""


_DECORATORS = frozenset({"action", "replace", "helper", "invariant", "terminal"})

_FLIP: dict[type[ast.cmpop], tuple[str, str]] = {
    # op type -> (regex of the token in the source, replacement text)
    ast.Eq: (r"==", "!="),
    ast.NotEq: (r"!=", "=="),
    ast.Lt: (r"<(?!=)", ">="),
    ast.GtE: (r">=", "<"),
    ast.Gt: (r">(?!=)", "<="),
    ast.LtE: (r"<=", ">"),
    ast.In: (r"\bin\b", "not in"),
    ast.NotIn: (r"\bnot\s+in\b", "in"),
    ast.Is: (r"\bis\b", "is not"),
    ast.IsNot: (r"\bis\s+not\b", "is"),
}


@dataclass(frozen=True)
class Mutant:
    """One small fault in a spec file: where, what, and the whole mutated source."""

    id: str
    function: str
    role: str
    kind: str
    line: int
    offset: int
    old: str
    new: str
    source: str = field(repr=False, compare=False)

    @property
    def short_id(self) -> str:
        """The id without the line offset (survives edits that move the line)."""
        return f"{self.function} {self.kind}: {self.old} => {self.new}"

    def diff(self, original: str, filename: str = "spec") -> str:
        """Unified diff of the mutated line(s) against ``original``."""
        lines = difflib.unified_diff(
            original.splitlines(keepends=True), self.source.splitlines(keepends=True),
            fromfile=f"a/{filename}", tofile=f"b/{filename}", n=0,
        )
        return "".join(lines)


def _role(fn: ast.FunctionDef) -> str | None:
    for d in fn.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        if isinstance(target, ast.Attribute) and target.attr in _DECORATORS:
            return target.attr
    return None


class _Source:
    """The file as bytes per line: ``ast`` column offsets count UTF-8 bytes."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = text.encode("utf-8").splitlines(keepends=True)

    def _offset(self, line: int, col: int) -> int:
        return sum(len(x) for x in self.lines[: line - 1]) + col

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (self._offset(node.lineno, node.col_offset),  # type: ignore[attr-defined]
                self._offset(node.end_lineno, node.end_col_offset))  # type: ignore[attr-defined]

    def text_of(self, start: int, end: int) -> str:
        return b"".join(self.lines)[start:end].decode("utf-8")

    def splice(self, start: int, end: int, new: str) -> str:
        raw = b"".join(self.lines)
        return (raw[:start] + new.encode("utf-8") + raw[end:]).decode("utf-8")


def _keep_lines(old: str, new: str, *, statement: bool) -> str:
    """``new`` padded to as many lines as ``old`` so later line numbers do not move."""
    extra = old.count("\n") - new.count("\n")
    if extra <= 0:
        return new
    return new + "\n" * extra if statement else f"({new}{chr(10) * extra})"


def _collapse(text: str) -> str:
    return " ".join(text.split())


def _changed_lines(original: str, mutated: str) -> tuple[int, str, str]:
    """First changed line and the changed lines of both texts, whitespace collapsed."""
    a, b = original.splitlines(), mutated.splitlines()
    sm = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    old: list[str] = []
    new: list[str] = []
    first = 0
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            continue
        if not first:
            first = i1 + 1
        old += a[i1:i2]
        new += b[j1:j2]
    return first, _collapse(" ".join(old)), _collapse(" ".join(new))


def _edits(fn: ast.FunctionDef, src: _Source) -> Iterator[tuple[str, int, int, str]]:
    """(kind, start, end, replacement) for every mutation inside ``fn``'s body."""
    state = fn.args.args[0].arg if fn.args.args else "s"
    guards: list[ast.AST] = []
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    nodes = [n for stmt in body for n in ast.walk(stmt)]
    for node in nodes:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            call = node.value
            start, end = src.span(node)
            old = src.text_of(start, end)
            if isinstance(call.func, ast.Name) and call.func.id == "require":
                guards.extend(call.args)
                yield "delete-require", start, end, _keep_lines(old, "pass", statement=True)
            elif (call.args and isinstance(call.args[0], ast.Name) and call.args[0].id == state
                  and not (isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name)
                           and call.func.value.id == state)):
                # A vocabulary or helper call on the state: pool.free(s, r), transfer(s, ...).
                yield "drop-call", start, end, _keep_lines(old, "pass", statement=True)
        elif isinstance(node, ast.If):
            guards.append(node.test)
            start, end = src.span(node.test)
            old = src.text_of(start, end)
            yield "negate-if", start, end, f"not ({old})"
        elif isinstance(node, ast.Compare):
            edges = [node.left, *node.comparators]
            for i, op in enumerate(node.ops):
                pattern, repl = _FLIP[type(op)]
                gap_start, gap_end = src.span(edges[i])[1], src.span(edges[i + 1])[0]
                gap = src.text_of(gap_start, gap_end)
                m = re.search(pattern, gap)
                if m is None:  # pragma: no cover - the token is always between its operands
                    continue
                new_gap = gap[: m.start()] + repl + gap[m.end():]
                yield "flip-compare", gap_start, gap_end, new_gap
        elif isinstance(node, ast.BoolOp):
            word, repl = ("and", "or") if isinstance(node.op, ast.And) else ("or", "and")
            # Every operator keyword of this chain, so `a and b and c` becomes `a or b or c`
            # (flipping one of them would re-associate the chain).
            start, end = src.span(node)
            pieces: list[tuple[int, int, str]] = []
            for left, right in zip(node.values, node.values[1:], strict=False):
                g0, g1 = src.span(left)[1], src.span(right)[0]
                gap = src.text_of(g0, g1)
                m = re.search(rf"\b{word}\b", gap)
                if m is not None:
                    pieces.append((g0, g1, gap[: m.start()] + repl + gap[m.end():]))
            text = src.text_of(start, end)
            raw = text.encode("utf-8")
            for g0, g1, new_gap in reversed(pieces):
                raw = raw[: g0 - start] + new_gap.encode("utf-8") + raw[g1 - start:]
            yield "swap-boolop", start, end, f"({raw.decode('utf-8')})"
    for guard in guards:
        for node in ast.walk(guard):
            if isinstance(node, ast.Constant) and type(node.value) is int:
                start, end = src.span(node)
                yield "const+1", start, end, str(node.value + 1)
                if node.value > 0:
                    yield "const-1", start, end, str(node.value - 1)


def generate_mutants(path: str | Path) -> list[Mutant]:
    """Every mutant of the spec file ``path``, in a deterministic order (file order, then kind)."""
    p = Path(path)
    text = p.read_text(encoding="utf-8")
    try:
        tree = ast.parse(text, str(p))
    except SyntaxError as exc:
        raise OwnershipError(Code.SPEC_SYNTAX, f"syntax error: {exc.msg}", str(p), exc.lineno) from None
    src = _Source(text)
    found: list[tuple[int, int, int, Mutant]] = []
    seen: dict[str, int] = {}
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef):
            continue
        role = _role(fn)
        if role is None:
            continue
        for kind, start, end, replacement in _edits(fn, src):
            old_text = src.text_of(start, end)
            if replacement == old_text:
                continue
            mutated = src.splice(start, end, replacement)
            line, old, new = _changed_lines(text, mutated)
            offset = line - fn.lineno
            ident = f"{fn.name}+{offset} {kind}: {old} => {new}"
            count = seen.get(ident, 0) + 1
            seen[ident] = count
            if count > 1:
                ident += f" #{count}"
            mutant = Mutant(ident, fn.name, role, kind, line, offset, old, new, mutated)
            found.append((start, KINDS.index(kind), len(found), mutant))
    found.sort(key=lambda t: (t[0], t[1], t[2]))
    return [m for *_, m in found]
