"""Replay an ownership counterexample of the SGLang disaggregation spec against one real release.

Run as a script in the environment ``scripts/real-engines.sh sglang-releases`` builds, with the
release's ``--no-deps --target`` directory first on ``sys.path``::

    python tests/real_engines/sglang_disagg_releases_driver.py RELEASE_DIR TRACE_JSON

It prints one JSON object: what the release's real classes did at every step of the trace.  One
process per release, because two SGLang versions cannot share an interpreter.

Real SGLang code run: ``Req``, ``managers/utils.py validate_input_length``,
``Req.set_finish_with_abort``, ``PrefillBootstrapQueue`` (its ``__init__``, ``add``,
``create_sender``, ``pop_bootstrapped``, ``finalize_bootstrap``), ``DecodePreallocQueue`` and
``DecodeTransferQueue`` (their ``__init__`` and ``DecodePreallocQueue.add``), the fake transfer
backend's manager, sender and receiver, ``is_aborted`` / ``is_unadmitted_reject``,
``_retire_aborted_prefill_result``, ``Scheduler.retire_unadmitted_request``,
``PagedTokenToKVPoolAllocator`` and ``MHATokenToKVPool`` (CPU tensors).

Stand-ins (the fake backend moves no data and a scheduler needs a model): the scheduler object
(attributes the queues read, the process groups a one-rank gloo group); the prefill forward
(allocates the request's pages with the real allocator and writes the request's id into them);
the transport (copies the pages prefill sends into decode's reserved pages, and tells decode's
receiver Success only after prefill sent: the fake receiver reports Success unconditionally);
decode's ``pop_preallocated`` page budget (the reservation itself is the real allocator, for
``len(origin_input_ids)`` tokens as ``_pre_alloc`` reserves); the decode forward (reads the
reserved pages back); the decision in ``process_batch_result_disagg_prefill`` whether to retire
or send (taken as the release's source takes it: ``is_aborted(req)`` where the release has
``_retire_aborted_prefill_result``).
"""

from __future__ import annotations

import inspect
import json
import sys
from array import array
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest.mock import MagicMock, patch

ROOT = Path(__file__).resolve().parents[2]


def _limits(params: dict[str, int]) -> tuple[int, int]:
    """The spec's derived max_req_input_len of each node (the real scheduler gets its own number)."""
    ctx = params["context_len"]
    return min(ctx - 1, params["prefill_pool_tokens"] - 1), min(ctx - 1, params["decode_pool_tokens"] - 1)


def _poll(value: int) -> str:
    """A KVPoll value by name (KVPoll is a class of int constants)."""
    from sglang.srt.disaggregation.base.conn import KVPoll

    return next(name for name, v in vars(KVPoll).items() if not name.startswith("_") and v == value)


def _call(cls: Any, **kwargs: Any) -> Any:
    """Construct ``cls`` with the keyword arguments its signature takes (they differ between releases)."""
    names = inspect.signature(cls.__init__).parameters
    return cls(**{k: v for k, v in kwargs.items() if k in names})


