"""SGLang on a single node: the rejection path that works.

Models one scheduler with one KV page pool (python/sglang/srt/):

* ``managers/utils.py validate_input_length`` and ``Req.set_finish_with_abort``:
  a too-long prompt becomes a one-token placeholder, the 400 parked in
  ``to_finish``;
* ``managers/scheduler.py get_new_batch_prefill`` and the prefill forward:
  pages for ``ceil(len(input) / page_size)`` tokens are allocated and written;
* ``managers/scheduler_output_processor_mixin.py process_batch_result_prefill``
  calls ``Req.check_finished()``, which promotes ``to_finish`` to
  ``finished_reason``; the KV is released and the client gets HTTP 400;
* otherwise the request decodes (attention reads its own pages), streams 200,
  and frees its pages on finish (``release_kv_cache``).

Simplified: one request per batch, decode is one forward pass.  Expected:
safe, including ``no_read_of_unwritten`` since every page a request reads is
one it wrote.
"""

from typing import Annotated

from ownership import Element, Enum, Ownership, Source, Spec, ceil_div, require, safe

spec = Spec(
    "sglang_single_node",
    summary="SGLang single node: rejected prompt runs a one-token placeholder and gets HTTP 400",
    models=Source(
        "SGLang",
        "0.5.21",
        where=(
            "managers/utils.py validate_input_length",
            "managers/schedule_batch.py Req.set_finish_with_abort, Req.check_finished",
            "managers/scheduler_output_processor_mixin.py process_batch_result_prefill",
        ),
    ),
    expect=safe(),
)

spec.param("requests", 2, "concurrent requests modelled", min=1, max=6)
spec.param("page_size", 2, "tokens per KV page (--page-size)", min=1)
spec.param("context_len", 16, "model context length", min=1)
spec.param("pool_tokens", 6, "KV pool size in tokens (max_total_num_tokens)", min=1)
spec.param("short_prompt_tokens", 2, "length of an ordinary prompt", min=1)
spec.param("prompt_tokens", 6, "length of a long prompt", min=1)

Req = spec.domain("Req", "requests", symmetric=True, names="ABCDEF")
ReqId = Annotated[Element, Req]  # the type of an action argument drawn from Req
PromptLen = spec.values("PromptLen", lambda p: [p.short_prompt_tokens, p.prompt_tokens])
PromptLenId = Annotated[int, PromptLen]  # the type of an action argument drawn from PromptLen

own = Ownership(spec, requests=Req)
pool = own.pool("kv", lambda p: ceil_div(p.pool_tokens, p.page_size), prefix="K")

Queue = Enum("Queue", "IDLE WAITING PREFILLED RUNNING FINISHED DONE")
Finish = Enum("FinishReason", "NONE ABORT LENGTH")
HTTP = Enum("HTTP", "NONE OK_200 ERROR_400")

spec.var("queue", Queue, per=Req, init=Queue.IDLE, doc="where the request is in the scheduler")
spec.var("input_len", int, per=Req, init=0, doc="len(origin_input_ids)")
spec.var("to_finish", bool, per=Req, init=False, doc="Req.to_finish holds a FINISH_ABORT(400)")
spec.var("finished_reason", Finish, per=Req, init=Finish.NONE, doc="Req.finished_reason")
spec.var("http", HTTP, per=Req, init=HTTP.NONE, doc="what the client got")


@spec.action
def arrive(s, r: ReqId, prompt_len: PromptLenId):
    """tokenizer -> scheduler: validate_input_length, placeholder on rejection."""
    require(s.queue[r] == Queue.IDLE)
    if prompt_len >= min(s.params.context_len - 1, s.params.pool_tokens - 1):
        s.to_finish[r] = True  # set_finish_with_abort
        s.input_len[r] = 1
    else:
        s.input_len[r] = prompt_len
    s.queue[r] = Queue.WAITING


@spec.action(fair="weak")
def prefill(s, r: ReqId):
    """get_new_batch_prefill + forward: allocate the input's pages and write its KV."""
    require(s.queue[r] == Queue.WAITING)
    pages = pool.alloc(s, r, ceil_div(s.input_len[r], s.params.page_size))
    pool.write(s, r, pages)
    s.queue[r] = Queue.PREFILLED


@spec.action(fair="weak")
def process_batch_result_prefill(s, r: ReqId):
    """check_finished() promotes to_finish: the placeholder is retired with its 400."""
    require(s.queue[r] == Queue.PREFILLED)
    if s.to_finish[r]:
        s.finished_reason[r] = Finish.ABORT
        pool.free(s, r)
        s.http[r] = HTTP.ERROR_400
        s.queue[r] = Queue.DONE
        return
    s.queue[r] = Queue.RUNNING


@spec.action(fair="weak")
def decode(s, r: ReqId):
    """Decode forward: attention over the request's own pages; tokens stream with 200."""
    require(s.queue[r] == Queue.RUNNING)
    pool.read(s, r, pool.pages_of(s, r))
    s.http[r] = HTTP.OK_200
    s.queue[r] = Queue.FINISHED


@spec.action(fair="weak")
def finish(s, r: ReqId):
    """release_kv_cache on finish: pages go back to the free list."""
    require(s.queue[r] == Queue.FINISHED)
    s.finished_reason[r] = Finish.LENGTH
    pool.free(s, r)
    s.queue[r] = Queue.DONE


@spec.terminal
def nothing_in_flight(s) -> bool:
    """No request is queued or running."""
    return all(s.queue[r] in (Queue.IDLE, Queue.DONE) for r in s.all(Req))


own.invariants()
# On every fair path (the scheduler's steps weakly fair, arrivals unfair) a request the client has
# heard from (200 or 400) gives its pages back, and every arrived request is answered.
own.properties("pages_return", "requests_finish",
               ended=lambda s, r: s.queue[r] in (Queue.FINISHED, Queue.DONE),
               started=lambda s, r: s.queue[r] != Queue.IDLE)


@spec.invariant
def rejected_never_gets_200(s) -> bool:
    """A rejected prompt (``to_finish`` holds its 400) never streams HTTP 200: the incident's bug class."""
    return not any(s.to_finish[r] and s.http[r] == HTTP.OK_200 for r in s.all(Req))


@spec.invariant
def admitted_prompt_fits(s) -> bool:
    """A prompt that was not rejected is shorter than validate_input_length's limit."""
    limit = min(s.params.context_len - 1, s.params.pool_tokens - 1)
    return all(s.queue[r] == Queue.IDLE or s.to_finish[r] or s.input_len[r] < limit for r in s.all(Req))


@spec.invariant
def response_matches_finish(s) -> bool:
    """The client hears once, when the request finishes: 400 with ABORT, 200 with LENGTH, nothing before."""
    for r in s.all(Req):
        q, h, f = s.queue[r], s.http[r], s.finished_reason[r]
        if q == Queue.DONE:
            if not ((h == HTTP.ERROR_400 and f == Finish.ABORT) or (h == HTTP.OK_200 and f == Finish.LENGTH)):
                return False
        elif q == Queue.FINISHED:
            if h != HTTP.OK_200 or f != Finish.NONE:
                return False
        elif h != HTTP.NONE or f != Finish.NONE:
            return False
    return True


@spec.invariant
def pages_match_queue(s) -> bool:
    """From prefill until finish a request holds exactly the pages of its input; otherwise none."""
    for r in s.all(Req):
        held = pool.held(s, r)
        if s.queue[r] in (Queue.PREFILLED, Queue.RUNNING, Queue.FINISHED):
            if held != ceil_div(s.input_len[r], s.params.page_size):
                return False
        elif held != 0:
            return False
    return True
