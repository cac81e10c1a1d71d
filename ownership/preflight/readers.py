"""Reading a deployment's real configuration: SGLang and vLLM startup logs and SGLang's server-info JSON.

The formats are the engines' own (each reader names the code that prints
what it reads):

* SGLang ``server_args=...``: ``entrypoints/engine.py`` logs
  ``f"server_args={server_args.resolved_dict()}"`` (0.5.20 engine.py:276,
  0.5.21 engine.py:289; 0.5.23 passes the dict through
  ``_server_args_for_logging``), a Python dict literal.  Older releases
  printed the dataclass repr, ``logger.info(f"{server_args=}")`` (0.5.4
  engine.py:766, 0.5.11 engine.py:679): ``server_args=ServerArgs(k=v, ...)``.
  Both are read; a repr value that is not Python (``<... at 0x...>``) costs
  only that field.
* SGLang's scheduler startup line, ``managers/scheduler.py`` (0.5.20
  scheduler.py:1226, 0.5.21 :1229, 0.5.22 :1233, 0.5.23 :1268):
  ``max_total_num_tokens=..., chunked_prefill_size=..., max_prefill_tokens=...,
  max_running_requests=..., context_len=..., available_gpu_mem=... GB``.
* SGLang ``GET /server_info`` (``entrypoints/http_server.py server_info``):
  ``resolved_dict()`` merged with the scheduler's init info
  (``max_total_num_tokens``, ``max_req_input_len``) and ``version``.
* vLLM 0.33.0: ``v1/engine/core.py`` logs ``Initializing a V1 LLM engine
  (v%s) with config: %s`` (``VllmConfig.__str__``, with ``max_seq_len=``), and
  ``v1/core/kv_cache_utils.py update_kv_cache_capacity`` logs ``%s KV cache
  size: %s tokens, Maximum concurrency for %s tokens per request: %.2fx``.

A whole startup log, a file holding only those lines, or the JSON are all
accepted.  Token counts are read in any spelling an engine or an operator's
copy uses (``1114112``, ``1,114,112``, ``1_114_112``, ``1114112.0``,
``1.114112e6``); SGLang's own lines print plain integers, vLLM's KV line
thousands separators.  A default launch's ``/server_info`` has
``context_length: null``; the context length is then derived from
``max_req_input_len`` where that is the context's limit, and otherwise the
error says what is missing.  Every failure is a located :class:`~ownership.errors.OwnershipError`.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ownership.errors import Code, OwnershipError

#: The scheduler's startup line, from its first field: ``key=value`` pairs joined by ``", "``.
_SCHED = re.compile(r"\bmax_total_num_tokens=")
#: One ``key=value`` field of a line of such pairs; a value runs to the next ``", key="`` (a thousands
#: separator has no space after its comma, so ``1,114,112`` stays one value).
_FIELD = re.compile(r"(\w+)=(.*?)(?=, \w+=|$)")
_VLLM_INIT = re.compile(r"Initializing a V1 LLM engine \(v([^)\s]+)\) with config: .*?\bmax_seq_len=([^,\s]+)")
_VLLM_KV = re.compile(r"KV cache size: (\S+) tokens, Maximum concurrency for (\S+) tokens per request")
#: How a whole number may be spelled: ``1114112``, ``1,114,112``, ``1_114_112``, ``1114112.0``, ``1.1e6``.
_NUMBER = re.compile(r"[+-]?(?:\d{1,3}(?:,\d{3})+|\d+(?:_\d+)*)(?:\.\d*)?(?:[eE][+-]?\d+)?")
#: The server-argument fields preflight reads (names as in SGLang's ServerArgs).
SERVER_ARG_KEYS = ("context_length", "page_size", "disaggregation_mode", "disaggregation_transfer_backend",
                   "allow_auto_truncate", "disaggregation_enable_kv_checksum", "dcp_size", "enable_kv_cache_sharding",
                   "dllm_algorithm", "tp_size", "pp_size")


@dataclass(frozen=True)
class NodeConfig:
    """What one node's files say: the values preflight maps, and the line each came from."""

    engine: str
    file: str
    role: str
    context_len: int
    pool_tokens: int
    page_size: int | None = None
    max_req_input_len: int | None = None
    version: str | None = None
    transfer_backend: str | None = None
    allow_auto_truncate: bool = False
    lines: dict[str, int] = field(default_factory=dict)
    kv_checksum: bool = False
    """``--disaggregation-enable-kv-checksum`` (SGLang 0.5.21+; absent from older releases' arguments)."""
    dcp_size: int = 1
    """``--dcp-size``: decode context parallelism, which multiplies the admission limit (SGLang 0.5.17-0.5.20)."""
    tp_size: int = 1
    pp_size: int = 1
    """Tensor and pipeline parallelism: SGLang 0.5.23 skips the KV checksum between nodes whose layouts differ."""
    unprinted_limit_terms: tuple[str, ...] = ()
    """Settings on which the node's admission limit depends that no log prints (KV-cache sharding, a dLLM)."""

    def where(self, key: str) -> str:
        """``file:line`` of the line a value was read from (the file alone if unknown)."""
        line = self.lines.get(key)
        return f"{self.file}:{line}" if line else self.file


