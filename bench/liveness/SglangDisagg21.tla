------------------------------ MODULE SglangDisagg21 ------------------------------
(***************************************************************************)
(* TLA+ transcription of today's specs/sglang_disagg_v0_5_21.py (0.5.19's  *)
(* actions, 0.5.20's prefill_send, 0.5.21's arrive and decode_forward),    *)
(* with its eleven invariants, and of the temporal properties and fairness *)
(* that bench/liveness/sglang_disagg_live.py states (the incident model    *)
(* states them itself since e72fa09, with the same definitions).           *)
(*                                                                         *)
(* Adapted from bench/peers/SglangDisagg.tla (a transcription of the       *)
(* project's earlier 0.5.21/0.5.22 models, which differ from today's):     *)
(* the page-pool vocabulary (ownership/vocab/pool.py) and its ghost        *)
(* history variables are copied unchanged, so a state here is in           *)
(* bijection with the explorer's state:                                    *)
(*   Enum values -> strings, Optional(Req) None -> NoOne,                  *)
(*   SetOf(Req) -> SUBSET Reqs, pages 0..n-1 -> model values.              *)
(* TLC finds exactly the explorer's distinct states, with and without      *)
(* symmetry (bench/liveness_bench.py checks it on every run).  Variable    *)
(* names are the spec's.  Configs: liveness_bench.py --write-cfgs DIR      *)
(* writes every one it runs; live_default.cfg and live_r3.cfg are two.     *)
(***************************************************************************)
EXTENDS Integers, FiniteSets, TLC

CONSTANTS Reqs, PPages, DPages, NoOne,
          PageSize, ContextLen, PrefillPoolTokens, DecodePoolTokens,
          ShortPromptTokens, PromptTokens,
          PrefillAutoTruncate, DecodeAutoTruncate, KvChecksum

CeilDiv(a, b) == (a + b - 1) \div b
Min(a, b) == IF a < b THEN a ELSE b

\* domain sizes follow the parameters, as in the spec's own.pool(...) declarations
ASSUME Cardinality(PPages) = CeilDiv(PrefillPoolTokens, PageSize)
ASSUME Cardinality(DPages) = CeilDiv(DecodePoolTokens, PageSize)
ASSUME NoOne \notin Reqs

PromptLens == {ShortPromptTokens, PromptTokens}                  \* spec.values("PromptLen")
PrefillMax == Min(ContextLen - 1, PrefillPoolTokens - 1)         \* prefill_max_req_input_len
DecodeMax  == Min(ContextLen - 1, DecodePoolTokens - 1)          \* decode_max_req_input_len

VARIABLES
  \* Ownership(spec, requests=Req): ghost history
  read_foreign, read_unwritten, wrote_unowned,
  \* own.pool("prefill", ...) and own.pool("decode", ...)
  prefill_free, prefill_holders, prefill_slot, prefill_content,
  decode_free, decode_holders, decode_slot, decode_content,
  \* prefill node's Req
  p_queue, p_input_len, p_to_finish, p_finished,
  \* decode node's Req
  d_queue, d_input_len, d_to_finish, d_finished,
  \* the transfer and the client
  kv, kv_tokens, http

ghost == <<read_foreign, read_unwritten, wrote_unowned>>
ppool == <<prefill_free, prefill_holders, prefill_slot, prefill_content>>
dpool == <<decode_free, decode_holders, decode_slot, decode_content>>
preq  == <<p_queue, p_input_len, p_to_finish, p_finished>>
dreq  == <<d_queue, d_input_len, d_to_finish, d_finished>>
vars  == <<ghost, ppool, dpool, preq, dreq, kv, kv_tokens, http>>

Init ==
  /\ read_foreign    = [r \in Reqs |-> NoOne]
  /\ read_unwritten  = [r \in Reqs |-> FALSE]
  /\ wrote_unowned   = [r \in Reqs |-> FALSE]
  /\ prefill_free    = [p \in PPages |-> 1]
  /\ prefill_holders = [p \in PPages |-> {}]
  /\ prefill_slot    = [p \in PPages |-> -1]
  /\ prefill_content = [p \in PPages |-> NoOne]
  /\ decode_free     = [p \in DPages |-> 1]
  /\ decode_holders  = [p \in DPages |-> {}]
  /\ decode_slot     = [p \in DPages |-> -1]
  /\ decode_content  = [p \in DPages |-> NoOne]
  /\ p_queue     = [r \in Reqs |-> "IDLE"]
  /\ p_input_len = [r \in Reqs |-> 0]
  /\ p_to_finish = [r \in Reqs |-> FALSE]
  /\ p_finished  = [r \in Reqs |-> "NONE"]
  /\ d_queue     = [r \in Reqs |-> "IDLE"]
  /\ d_input_len = [r \in Reqs |-> 0]
  /\ d_to_finish = [r \in Reqs |-> FALSE]
  /\ d_finished  = [r \in Reqs |-> "NONE"]
  /\ kv          = [r \in Reqs |-> "NONE"]
  /\ kv_tokens   = [r \in Reqs |-> 0]
  /\ http        = [r \in Reqs |-> "NONE"]

(* -- the page-pool vocabulary ------------------------------------------- *)
RECURSIVE SetSum(_, _)
SetSum(f, S) == IF S = {} THEN 0 ELSE LET x == CHOOSE y \in S : TRUE IN f[x] + SetSum(f, S \ {x})

\* pool.available(s): length of the free list
Available(free, Pages) == SetSum(free, Pages)
\* pool.alloc(s, r, n): every injective assignment of slots 0..n-1 to free pages (s.choose per slot)
Allocs(free, Pages, n) ==
  {f \in [0..(n - 1) -> Pages] : /\ \A i \in 0..(n - 1) : free[f[i]] > 0
                                /\ \A i, j \in 0..(n - 1) : i # j => f[i] # f[j]}
Range(f) == {f[i] : i \in DOMAIN f}
SlotOf(f, p) == CHOOSE i \in DOMAIN f : f[i] = p
\* the pages in r's page table, and the one in slot i (pages_of(s, r)[i] while slots are 0..k-1)
Held(holders, r) == {p \in DOMAIN holders : r \in holders[p]}
PageAt(holders, slot, r, i) == CHOOSE p \in Held(holders, r) : slot[p] = i

PrefillTake(r, f) ==
  /\ prefill_free'    = [p \in PPages |-> IF p \in Range(f) THEN prefill_free[p] - 1 ELSE prefill_free[p]]
  /\ prefill_holders' = [p \in PPages |-> IF p \in Range(f) THEN prefill_holders[p] \cup {r} ELSE prefill_holders[p]]
  /\ prefill_slot'    = [p \in PPages |-> IF p \in Range(f) THEN SlotOf(f, p) ELSE prefill_slot[p]]
DecodeTake(r, f) ==
  /\ decode_free'    = [p \in DPages |-> IF p \in Range(f) THEN decode_free[p] - 1 ELSE decode_free[p]]
  /\ decode_holders' = [p \in DPages |-> IF p \in Range(f) THEN decode_holders[p] \cup {r} ELSE decode_holders[p]]
  /\ decode_slot'    = [p \in DPages |-> IF p \in Range(f) THEN SlotOf(f, p) ELSE decode_slot[p]]
\* pool.free(s, r): every page r holds goes back to the free list (content stays)
PrefillFree(r) ==
  /\ prefill_free'    = [p \in PPages |-> IF r \in prefill_holders[p] THEN prefill_free[p] + 1 ELSE prefill_free[p]]
  /\ prefill_holders' = [p \in PPages |-> prefill_holders[p] \ {r}]
  /\ prefill_slot'    = [p \in PPages |-> IF r \in prefill_holders[p] THEN -1 ELSE prefill_slot[p]]
DecodeFree(r) ==
  /\ decode_free'    = [p \in DPages |-> IF r \in decode_holders[p] THEN decode_free[p] + 1 ELSE decode_free[p]]
  /\ decode_holders' = [p \in DPages |-> decode_holders[p] \ {r}]
  /\ decode_slot'    = [p \in DPages |-> IF r \in decode_holders[p] THEN -1 ELSE decode_slot[p]]


(* -- arrival: 0.5.21 arrive (each node retires its own rejection at the door) -- *)
Arrive(r, len) ==
  /\ p_queue[r] = "IDLE" /\ d_queue[r] = "IDLE"
  /\ IF len >= PrefillMax /\ PrefillAutoTruncate = 0
       THEN /\ p_to_finish' = [p_to_finish EXCEPT ![r] = TRUE]
            /\ p_input_len' = [p_input_len EXCEPT ![r] = 1]
            /\ p_finished'  = [p_finished EXCEPT ![r] = "ABORT"]    \* retire_unadmitted_request
            /\ p_queue'     = [p_queue EXCEPT ![r] = "DONE"]
       ELSE /\ p_input_len' = [p_input_len EXCEPT ![r] = Min(len, PrefillMax)]
            /\ p_queue'     = [p_queue EXCEPT ![r] = "BOOTSTRAP"]
            /\ UNCHANGED <<p_to_finish, p_finished>>
  /\ IF len >= DecodeMax /\ DecodeAutoTruncate = 0
       THEN /\ d_to_finish' = [d_to_finish EXCEPT ![r] = TRUE]
            /\ d_input_len' = [d_input_len EXCEPT ![r] = 1]
            /\ d_finished'  = [d_finished EXCEPT ![r] = "ABORT"]
            /\ http'        = [http EXCEPT ![r] = "ERROR_400"]
            /\ d_queue'     = [d_queue EXCEPT ![r] = "DONE"]
       ELSE /\ d_input_len' = [d_input_len EXCEPT ![r] = Min(len, DecodeMax)]
            /\ d_queue'     = [d_queue EXCEPT ![r] = "PREALLOC"]
            /\ UNCHANGED <<d_to_finish, d_finished, http>>
  /\ UNCHANGED <<ghost, ppool, dpool, kv, kv_tokens>>

(* -- decode node ------------------------------------------------------------ *)
DecodePopPreallocated(r) ==
  /\ d_queue[r] = "PREALLOC"
  /\ IF d_finished[r] = "ABORT"                                    \* the only rejection it looks at
       THEN /\ d_queue' = [d_queue EXCEPT ![r] = "DONE"]
            /\ UNCHANGED <<ghost, ppool, dpool, preq, d_input_len, d_to_finish, d_finished, kv, kv_tokens, http>>
       ELSE LET need == CeilDiv(d_input_len[r], PageSize) IN
            /\ Available(decode_free, DPages) >= need              \* page budget; else stays queued
            /\ \E f \in Allocs(decode_free, DPages, need) : DecodeTake(r, f)
            /\ kv' = [kv EXCEPT ![r] = "WAITING_FOR_INPUT"]
            /\ d_queue' = [d_queue EXCEPT ![r] = "TRANSFER"]
            /\ UNCHANGED <<ghost, ppool, decode_content, preq, d_input_len, d_to_finish, d_finished, kv_tokens, http>>

DecodePopTransferred(r) ==
  /\ d_queue[r] = "TRANSFER"
  /\ kv[r] \in {"SUCCESS", "FAILED"}
  /\ IF kv[r] = "FAILED"
       THEN /\ d_finished' = [d_finished EXCEPT ![r] = "ABORT"]
            /\ http' = [http EXCEPT ![r] = "ERROR_400"]
            /\ DecodeFree(r)
            /\ d_queue' = [d_queue EXCEPT ![r] = "DONE"]
            /\ UNCHANGED <<ghost, ppool, decode_content, preq, d_input_len, d_to_finish, kv, kv_tokens>>
       ELSE /\ d_queue' = [d_queue EXCEPT ![r] = "RUNNING"]
            /\ UNCHANGED <<ghost, ppool, dpool, preq, d_input_len, d_to_finish, d_finished, kv, kv_tokens, http>>

\* 0.5.21 decode_forward: the opt-in KV checksum, then decode_forward_checked (0.5.19)
DecodeForward(r) ==
  /\ d_queue[r] = "RUNNING"
  /\ IF KvChecksum = 1 /\ CeilDiv(kv_tokens[r], PageSize) # Cardinality(Held(decode_holders, r))
       THEN /\ d_finished' = [d_finished EXCEPT ![r] = "ABORT"]
            /\ http' = [http EXCEPT ![r] = "ERROR_500"]
            /\ DecodeFree(r)
            /\ d_queue' = [d_queue EXCEPT ![r] = "DONE"]
            /\ UNCHANGED <<ghost, ppool, decode_content, preq, d_input_len, d_to_finish, kv, kv_tokens>>
     ELSE IF d_to_finish[r]
       THEN /\ d_finished' = [d_finished EXCEPT ![r] = "ABORT"]
            /\ http' = [http EXCEPT ![r] = "ERROR_400"]
            /\ DecodeFree(r)
            /\ d_queue' = [d_queue EXCEPT ![r] = "DONE"]
            /\ UNCHANGED <<ghost, ppool, decode_content, preq, d_input_len, d_to_finish, kv, kv_tokens>>
       \* decode_pool.read(s, r, pages_of(s, r)): first foreign content (in slot order) and unwritten pages recorded
       ELSE LET mine    == Held(decode_holders, r)
                foreign == {p \in mine : decode_content[p] \notin {NoOne, r}}
                first   == CHOOSE p \in foreign : \A q \in foreign : decode_slot[p] <= decode_slot[q]
            IN /\ read_unwritten' = IF \E p \in mine : decode_content[p] = NoOne
                                      THEN [read_unwritten EXCEPT ![r] = TRUE] ELSE read_unwritten
               /\ read_foreign' = IF read_foreign[r] = NoOne /\ foreign # {}
                                    THEN [read_foreign EXCEPT ![r] = decode_content[first]] ELSE read_foreign
               /\ http' = [http EXCEPT ![r] = "OK_200"]
               /\ d_queue' = [d_queue EXCEPT ![r] = "FINISHED"]
               /\ UNCHANGED <<wrote_unowned, ppool, dpool, preq, d_input_len, d_to_finish, d_finished, kv, kv_tokens>>

DecodeFinish(r) ==
  /\ d_queue[r] = "FINISHED"
  /\ d_finished' = [d_finished EXCEPT ![r] = "LENGTH"]
  /\ DecodeFree(r)
  /\ d_queue' = [d_queue EXCEPT ![r] = "DONE"]
  /\ UNCHANGED <<ghost, ppool, decode_content, preq, d_input_len, d_to_finish, kv, kv_tokens, http>>

DecodeTransferTimeout(r) ==
  /\ d_queue[r] = "TRANSFER" /\ kv[r] = "WAITING_FOR_INPUT"
  /\ kv' = [kv EXCEPT ![r] = "FAILED"]
  /\ UNCHANGED <<ghost, ppool, dpool, preq, dreq, kv_tokens, http>>

(* -- prefill node ----------------------------------------------------------- *)
PrefillPopBootstrapped(r) ==
  /\ p_queue[r] = "BOOTSTRAP" /\ kv[r] = "WAITING_FOR_INPUT"
  /\ p_input_len[r] <= PrefillPoolTokens
  /\ p_queue' = [p_queue EXCEPT ![r] = "WAITING"]
  /\ UNCHANGED <<ghost, ppool, dpool, p_input_len, p_to_finish, p_finished, dreq, kv, kv_tokens, http>>

\* alloc then write: the pages just taken are held by r, so the write is never unowned
PrefillForward(r) ==
  /\ p_queue[r] = "WAITING"
  /\ LET n == CeilDiv(p_input_len[r], PageSize) IN
       /\ Available(prefill_free, PPages) >= n
       /\ \E f \in Allocs(prefill_free, PPages, n) :
            /\ PrefillTake(r, f)
            /\ prefill_content' = [p \in PPages |-> IF p \in Range(f) THEN r ELSE prefill_content[p]]
  /\ p_queue' = [p_queue EXCEPT ![r] = "FORWARDED"]
  /\ UNCHANGED <<ghost, dpool, p_input_len, p_to_finish, p_finished, dreq, kv, kv_tokens, http>>

\* 0.5.20 prefill_send: an aborted result is retired; any other is sent with
\* send_kv_chunk = transfer(s, r, prefill_pool, decode_pool, min(pages, decode's table)), then freed
PrefillSend(r) ==
  /\ p_queue[r] = "FORWARDED" /\ kv[r] = "WAITING_FOR_INPUT"
  /\ IF p_to_finish[r]
       THEN /\ PrefillFree(r)
            /\ p_finished' = [p_finished EXCEPT ![r] = "ABORT"]
            /\ p_queue' = [p_queue EXCEPT ![r] = "DONE"]
            /\ UNCHANGED <<ghost, prefill_content, dpool, p_input_len, p_to_finish, dreq, kv, kv_tokens, http>>
       ELSE LET src == Held(prefill_holders, r)
                dst == Held(decode_holders, r)
                n   == Min(CeilDiv(p_input_len[r], PageSize), Cardinality(dst))
            IN /\ n <= Cardinality(src)
               /\ decode_content' = [p \in DPages |->
                     IF p \in dst /\ decode_slot[p] < n
                       THEN prefill_content[PageAt(prefill_holders, prefill_slot, r, decode_slot[p])]
                       ELSE decode_content[p]]
               /\ wrote_unowned' = IF n > Cardinality(dst) THEN [wrote_unowned EXCEPT ![r] = TRUE] ELSE wrote_unowned
               /\ kv_tokens' = [kv_tokens EXCEPT ![r] = p_input_len[r]]
               /\ kv' = [kv EXCEPT ![r] = "SUCCESS"]
               /\ PrefillFree(r)
               /\ p_finished' = [p_finished EXCEPT ![r] = "LENGTH"]
               /\ p_queue' = [p_queue EXCEPT ![r] = "DONE"]
               /\ UNCHANGED <<read_foreign, read_unwritten, prefill_content, decode_free, decode_holders,
                              decode_slot, p_input_len, p_to_finish, dreq, http>>

PrefillTransferFailed(r) ==
  /\ p_queue[r] \in {"BOOTSTRAP", "WAITING", "FORWARDED"} /\ kv[r] = "FAILED"
  /\ PrefillFree(r)
  /\ p_finished' = [p_finished EXCEPT ![r] = "ABORT"]
  /\ p_queue' = [p_queue EXCEPT ![r] = "DONE"]
  /\ UNCHANGED <<ghost, prefill_content, dpool, p_input_len, p_to_finish, dreq, kv, kv_tokens, http>>

Next == \E r \in Reqs :
          \/ \E len \in PromptLens : Arrive(r, len)
          \/ DecodePopPreallocated(r)
          \/ DecodePopTransferred(r)
          \/ DecodeForward(r)
          \/ DecodeFinish(r)
          \/ DecodeTransferTimeout(r)
          \/ PrefillPopBootstrapped(r)
          \/ PrefillForward(r)
          \/ PrefillSend(r)
          \/ PrefillTransferFailed(r)

Spec == Init /\ [][Next]_vars

(* -- fairness (sglang_disagg_live.py): weak on every engine step, per request; *)
(* none on Arrive.  WF_vars(Next) is the explorer's rule that a path does not  *)
(* stop while some action can run (docs/liveness.md); a state where nothing     *)
(* can run stutters for ever (TLC -deadlock).                                   *)
EngineFair ==
  \A r \in Reqs :
    /\ WF_vars(DecodePopPreallocated(r))
    /\ WF_vars(DecodePopTransferred(r))
    /\ WF_vars(DecodeForward(r))
    /\ WF_vars(DecodeFinish(r))
    /\ WF_vars(DecodeTransferTimeout(r))
    /\ WF_vars(PrefillPopBootstrapped(r))
    /\ WF_vars(PrefillForward(r))
    /\ WF_vars(PrefillSend(r))
    /\ WF_vars(PrefillTransferFailed(r))
LiveSpec == Spec /\ WF_vars(Next) /\ EngineFair

(* -- temporal properties: own.properties(ended=..., started=...) ------------ *)
Started(r) == p_queue[r] # "IDLE" \/ d_queue[r] # "IDLE"        \* started(s, r): the request arrived
Ended(r) == http[r] # "NONE"                                     \* ended(s, r): the client has its answer
HoldsNoPage(r) ==                                                \* holds_no_page: in no pool's table
  /\ \A p \in PPages : r \notin prefill_holders[p]
  /\ \A p \in DPages : r \notin decode_holders[p]
RequestsFinish == \A r \in Reqs : Started(r) ~> Ended(r)        \* requests_finish
PagesReturn    == \A r \in Reqs : Ended(r) ~> HoldsNoPage(r)    \* pages_return
\* a property that must fail (the verdict cross-check): a rejected prompt is answered 400, never 200
EveryRequestGets200 == \A r \in Reqs : Started(r) ~> (http[r] = "OK_200")

(* -- invariants: own.invariants("no_foreign_read", "no_unowned_write",
      "no_double_ownership", "pages_returned_when_idle"), 0.5.20's
      "no_read_of_unwritten" and 0.5.21's six --------------------------------- *)
NoForeignRead    == \A r \in Reqs : read_foreign[r] = NoOne
NoUnownedWrite   == \A r \in Reqs : ~wrote_unowned[r]
NoReadOfUnwritten == \A r \in Reqs : ~read_unwritten[r]
NoDoubleOwnership ==
  /\ \A p \in PPages : Cardinality(prefill_holders[p]) <= 1 /\ ~(prefill_holders[p] # {} /\ prefill_free[p] # 0)
  /\ \A p \in DPages : Cardinality(decode_holders[p]) <= 1 /\ ~(decode_holders[p] # {} /\ decode_free[p] # 0)
Idle == \A r \in Reqs : p_queue[r] \in {"IDLE", "DONE"} /\ d_queue[r] \in {"IDLE", "DONE"}   \* nothing_in_flight
PagesReturnedWhenIdle ==
  Idle => /\ \A p \in PPages : prefill_holders[p] = {} /\ prefill_free[p] = 1
          /\ \A p \in DPages : decode_holders[p] = {} /\ decode_free[p] = 1
RejectedNeverGets200 == \A r \in Reqs : ~((p_to_finish[r] \/ d_to_finish[r]) /\ http[r] = "OK_200")
RejectedPrefillNeverRuns ==
  \A r \in Reqs : p_to_finish[r] => /\ p_queue[r] \notin {"WAITING", "FORWARDED"}
                                    /\ (p_queue[r] = "DONE" => p_finished[r] = "ABORT")
PrefillAbortsOnlyRejectedOrFailed == \A r \in Reqs : p_finished[r] # "ABORT" \/ p_to_finish[r] \/ kv[r] = "FAILED"
PrefillRunsForAReservation ==
  \A r \in Reqs : p_queue[r] \notin {"WAITING", "FORWARDED"} \/ kv[r] \in {"WAITING_FOR_INPUT", "FAILED"}
PagesMatchQueues ==
  \A r \in Reqs :
    LET dh == Cardinality(Held(decode_holders, r))
        ph == Cardinality(Held(prefill_holders, r))
    IN /\ IF d_queue[r] \in {"TRANSFER", "RUNNING", "FINISHED"} THEN dh = CeilDiv(d_input_len[r], PageSize) ELSE dh = 0
       /\ IF p_queue[r] = "FORWARDED" THEN ph = CeilDiv(p_input_len[r], PageSize) ELSE ph = 0
ResponseMatchesFinish ==
  \A r \in Reqs :
    CASE d_queue[r] = "DONE" -> \/ http[r] \in {"ERROR_400", "ERROR_500"} /\ d_finished[r] = "ABORT"
                                \/ http[r] = "OK_200" /\ d_finished[r] = "LENGTH"
      [] d_queue[r] = "FINISHED" -> http[r] = "OK_200" /\ d_finished[r] = "NONE"
      [] OTHER -> http[r] = "NONE" /\ d_finished[r] = "NONE"

\* Translation check, not a spec invariant: each request's slots in a pool are exactly 0..k-1, so
\* "the page in slot i" (used above) is pages_of(s, r)[i] (the spec's slot-sorted list).
SlotsWellFormed ==
  \A r \in Reqs :
    /\ {prefill_slot[p] : p \in Held(prefill_holders, r)} = 0..(Cardinality(Held(prefill_holders, r)) - 1)
    /\ {decode_slot[p] : p \in Held(decode_holders, r)} = 0..(Cardinality(Held(decode_holders, r)) - 1)

\* symmetry: requests x prefill pages x decode pages (the group the explorer reduces by:
\* Req permutations and page row sorting)
SymAll  == {a @@ b @@ c : a \in Permutations(Reqs), b \in Permutations(PPages), c \in Permutations(DPages)}
=============================================================================
