"""The Z3 side of the checker below the vocabulary: terms, forking, the symbolic view, the encoding.

``terms`` (the integer encoding and :class:`~ownership.symbolic.terms.Sym`),
``paths`` (forking), ``merge`` (spec functions rewritten so that
and/or/not and fall-through ifs merge paths), ``view`` (the ``s`` of symbolic runs), ``encoding``
(a spec as symbolic paths), ``unroll`` (the transition relation over k
steps), ``extract`` (model to replayed trace), ``lemmas`` (lemma mining),
``solver`` (the solver and parameter constraints).  Nothing here imports
the engines or the vocabulary; every module imports z3, so only the Z3
engines and the vocabulary's encodings load this package (and nothing is
imported here, so ``import ownership.symbolic`` alone costs nothing).
"""