def read_node(path: Path) -> NodeConfig:
    """Read one node's configuration from a startup log, a file of its lines, or server-info JSON."""
    text = _text(path)
    stripped = text.lstrip()
    if stripped.startswith("{") and not stripped.startswith("{'"):
        return _from_json(str(path), text)
    return _from_log(str(path), text)


def _text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except IsADirectoryError:
        raise OwnershipError(Code.PREFLIGHT_UNREADABLE, "is a directory; name a log or JSON file", str(path)) from None
    except OSError as exc:
        raise OwnershipError(Code.PREFLIGHT_UNREADABLE, f"cannot read: {exc.strerror or exc}", str(path)) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise OwnershipError(Code.PREFLIGHT_UNREADABLE, f"not UTF-8 text (byte 0x{data[exc.start]:02x}); "
                             "pass the engine's log or the server-info JSON", str(path), line) from None


def whole_number(text: str) -> int | None:
    """``text`` as a whole number, in any spelling the engines or an operator's paste use; None if it is not one.

    SGLang prints plain integers, vLLM thousands separators (``f"{n:,}"``); a
    copy through a spreadsheet or a JSON float gives ``1114112.0`` or
    ``1.114112e6``.  A fraction (``1114112.5``) is not a number of tokens.
    """
    text = text.strip()
    if _NUMBER.fullmatch(text) is None:
        return None
    plain = text.replace(",", "").replace("_", "")
    try:
        return int(plain)
    except ValueError:
        pass
    try:
        value = float(plain)
    except ValueError:  # pragma: no cover - the pattern admits only float syntax
        return None
    return int(value) if value.is_integer() else None


def _count(file: str, line: int | None, key: str, text: str, where: str) -> int:
    """The token count ``text`` of field ``key``, or a located error that quotes it."""
    value = whole_number(text)
    if value is None:
        raise OwnershipError(Code.PREFLIGHT_MISSING, f"{where} {key}={text.strip()!r} is not a whole number of "
                             "tokens", file, line)
    return value


