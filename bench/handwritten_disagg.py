"""The v0.5.19 disaggregation protocol as a hand-written Hypothesis state machine.

This is the baseline of ``bench/hypothesis_bench.py``: what an engine
developer would write with plain Hypothesis, without this tool, to test the
protocol of ``specs/sglang_disagg_v0_5_19.py``.  It mirrors that spec step
for step (same actions, guards, page pools with free lists and content
labels, the same four invariants) in the most common style of Hypothesis
stateful tests:

* plain Python state (lists and dicts), one ``@rule`` per action with
  ``r=st.sampled_from(range(requests))``;
* a disabled guard is an **early return**: the step does nothing.  (``assume``
  would be the other obvious choice, but inside a rule it throws away the
  whole example, which makes almost every example invalid here: most random
  ``(action, request)`` pairs are disabled);
* ``style="early-return"``: no ``@precondition`` (a per-request guard
  cannot be one: a precondition does not see the rule's arguments);
  ``style="precondition"``: each rule also gets a ``@precondition`` that
  *some* request can take it, the next thing a user adds once they see how
  many steps do nothing, with a ``restart`` rule once nothing can run;
* the page a pool hands out for each page-table slot is any free page, drawn
  with ``st.data()`` (``alloc="drawn"``, what the spec's ``s.choose`` means),
  or the head of a FIFO free list like SGLang's allocator (``alloc="fifo"``).

It is not part of the package and not a test; ``make_machine`` builds the
class for one set of parameters.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

# Request life cycle (the spec's enums, as plain strings)
IDLE, BOOTSTRAP, WAITING, FORWARDED, DONE = "IDLE", "BOOTSTRAP", "WAITING", "FORWARDED", "DONE"
PREALLOC, TRANSFER, RUNNING, FINISHED = "PREALLOC", "TRANSFER", "RUNNING", "FINISHED"
KV_NONE, KV_WAITING, KV_SUCCESS, KV_FAILED = "NONE", "WAITING_FOR_INPUT", "SUCCESS", "FAILED"
FIN_NONE, FIN_ABORT, FIN_LENGTH = "NONE", "ABORT", "LENGTH"


@dataclass(frozen=True)
class DisaggParams:
    """The spec's parameters, with the spec's defaults."""

    requests: int = 2
    page_size: int = 2
    context_len: int = 16
    prefill_pool_tokens: int = 6
    decode_pool_tokens: int = 8
    short_prompt_tokens: int = 2
    prompt_tokens: int = 6


@dataclass
class Counters:
    """What the bench reads back: examples and steps run, and when the first violation was seen."""

    examples: int = 0
    steps: int = 0
    effective_steps: int = 0
    first_failure: tuple[int, int, float, float] | None = None  # examples, steps, wall, cpu
    clock: Callable[[], tuple[float, float]] = field(default=lambda: (0.0, 0.0))


def ceil_div(a: int, b: int) -> int:
    """``ceil(a / b)`` for non-negative integers."""
    return -(-a // b)


class Pool:
    """A KV page pool: free list, page tables, and whose KV each page holds (never zeroed)."""

    def __init__(self, pages: int) -> None:
        self.pages = pages
        self.free: list[int] = list(range(pages))
        self.table: dict[int, list[int]] = {}  # request -> its pages, in slot order
        self.content: list[int | None] = [None] * pages

    def alloc(self, r: int, n: int, choose: Callable[[list[int]], int] | None) -> list[int]:
        """Move ``n`` free pages into ``r``'s page table (caller checked ``len(free) >= n``)."""
        taken: list[int] = []
        for _ in range(n):
            if choose is None:
                p = self.free[0]
            else:
                p = choose(sorted(set(self.free) - set(taken)))
            self.free.remove(p)
            taken.append(p)
        self.table.setdefault(r, []).extend(taken)
        return taken

    def release(self, r: int) -> None:
        """Return every page of ``r`` to the free list; content stays."""
        self.free.extend(self.table.pop(r, []))


