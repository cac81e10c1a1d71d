"""Reading a deployment's real configuration: SGLang and vLLM startup logs and SGLang's server-info JSON.

The formats are the engines' own (each reader names the code that prints
what it reads):

* SGLang ``server_args=...``: ``entrypoints/engine.py`` logs
  ``f"server_args={server_args.resolved_dict()}"`` (0.5.20 engine.py:276,
  0.5.21 engine.py:289; 0.5.23 passes the dict through
  ``_server_args_for_logging``), a Python dict literal.  Older releases
  printed ``server_args=ServerArgs(k=v, ...)``; both are read.
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
accepted.  Every failure is a located :class:`~ownership.errors.OwnershipError`.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ownership.errors import Code, OwnershipError

_SCHED = re.compile(r"max_total_num_tokens=(\d+),.*?\bcontext_len=(\d+)")
_VLLM_INIT = re.compile(r"Initializing a V1 LLM engine \(v([^)\s]+)\) with config: .*?\bmax_seq_len=(\d+)")
_VLLM_KV = re.compile(r"KV cache size: ([\d,]+) tokens, Maximum concurrency for ([\d,]+) tokens per request")
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
            seen.put("max_total_num_tokens", int(m.group(1)), n)
            seen.put("context_len", int(m.group(2)), n)
        if (m := _VLLM_INIT.search(line)) is not None:
            seen.put("vllm_version", m.group(1), n)
            seen.put("max_model_len", int(m.group(2)), n)
        if (m := _VLLM_KV.search(line)) is not None:
            seen.put("kv_cache_tokens", int(m.group(1).replace(",", "")), n)
            seen.put("max_model_len", int(m.group(2).replace(",", "")), n)
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


def _server_args(file: str, line: int, rest: str) -> dict[str, Any]:
    """The fields preflight reads from ``{...}`` (resolved_dict) or ``ServerArgs(...)``."""
    rest = rest.strip()
    try:
        node = ast.parse(rest, mode="eval").body
    except SyntaxError as exc:
        raise OwnershipError(Code.PREFLIGHT_MISSING, f"server_args=... does not parse ({exc.msg}): is the line "
                             "cut short?", file, line) from None
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
                raise OwnershipError(Code.PREFLIGHT_MISSING, f"server_args {key} is not a plain value",
                                     file, line) from None
    if "page_size" not in out or "disaggregation_mode" not in out:
        raise OwnershipError(Code.PREFLIGHT_MISSING, "server_args has no page_size or disaggregation_mode", file, line)
    return out


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

    for key in (*SERVER_ARG_KEYS, "max_total_num_tokens", "max_req_input_len", "version"):
        if key in data:
            seen.put(key, data[key], line_of(key))
    for key in ("max_total_num_tokens", "page_size", "disaggregation_mode", "context_length"):
        if not isinstance(data.get(key), int) and not (key == "disaggregation_mode" and isinstance(data.get(key), str)):
            raise OwnershipError(Code.PREFLIGHT_MISSING, f"server info has no {key} (got {data.get(key)!r}); pass "
                                 "SGLang's GET /server_info answer, or its startup log", file,
                                 line_of(key) if key in data else 1)
    seen.lines["context_len"] = seen.lines["context_length"]
    limit = data.get("max_req_input_len")
    version = data.get("version")
    return _sglang(file, seen, int(data["context_length"]), int(data["max_total_num_tokens"]),
                   int(limit) if isinstance(limit, int) else None, str(version) if version is not None else None)