class _Seen:
    """Values found so far in one file; a second, different value of the same field is a contradiction."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.values: dict[str, Any] = {}
        self.lines: dict[str, int] = {}

    def put(self, key: str, value: Any, line: int) -> None:
        if key in self.values and self.values[key] != value:
            raise OwnershipError(Code.PREFLIGHT_CONTRADICTORY, f"{key} is {value!r} here but {self.values[key]!r} at "
                                 f"line {self.lines[key]}: one file must describe one node's one start", self.file, line)
        self.values.setdefault(key, value)
        self.lines.setdefault(key, line)


def _from_log(file: str, text: str) -> NodeConfig:
    seen = _Seen(file)
    for n, line in enumerate(text.splitlines(), 1):
        if "server_args=" in line:
            for key, value in _server_args(file, n, line.split("server_args=", 1)[1]).items():
                seen.put(key, value, n)
        if (m := _SCHED.search(line)) is not None:
            for key, value in _scheduler_fields(file, n, line[m.start():]).items():
                seen.put(key, value, n)
        if (m := _VLLM_INIT.search(line)) is not None:
            seen.put("vllm_version", m.group(1), n)
            seen.put("max_model_len", _count(file, n, "max_seq_len", m.group(2), "the vLLM config's"), n)
        if (m := _VLLM_KV.search(line)) is not None:
            seen.put("kv_cache_tokens", _count(file, n, "KV cache size", m.group(1), "the vLLM line's"), n)
            seen.put("max_model_len", _count(file, n, "tokens per request", m.group(2), "the vLLM line's"), n)
    v = seen.values
    if "vllm_version" in v or "kv_cache_tokens" in v:
        return _vllm(file, seen)
    if "max_total_num_tokens" not in v:
        what = "a server_args= line but no" if "page_size" in v else "no SGLang server_args= line and no"
        raise OwnershipError(Code.PREFLIGHT_MISSING, f"{what} scheduler line with max_total_num_tokens=... and "
                             "context_len=... (printed by managers/scheduler.py at startup), and no vLLM "
                             "'Initializing a V1 LLM engine' line: not a startup log of a supported engine", file)
    if "page_size" not in v:
        raise OwnershipError(Code.PREFLIGHT_MISSING, "a scheduler line but no server_args= line (SGLang logs it at "
                             "startup; preflight needs its page_size and disaggregation_mode)", file,
                             seen.lines["max_total_num_tokens"])
    ctx = v.get("context_length")
    if ctx is not None and ctx != v["context_len"]:
        raise OwnershipError(Code.PREFLIGHT_CONTRADICTORY, f"scheduler line says context_len={v['context_len']} but "
                             f"server_args has context_length={ctx} (line {seen.lines['context_length']})",
                             file, seen.lines["context_len"])
    return _sglang(file, seen, int(v["context_len"]), int(v["max_total_num_tokens"]), None, None)


def _scheduler_fields(file: str, line: int, text: str) -> dict[str, int]:
    """``max_total_num_tokens`` and ``context_len`` of the scheduler's startup line (``text`` starts at the first)."""
    fields = {m.group(1): m.group(2) for m in _FIELD.finditer(text)}
    if "context_len" not in fields:
        raise OwnershipError(Code.PREFLIGHT_MISSING, "the scheduler line has max_total_num_tokens= but no "
                             "context_len=: is the line cut short?", file, line)
    return {"max_total_num_tokens": _count(file, line, "max_total_num_tokens", fields["max_total_num_tokens"],
                                           "the scheduler line's"),
            "context_len": _count(file, line, "context_len", fields["context_len"], "the scheduler line's")}


def _server_args(file: str, line: int, rest: str) -> dict[str, Any]:
    """The fields preflight reads from ``{...}`` (resolved_dict) or ``ServerArgs(...)`` (the dataclass repr).

    The whole text is parsed as Python first.  A repr can hold values that are
    not Python syntax (an object's ``<... at 0x...>``, a path, an enum); then
    each wanted field is read alone, as the shortest text after ``key=`` or
    ``'key': `` that is a Python literal and ends at a ``,`` or the closing
    bracket, so strings with commas, lists and dicts elsewhere do not matter.
    """
    rest = rest.strip()
    if not rest.startswith("{") and re.match(r"\w+\(", rest) is None:
        raise OwnershipError(Code.PREFLIGHT_MISSING, "server_args= is followed by neither {...} nor ServerArgs(...)",
                             file, line)
    try:
        node = ast.parse(rest, mode="eval").body
    except SyntaxError as exc:
        if not rest.endswith(("}", ")")):
            raise OwnershipError(Code.PREFLIGHT_MISSING, f"server_args=... does not parse ({exc.msg}): is the line "
                                 "cut short?", file, line) from None
        out = _fields_one_by_one(file, line, rest)
    else:
        out = _literal_fields(file, line, node)
    if "page_size" not in out or "disaggregation_mode" not in out:
        raise OwnershipError(Code.PREFLIGHT_MISSING, "server_args has no page_size or disaggregation_mode", file, line)
    return out