STYLES = ("early-return", "precondition")
ACTIONS = (
    "arrive",
    "decode_pop_preallocated",
    "decode_pop_transferred",
    "decode_forward",
    "decode_finish",
    "decode_transfer_timeout",
    "prefill_pop_bootstrapped",
    "prefill_forward",
    "prefill_send",
    "prefill_transfer_failed",
)


def make_machine(
    params: DisaggParams = DisaggParams(),
    counters: Counters | None = None,
    alloc: str = "drawn",
    style: str = "early-return",
) -> type[RuleBasedStateMachine]:
    """The hand-written machine for ``params``; ``counters`` (if given) is updated as it runs.

    ``style="early-return"``: a rule whose guard fails for the drawn request
    does nothing.  ``style="precondition"`` adds to each rule a
    ``@precondition`` that *some* request can take it (so Hypothesis only
    picks rules that can run), keeps the early return for the drawn one, and
    adds a ``restart`` rule for when nothing can run (Hypothesis otherwise
    fails with "no progress can be made").
    """
    if alloc not in ("drawn", "fifo"):
        raise ValueError(f"alloc must be 'drawn' or 'fifo', not {alloc!r}")
    if style not in STYLES:
        raise ValueError(f"style must be one of {STYLES}, not {style!r}")
    n = params.requests
    ps = params.page_size
    prefill_max = min(params.context_len - 1, params.prefill_pool_tokens - 1)
    decode_max = min(params.context_len - 1, params.decode_pool_tokens - 1)
    requests = st.sampled_from(range(n))
    prompt_lens = st.sampled_from([params.short_prompt_tokens, params.prompt_tokens])
    data_arg = st.data() if alloc == "drawn" else st.none()
    cnt = counters if counters is not None else Counters()

    def pre(action: str) -> Callable[[Any], Any]:
        if style == "early-return":
            return lambda f: f
        return precondition(lambda self: any(getattr(self, f"can_{action}")(r) for r in range(n)))

    def chooser(data: Any) -> Callable[[list[int]], int] | None:
        if data is None:
            return None
        return lambda options: data.draw(st.sampled_from(options))

    class HandwrittenDisagg(RuleBasedStateMachine):
        """SGLang v0.5.19 prefill/decode disaggregation, one request table per node."""

        def __init__(self) -> None:
            super().__init__()
            cnt.examples += 1
            self._reset()

        def _reset(self) -> None:
            self.p_queue = [IDLE] * n
            self.p_input_len = [0] * n
            self.p_to_finish = [False] * n
            self.p_finished = [FIN_NONE] * n
            self.d_queue = [IDLE] * n
            self.d_input_len = [0] * n
            self.d_to_finish = [False] * n
            self.d_finished = [FIN_NONE] * n
            self.kv = [KV_NONE] * n
            self.kv_tokens = [0] * n
            self.http = [0] * n
            self.prefill = Pool(ceil_div(params.prefill_pool_tokens, ps))
            self.decode = Pool(ceil_div(params.decode_pool_tokens, ps))
            # history for the invariants
            self.read_foreign: list[int | None] = [None] * n
            self.wrote_unowned = [False] * n

        def _ran(self) -> None:
            cnt.effective_steps += 1

        # -- guards: when each action can run for request r ---------------------------
        def can_arrive(self, r: int) -> bool:
            return self.p_queue[r] == IDLE and self.d_queue[r] == IDLE

        def can_decode_pop_preallocated(self, r: int) -> bool:
            if self.d_queue[r] != PREALLOC:
                return False
            # an aborted request leaves; otherwise it waits for the page budget
            return self.d_finished[r] == FIN_ABORT or len(self.decode.free) >= ceil_div(self.d_input_len[r], ps)

        def can_decode_pop_transferred(self, r: int) -> bool:
            return self.d_queue[r] == TRANSFER and self.kv[r] in (KV_SUCCESS, KV_FAILED)

        def can_decode_forward(self, r: int) -> bool:
            return self.d_queue[r] == RUNNING

        def can_decode_finish(self, r: int) -> bool:
            return self.d_queue[r] == FINISHED

        def can_decode_transfer_timeout(self, r: int) -> bool:
            return self.d_queue[r] == TRANSFER and self.kv[r] == KV_WAITING

        def can_prefill_pop_bootstrapped(self, r: int) -> bool:
            # the only guard: the input fits the pool; to_finish is not checked
            return (
                self.p_queue[r] == BOOTSTRAP
                and self.kv[r] == KV_WAITING
                and self.p_input_len[r] <= params.prefill_pool_tokens
            )

        def can_prefill_forward(self, r: int) -> bool:
            return self.p_queue[r] == WAITING and len(self.prefill.free) >= ceil_div(self.p_input_len[r], ps)

        def can_prefill_send(self, r: int) -> bool:
            return (
                self.p_queue[r] == FORWARDED
                and self.kv[r] == KV_WAITING
                and ceil_div(self.p_input_len[r], ps) <= len(self.prefill.table.get(r, []))
            )

        def can_prefill_transfer_failed(self, r: int) -> bool:
            return self.p_queue[r] in (BOOTSTRAP, WAITING, FORWARDED) and self.kv[r] == KV_FAILED

        # -- arrival ----------------------------------------------------------------
        @pre("arrive")
        @rule(r=requests, prompt_len=prompt_lens)
        def arrive(self, r: int, prompt_len: int) -> None:
            cnt.steps += 1
            if not self.can_arrive(r):
                return
            if prompt_len >= prefill_max:  # set_finish_with_abort: one-token placeholder
                self.p_to_finish[r] = True
                self.p_input_len[r] = 1
            else:
                self.p_input_len[r] = prompt_len
            self.p_queue[r] = BOOTSTRAP
            if prompt_len >= decode_max:
                self.d_to_finish[r] = True
                self.d_input_len[r] = 1
            else:
                self.d_input_len[r] = prompt_len
            self.d_queue[r] = PREALLOC
            self._ran()

        # -- decode node ----------------------------------------------------------
        @pre("decode_pop_preallocated")
        @rule(r=requests, data=data_arg)
        def decode_pop_preallocated(self, r: int, data: Any) -> None:
            cnt.steps += 1
            if not self.can_decode_pop_preallocated(r):
                return
            if self.d_finished[r] == FIN_ABORT:  # the only rejection it looks at
                self.d_queue[r] = DONE
                self._ran()
                return
            self.decode.alloc(r, ceil_div(self.d_input_len[r], ps), chooser(data))
            self.kv[r] = KV_WAITING
            self.d_queue[r] = TRANSFER
            self._ran()

        @pre("decode_pop_transferred")
        @rule(r=requests)
        def decode_pop_transferred(self, r: int) -> None:
            cnt.steps += 1
            if not self.can_decode_pop_transferred(r):
                return
            if self.kv[r] == KV_FAILED:
                self.d_finished[r] = FIN_ABORT
                self.http[r] = 400
                self.decode.release(r)
                self.d_queue[r] = DONE
            else:
                self.d_queue[r] = RUNNING
            self._ran()

        @pre("decode_forward")
        @rule(r=requests)
        def decode_forward(self, r: int) -> None:
            cnt.steps += 1
            if not self.can_decode_forward(r):
                return
            for p in self.decode.table.get(r, []):  # attention over req_to_token[0:seq_len]
                c = self.decode.content[p]
                if c is not None and c != r and self.read_foreign[r] is None:
                    self.read_foreign[r] = c
            self.http[r] = 200
            self.d_queue[r] = FINISHED
            self._ran()

        @pre("decode_finish")
        @rule(r=requests)
        def decode_finish(self, r: int) -> None:
            cnt.steps += 1
            if not self.can_decode_finish(r):
                return
            self.d_finished[r] = FIN_LENGTH
            self.decode.release(r)
            self.d_queue[r] = DONE
            self._ran()

        @pre("decode_transfer_timeout")
        @rule(r=requests)
        def decode_transfer_timeout(self, r: int) -> None:
            cnt.steps += 1
            if not self.can_decode_transfer_timeout(r):
                return
            self.kv[r] = KV_FAILED
            self._ran()

        # -- prefill node ---------------------------------------------------------
        @pre("prefill_pop_bootstrapped")
        @rule(r=requests)
        def prefill_pop_bootstrapped(self, r: int) -> None:
            cnt.steps += 1
            if not self.can_prefill_pop_bootstrapped(r):
                return
            self.p_queue[r] = WAITING
            self._ran()

        @pre("prefill_forward")
        @rule(r=requests, data=data_arg)
        def prefill_forward(self, r: int, data: Any) -> None:
            cnt.steps += 1
            if not self.can_prefill_forward(r):
                return
            for p in self.prefill.alloc(r, ceil_div(self.p_input_len[r], ps), chooser(data)):
                self.prefill.content[p] = r
            self.p_queue[r] = FORWARDED
            self._ran()

        @pre("prefill_send")
        @rule(r=requests)
        def prefill_send(self, r: int) -> None:
            cnt.steps += 1
            if not self.can_prefill_send(r):
                return
            num_pages = ceil_div(self.p_input_len[r], ps)
            src = self.prefill.table.get(r, [])
            dst = self.decode.table.get(r, [])
            for i in range(num_pages):  # RDMA page i -> page i; decode having more goes unnoticed
                if i >= len(dst):
                    self.wrote_unowned[r] = True
                else:
                    self.decode.content[dst[i]] = self.prefill.content[src[i]]
            self.kv_tokens[r] = self.p_input_len[r]
            self.kv[r] = KV_SUCCESS
            self.prefill.release(r)
            self.p_finished[r] = FIN_LENGTH
            self.p_queue[r] = DONE
            self._ran()

        @pre("prefill_transfer_failed")
        @rule(r=requests)
        def prefill_transfer_failed(self, r: int) -> None:
            cnt.steps += 1
            if not self.can_prefill_transfer_failed(r):
                return
            self.prefill.release(r)
            self.p_finished[r] = FIN_ABORT
            self.p_queue[r] = DONE
            self._ran()

        if style == "precondition":
            # Without it Hypothesis stops with "no progress can be made" once
            # every request is done; the engine's machine does the same.
            @precondition(lambda self: not any(getattr(self, f"can_{a}")(r) for a in ACTIONS for r in range(n)))
            @rule()
            def restart(self) -> None:
                """Nothing can run: start again from the initial state."""
                self._reset()

        # -- invariants -----------------------------------------------------------
        def _fail(self, what: str) -> None:
            if cnt.first_failure is None:
                wall, cpu = cnt.clock()
                cnt.first_failure = (cnt.examples, cnt.steps, wall, cpu)
            raise AssertionError(what)

        @invariant()
        def no_foreign_read(self) -> None:
            """No request reads a page holding another request's KV."""
            for r in range(n):
                if self.read_foreign[r] is not None:
                    self._fail(f"request {r} read KV of request {self.read_foreign[r]}")

        @invariant()
        def no_unowned_write(self) -> None:
            """No transfer writes beyond the receiving request's page table."""
            if any(self.wrote_unowned):
                self._fail("write outside a page table")

        @invariant()
        def no_double_ownership(self) -> None:
            """No page is in two page tables, or in one while on the free list."""
            for pool in (self.prefill, self.decode):
                held = [p for pages in pool.table.values() for p in pages]
                if len(held) != len(set(held)) or set(held) & set(pool.free):
                    self._fail("page owned twice")

        @invariant()
        def pages_returned_when_idle(self) -> None:
            """With no request in flight, every page is back on the free list exactly once."""
            idle = all(self.p_queue[r] in (IDLE, DONE) and self.d_queue[r] in (IDLE, DONE) for r in range(n))
            if not idle:
                return
            for pool in (self.prefill, self.decode):
                if any(pool.table.values()) or sorted(pool.free) != list(range(pool.pages)):
                    self._fail("pages not returned")

    return HandwrittenDisagg
