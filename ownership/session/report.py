"""The sections of the design-review report: each spec checked, drawn and diagnosed.

``ownership report`` runs the engines through the session; this module turns
their results into the :class:`~ownership.render.html.SpecSection` records the
HTML renderer reads: the reproduce command of each run, the picture of each
counterexample, and the diagnosis (``--explain``) of the first violation.
Running the diagnosis is work, not drawing, so it lives here and not in
:mod:`ownership.render`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from ownership.core.result import CheckResult
from ownership.errors import OwnershipError
from ownership.render.html import EngineRun, SpecSection, svg_markup


def build_section(
    spec_path: Path,
    runs: Sequence[tuple[CheckResult, Sequence[str]]],
    params: Mapping[str, int],
    *,
    max_states: int | None = None,
    symmetry: bool = True,
) -> SpecSection:
    """A spec's section from its engines' results (each with its reproduce flags).

    Draws each counterexample and, for the first violated invariant, runs the
    diagnosis over the state graph (bounded by ``max_states``).
    """
    from ownership.analysis.explain.diagnosis import DiagnoseOptions
    from ownership.analysis.explain.necessary import diagnose_result
    from ownership.lang.instance import Instance
    from ownership.lang.loader import load_spec
    from ownership.render.text import reproduce_command

    spec = load_spec(spec_path)
    values = Instance(spec, params).param_values
    engine_runs = []
    for result, flags in runs:
        svg, why = svg_markup(result.trace) if result.trace is not None else (None, "")
        cmd = reproduce_command(str(spec_path), values, spec.default_params(), list(flags))
        engine_runs.append(EngineRun(result, cmd, svg, why))
    diagnosis = None
    note = ""
    violated = next((r for r, _ in runs if r.trace is not None and r.violated is not None), None)
    if violated is not None:
        if violated.violated in spec.invariants:
            options = DiagnoseOptions(symmetry=symmetry, **({"max_states": max_states} if max_states else {}))
            try:
                diagnosis = diagnose_result(spec, violated, options)
            except OwnershipError as exc:
                note = f"no diagnosis: {exc.one_line()}"
        else:
            note = f"no diagnosis for {violated.violated}: only invariant violations are diagnosed"
    return SpecSection(spec, str(spec_path), values, tuple(engine_runs), diagnosis, note)