def _literal_fields(file: str, line: int, node: ast.expr) -> dict[str, Any]:
    pairs: list[tuple[str, ast.expr]] = []
    if isinstance(node, ast.Dict):
        pairs = [(k.value, v) for k, v in zip(node.keys, node.values, strict=True)
                 if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    elif isinstance(node, ast.Call):
        pairs = [(k.arg, k.value) for k in node.keywords if k.arg is not None]
    else:
        raise OwnershipError(Code.PREFLIGHT_MISSING, "server_args= is followed by neither {...} nor ServerArgs(...)",
                             file, line)
    out: dict[str, Any] = {}
    for key, expr in pairs:
        if key in SERVER_ARG_KEYS:
            try:
                out[key] = ast.literal_eval(expr)
            except ValueError:
                raise OwnershipError(Code.PREFLIGHT_MISSING, f"server_args {key} is not a plain value "
                                     f"({ast.unparse(expr)[:60]})", file, line) from None
    return out


def _fields_one_by_one(file: str, line: int, text: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in _top_level_items(text):
        m = re.match(r"\s*(?:(\w+)=|'(\w+)':)", item)
        if m is None:
            continue
        key = m.group(1) or m.group(2)
        if key in SERVER_ARG_KEYS:
            value = item[m.end():].strip()
            try:
                out[key] = ast.literal_eval(value)
            except (ValueError, SyntaxError):
                raise OwnershipError(Code.PREFLIGHT_MISSING, f"server_args {key} is not a plain value "
                                     f"({value[:60]})", file, line) from None
    return out


def _top_level_items(text: str) -> list[str]:
    """The comma-separated items directly inside the outer brackets of ``text``, strings and nesting respected."""
    items: list[str] = []
    depth, quote, escaped, start = 0, "", False, -1
    for i, c in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c in "([{":
            depth += 1
            if depth == 1:
                start = i + 1
        elif c in ")]}":
            if depth == 1:
                items.append(text[start:i])
            depth -= 1
        elif c == "," and depth == 1:
            items.append(text[start:i])
            start = i + 1
    return items


def _sglang(file: str, seen: _Seen, context_len: int, pool: int, limit: int | None, version: str | None) -> NodeConfig:
    v = seen.values
    page = v.get("page_size")
    if page is not None and (not isinstance(page, int) or page < 1):
        raise OwnershipError(Code.PREFLIGHT_MISSING, f"page_size {page!r} is not a positive integer", file,
                             seen.lines.get("page_size"))
    mode = v.get("disaggregation_mode") or "null"
    return NodeConfig("sglang", file, str(mode), context_len, pool, page, limit, version,
                      v.get("disaggregation_transfer_backend"), bool(v.get("allow_auto_truncate")), dict(seen.lines),
                      kv_checksum=bool(v.get("disaggregation_enable_kv_checksum")),
                      dcp_size=int(v.get("dcp_size") or 1),
                      tp_size=int(v.get("tp_size") or 1), pp_size=int(v.get("pp_size") or 1),
                      unprinted_limit_terms=tuple(
                          f"{k}={v[k]!r}" for k in ("enable_kv_cache_sharding", "dllm_algorithm") if v.get(k)))


def _vllm(file: str, seen: _Seen) -> NodeConfig:
    v = seen.values
    for key, what in (("kv_cache_tokens", "'KV cache size: N tokens' line"), ("vllm_version", "'Initializing a V1 "
                      "LLM engine (vX) with config:' line")):
        if key not in v:
            raise OwnershipError(Code.PREFLIGHT_MISSING, f"a vLLM log without the {what} (both are logged at startup)",
                                 file)
    lines = dict(seen.lines)
    lines["context_len"], lines["pool_tokens"] = lines["max_model_len"], lines["kv_cache_tokens"]
    return NodeConfig("vllm", file, "null", int(v["max_model_len"]), int(v["kv_cache_tokens"]), None, None,
                      str(v["vllm_version"]), None, False, lines)


def _from_json(file: str, text: str) -> NodeConfig:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OwnershipError(Code.PREFLIGHT_MISSING, f"not JSON: {exc.msg}", file, exc.lineno) from None
    if not isinstance(data, dict):
        raise OwnershipError(Code.PREFLIGHT_MISSING, "the JSON is not an object; pass SGLang's GET /server_info answer",
                             file, 1)
    seen = _Seen(file)

    def line_of(key: str) -> int:
        m = re.search(r'"' + re.escape(key) + r'"\s*:', text)
        return text.count("\n", 0, m.start()) + 1 if m else 1

    def count(key: str) -> int | None:
        """A token count of the JSON: an integer, or a number or string spelling a whole one."""
        value = data.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise OwnershipError(Code.PREFLIGHT_MISSING, f"server info {key} is {value!r}, not a number of tokens",
                                 file, line_of(key))
        return value if isinstance(value, int) else _count(file, line_of(key), key, str(value), "server info")

    counts = {key: count(key) for key in ("max_total_num_tokens", "page_size", "context_length", "max_req_input_len")}
    for key in (*SERVER_ARG_KEYS, "max_total_num_tokens", "max_req_input_len", "version"):
        if key in data:
            seen.put(key, counts.get(key, data[key]), line_of(key))
    for key in ("max_total_num_tokens", "page_size", "disaggregation_mode"):
        present = isinstance(data.get(key), str) if key == "disaggregation_mode" else counts[key] is not None
        if not present:
            raise OwnershipError(Code.PREFLIGHT_MISSING, f"server info has no {key} (got {data.get(key)!r}); pass "
                                 "SGLang's GET /server_info answer, or its startup log", file,
                                 line_of(key) if key in data else 1)
    pool, limit = counts["max_total_num_tokens"], counts["max_req_input_len"]
    assert pool is not None  # checked above
    context = counts["context_length"]
    if context is not None:
        seen.lines["context_len"] = seen.lines["context_length"]
    else:
        context = _context_from_limit(file, line_of("context_length") if "context_length" in data else 1, pool, limit)
        seen.lines["context_len"] = line_of("max_req_input_len")
    version = data.get("version")
    return _sglang(file, seen, context, pool, limit, str(version) if version is not None else None)


def _context_from_limit(file: str, line: int, pool: int, limit: int | None) -> int:
    """The context length of a default launch (``context_length: null``), from the scheduler's input limit.

    Every release's limit is ``min(context_len - 1, P - 1) - 5`` with ``P`` at
    least the pool (0.5.4 ``tp_worker.py:293-297``, 0.5.11 ``:302-306``, whose
    ``max_token_pool_size`` is the pool; later releases scale ``P`` up by their
    context-parallel widths).  A limit below ``pool - 6`` is the context's, so
    ``context_len = limit + 6``; a limit of ``pool - 6`` is the pool's and says
    only that the context is at least the pool.
    """
    if limit is None:
        raise OwnershipError(Code.PREFLIGHT_MISSING, "server info has context_length null (a default launch: the "
                             "model's own context length) and no max_req_input_len to derive it from; pass the node's "
                             "startup log, whose scheduler line prints context_len=", file, line)
    if limit < pool - 6:
        return limit + 6
    raise OwnershipError(Code.PREFLIGHT_MISSING, f"server info has context_length null (a default launch: the "
                         f"model's own context length) and max_req_input_len {limit:,} = max_total_num_tokens "
                         f"{pool:,} - 6 is the pool's limit, which says only that the context is at least "
                         f"{pool:,}; pass the node's startup log, whose scheduler line prints context_len=, or "
                         "launch with --context-length", file, line)