class Replay:
    """Both nodes of one release, driven step by step by the spec's action names."""

    def __init__(self, params: dict[str, int], server_args: Any, send_aborted: bool = False) -> None:
        import torch
        import torch.distributed as dist
        from sglang.srt.disaggregation import decode, prefill, utils
        from sglang.srt.disaggregation.utils import MetadataBuffers, ReqToMetadataIdxAllocator, TransferBackend
        from sglang.srt.mem_cache.allocator.paged import PagedTokenToKVPoolAllocator
        from sglang.srt.mem_cache.memory_pool import MHATokenToKVPool, ReqToTokenPool

        if not dist.is_initialized():
            dist.init_process_group("gloo", init_method="tcp://127.0.0.1:0", rank=0, world_size=1)
        group = dist.new_group([0], backend="gloo")
        self.torch, self.utils, self.prefill_mod = torch, utils, prefill
        self.params = params
        self.server_args = server_args
        self.send_aborted = send_aborted  # the fork as 0.5.4.post2-0.5.19 take it: send every finished result
        self.page = params["page_size"]
        self.prefill_limit, self.decode_limit = _limits(params)
        self.log: list[dict[str, Any]] = []
        self.retired: list[str] = []
        self.construction: dict[str, str] = {}

        def pool(tokens: int) -> tuple[Any, Any]:
            kv = MHATokenToKVPool(size=tokens, page_size=self.page, dtype=torch.float32, head_num=1, head_dim=1,
                                  layer_num=1, device="cpu", enable_memory_saver=False)
            # The allocator reserves page 0 (padding), so it gets one page more than the spec's pool.
            return kv, PagedTokenToKVPoolAllocator(tokens, self.page, torch.float32, "cpu", kv, False)

        self.p_kv, self.p_alloc = pool(params["prefill_pool_tokens"] + self.page)
        self.d_kv, self.d_alloc = pool(params["decode_pool_tokens"] + self.page)

        def scheduler(role: str, kv_alloc: Any, tokens: int) -> SimpleNamespace:
            runner = SimpleNamespace(effective_max_total_num_tokens=tokens, effective_logical_max_total_num_tokens=tokens,
                                     kv_cache_dtype_str="auto", max_token_pool_size=tokens)
            sched = SimpleNamespace(
                tp_worker=SimpleNamespace(model_runner=runner, is_hybrid_swa=False),
                ps=SimpleNamespace(dp_rank=0, gpu_id=0, pp_size=1), rust_server=None,
                model_config=SimpleNamespace(hf_text_config=SimpleNamespace(), num_hidden_layers=1,
                                             get_total_num_kv_heads=lambda: 1),
                server_args=self.server_args, req_to_token_pool=None, token_to_kv_pool_allocator=kv_alloc,
                attn_tp_cpu_group=group, attn_cp_cpu_group=group, output_streamer=MagicMock(),
                processed_tokens_counter=0, enable_hisparse=False, spec_algorithm=MagicMock(),
                enable_decode_hicache=False, enable_hicache_storage=False, beam_coordinator=MagicMock(),
                _release_aborted_request=lambda req: None, clear_pending_chunk_send=lambda req: None,
                tree_cache=MagicMock(), kv_checksum_computer=None, enable_metrics=False,
            )
            def retire(req: Any) -> None:
                # The real method, run on this scheduler object (0.5.21+ only calls it).
                from sglang.srt.managers.scheduler import Scheduler

                self.retired.append(f"{role}:{req.rid}")
                Scheduler.retire_unadmitted_request(sched, req)

            sched.retire_unadmitted_request = retire
            return sched

        self.p_sched = scheduler("prefill", self.p_alloc, params["prefill_pool_tokens"])
        self.d_sched = scheduler("decode", self.d_alloc, params["decode_pool_tokens"])
        n = params["requests"] + 1

        def buffers() -> tuple[Any, Any]:
            return (MetadataBuffers(size=n, hidden_size=1, hidden_states_dtype=torch.float32, max_sampling_mask_tokens=1),
                    ReqToMetadataIdxAllocator(n))

        mb, idx = buffers()
        self.prefill_queue = _call(
            prefill.PrefillBootstrapQueue, token_to_kv_pool=self.p_kv, draft_token_to_kv_pool=None,
            req_to_metadata_buffer_idx_allocator=idx, metadata_buffers=mb, tp_rank=0, tp_size=1, gpu_id=0,
            bootstrap_port=8998, gloo_group=group, max_total_num_tokens=params["prefill_pool_tokens"],
            scheduler=self.p_sched, scheduler_stage_metrics=MagicMock(), pp_rank=0, pp_size=1,
            transfer_backend=TransferBackend.FAKE)
        self.construction["PrefillBootstrapQueue"] = type(self.prefill_queue.kv_manager).__name__
        mb, idx = buffers()
        transfer_queue = _call(decode.DecodeTransferQueue, gloo_group=group, req_to_metadata_buffer_idx_allocator=idx,
                               tp_rank=0, metadata_buffers=mb, scheduler=self.d_sched, tree_cache=MagicMock())
        self.construction["DecodeTransferQueue"] = "constructed"
        self.decode_queue = _call(
            decode.DecodePreallocQueue,
            req_to_token_pool=_call(ReqToTokenPool, size=n, max_context_len=params["context_len"] + 4, device="cpu",
                                    enable_memory_saver=False), token_to_kv_pool_allocator=self.d_alloc,
            draft_token_to_kv_pool=None, req_to_metadata_buffer_idx_allocator=idx, metadata_buffers=mb,
            scheduler=self.d_sched, transfer_queue=transfer_queue, tree_cache=MagicMock(), gloo_group=group,
            tp_rank=0, tp_size=1, dp_size=1, gpu_id=0, bootstrap_port=8998,
            max_total_num_tokens=params["decode_pool_tokens"], pp_rank=0, num_reserved_decode_tokens=0,
            transfer_backend=TransferBackend.FAKE)
        self.construction["DecodePreallocQueue"] = type(self.decode_queue.kv_manager).__name__
        self.reqs: dict[str, dict[str, Any]] = {}
        self.popped: set[str] = set()
        self.next_room = 1

    # -- helpers -------------------------------------------------------------------------------
    def _req(self, rid: str, prompt_len: int, limit: int) -> tuple[Any, str | None]:
        from sglang.srt.disaggregation.utils import FAKE_BOOTSTRAP_HOST
        from sglang.srt.managers.schedule_batch import Req
        from sglang.srt.managers.utils import validate_input_length
        from sglang.srt.sampling.sampling_params import SamplingParams

        req = Req(rid=rid, origin_input_text="", origin_input_ids=array("q", [ord(rid)] * prompt_len),
                  sampling_params=SamplingParams(max_new_tokens=1))
        req.time_stats.trace_ctx = MagicMock()
        req.bootstrap_host, req.bootstrap_room = FAKE_BOOTSTRAP_HOST, self.next_room
        error = validate_input_length(req, limit, False)
        if error:
            req.set_finish_with_abort(error)
        return req, error

    def _tokens(self, alloc: Any, n_tokens: int) -> list[int]:
        pages = -(-n_tokens // self.page)
        got = alloc.alloc(pages * self.page)
        if got is None:
            raise RuntimeError(f"allocator out of pages for {n_tokens} tokens")
        return [int(t) for t in got]

    def _aborted(self, req: Any) -> bool:
        return isinstance(req.to_finish, self._finish_abort()) or isinstance(req.finished_reason, self._finish_abort())

    @staticmethod
    def _finish_abort() -> type:
        from sglang.srt.managers.schedule_batch import FINISH_ABORT

        return FINISH_ABORT

    # -- the spec's actions ----------------------------------------------------------------------
    def arrive(self, rid: str, prompt_len: int) -> dict[str, Any]:
        """handle_generate_request on both nodes: validate_input_length, then each queue's add."""
        p_req, p_err = self._req(rid, prompt_len, self.prefill_limit)
        d_req, d_err = self._req(rid, prompt_len, self.decode_limit)
        self.next_room += 1
        unadmitted = getattr(self.utils, "is_unadmitted_reject", None)
        rec = {"prefill_rejected": p_err is not None, "decode_rejected": d_err is not None,
               "prefill_to_finish": type(p_req.to_finish).__name__ if p_req.to_finish else None,
               "prefill_input_len": len(p_req.origin_input_ids), "decode_input_len": len(d_req.origin_input_ids),
               "finished_after_reject": p_req.finished(),
               "is_unadmitted_reject": None if unadmitted is None else bool(unadmitted(p_req))}
        sent: dict[str, Any] = {}
        self.prefill_queue.add(p_req, 1)
        self.decode_queue.add(d_req)
        sender = getattr(p_req, "disagg_kv_sender", None)
        if sender is not None:
            real_init = sender.init

            def init(kv_indices: Any, aux_index: Any = None) -> None:
                sent["num_pages"] = kv_indices
                real_init(kv_indices, aux_index)

            sender.init = init
        d_entry = next((e for e in self.decode_queue.queue if e.req is d_req), None)
        rec.update(prefill_queued=p_req in self.prefill_queue.queue, prefill_has_sender=sender is not None,
                   decode_queued=d_entry is not None, retired=list(self.retired),
                   prefill_finished_reason=type(p_req.finished_reason).__name__ if p_req.finished_reason else None)
        self.reqs[rid] = {"p": p_req, "d": d_req, "d_entry": d_entry, "sender_init": sent, "p_tokens": [],
                          "d_tokens": [], "sent": False}
        return rec

    def decode_pop_preallocated(self, rid: str) -> dict[str, Any]:
        """pop_preallocated's reservation (_pre_alloc: len(origin_input_ids) tokens), then send_metadata."""
        r = self.reqs[rid]
        entry = r["d_entry"]
        if entry is None:
            return {"enabled": False, "why": "not in DecodePreallocQueue.queue"}
        if isinstance(entry.req.finished_reason, self._finish_abort()):
            return {"enabled": True, "skipped": "finished_reason is FINISH_ABORT"}
        n = len(entry.req.origin_input_ids)
        r["d_tokens"] = self._tokens(self.d_alloc, n)
        entry.kv_receiver.send_metadata(r["d_tokens"][:n])
        self.decode_queue.queue.remove(entry)
        return {"enabled": True, "reserved_tokens": n, "reserved_pages": len(r["d_tokens"]) // self.page,
                "to_finish_seen_by_decode": type(entry.req.to_finish).__name__ if entry.req.to_finish else None}

    def prefill_pop_bootstrapped(self, rid: str) -> dict[str, Any]:
        """The real PrefillBootstrapQueue.pop_bootstrapped (fake sender: handshake done at once)."""
        r = self.reqs[rid]
        if r["p"] in self.prefill_queue.queue:  # the real call pops every bootstrapped request, FIFO
            self.popped.update(q.rid for q in self.prefill_queue.pop_bootstrapped())
        if rid not in self.popped:
            return {"enabled": False, "why": "never entered PrefillBootstrapQueue.queue"}
        return {"enabled": True, "bootstrapped": sorted(self.popped), "sender_num_pages": r["sender_init"].get("num_pages"),
                "metadata_buffer_index": r["p"].metadata_buffer_index}

    def prefill_forward(self, rid: str) -> dict[str, Any]:
        """Stand-in forward: allocate len(origin_input_ids) tokens' pages and write the request's id into them."""
        r = self.reqs[rid]
        n = len(r["p"].origin_input_ids)
        r["p_tokens"] = self._tokens(self.p_alloc, n)
        self.p_kv.k_buffer[0][r["p_tokens"][:n]] = float(ord(rid))
        return {"enabled": True, "wrote_tokens": n}

    def prefill_send(self, rid: str) -> dict[str, Any]:
        """process_batch_result_disagg_prefill's fork: retire an aborted result, else send_kv_chunk."""
        r = self.reqs[rid]
        req = r["p"]
        mixin = self.prefill_mod.SchedulerDisaggregationPrefillMixin
        if not self.send_aborted and hasattr(mixin, "_retire_aborted_prefill_result") and self.utils.is_aborted(req):
            # The real cleanup, on the stand-in scheduler; it frees KV through release_kv_cache.
            with patch.object(self.prefill_mod, "release_kv_cache", lambda *a, **k: None):
                retired = mixin._retire_aborted_prefill_result(self._prefill_self(), req)
            self.p_alloc.free(self.torch.tensor(r["p_tokens"], dtype=self.torch.int64))
            return {"enabled": True, "sent": False, "retired_by__retire_aborted_prefill_result": retired,
                    "sender_poll": _poll(req.disagg_kv_sender.poll()),
                    "finished_reason": type(req.finished_reason).__name__ if req.finished_reason else None}
        n = len(req.origin_input_ids)
        dst = r["d_tokens"]
        moved = min(n, len(dst))
        self.d_kv.k_buffer[0][dst[:moved]] = self.p_kv.k_buffer[0][r["p_tokens"][:moved]]
        req.disagg_kv_sender.send(r["p_tokens"][:n])
        r["sent"] = True
        self.p_alloc.free(self.torch.tensor(r["p_tokens"], dtype=self.torch.int64))
        return {"enabled": True, "sent": True, "sent_tokens": n, "decode_reserved_tokens": len(dst),
                "sender_poll": _poll(req.disagg_kv_sender.poll())}

    def _prefill_self(self) -> SimpleNamespace:
        s = self.p_sched
        s.req_to_metadata_buffer_idx_allocator = self.prefill_queue.req_to_metadata_buffer_idx_allocator
        return s

    def decode_pop_transferred(self, rid: str) -> dict[str, Any]:
        """pop_transferred on Success: commit (the bootstrap room is the only check; fake transfers skip it)."""
        r = self.reqs[rid]
        if not r["sent"]:
            return {"enabled": False, "why": "prefill never sent: the receiver stays WaitingForInput until its timeout"}
        poll = r["d_entry"].kv_receiver.poll()
        return {"enabled": True, "receiver_poll": _poll(poll)}

    def decode_forward(self, rid: str) -> dict[str, Any]:
        """Stand-in attention: read back every reserved token's KV and name whose it is."""
        r = self.reqs[rid]
        n = len(r["d"].origin_input_ids)
        values = self.d_kv.k_buffer[0][r["d_tokens"][:n]].flatten().tolist()
        owners = [chr(int(v)) if v else None for v in values]
        return {"enabled": True, "read_tokens": n, "kv_owner_per_token": owners,
                "foreign": sorted({o for o in owners if o is not None and o != rid}),
                "unwritten": owners.count(None)}

    def decode_finish(self, rid: str) -> dict[str, Any]:
        """Release the reserved pages (their content stays)."""
        r = self.reqs[rid]
        self.d_alloc.free(self.torch.tensor(r["d_tokens"], dtype=self.torch.int64))
        return {"enabled": True, "freed_pages": len(r["d_tokens"]) // self.page}


def main(release_dir: str, trace_path: str, send_aborted: bool = False) -> dict[str, Any]:
    """Replay the trace on the release in ``release_dir``; stop at the first step the release does not allow.

    ``send_aborted`` takes process_batch_result_disagg_prefill's fork as 0.5.19 does (0.5.19
    ``prefill.py:797``: ``send_kv_chunk`` for every finished result) around the same real queues:
    the control that shows the replay detects the stale read when the fork is missing.
    """
    sys.path.insert(0, release_dir)
    sys.path.insert(0, str(ROOT))
    from examples.real_engines.sglang_import import prepare_sglang_import

    prepare_sglang_import()
    import sglang
    from sglang.srt.runtime_context import publish, reset_context
    from sglang.srt.server_args import ServerArgs

    trace = json.loads(Path(trace_path).read_text())
    reset_context()
    server_args = ServerArgs(model_path="dummy", disaggregation_transfer_backend="fake")
    publish(server_args, role="scheduler")
    from sglang.srt.runtime_context import get_parallel

    parallel = get_parallel()
    if hasattr(parallel, "override_permanently"):  # 0.5.21 reads ranks from here; 0.5.20 takes them as arguments
        parallel.override_permanently(tp_rank=0, tp_size=1, pp_rank=0, pp_size=1, dp_rank=None)
    with patch("sglang.srt.managers.schedule_batch.get_parallel", return_value=SimpleNamespace(tp_rank=0)):
        replay = Replay(trace["params"], server_args, send_aborted)
        steps: list[dict[str, Any]] = []
        for i, step in enumerate(trace["steps"], 1):
            action = getattr(replay, step["action"], None)
            if action is None:
                steps.append({"step": i, "action": step["action"], "args": step["args"], "enabled": False,
                              "why": "no real code path for this action"})
                break
            out = action(*step["args"])
            steps.append({"step": i, "action": step["action"], "args": step["args"], **out})
            if out.get("enabled") is False:
                break
    return {"release": sglang.__version__, "sglang_file": sglang.__file__, "construction": replay.construction,
            "send_aborted": send_aborted, "steps": steps}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2], "--send-aborted" in sys.argv[3:])))
