"""The pasteable Python that replays a failing run, for a walk's path or for Hypothesis' printed steps."""

from __future__ import annotations

from ownership.core.replay import build_trace
from ownership.engines.hypothesis_engine.machine import PICKS, class_name, rule_names, shown_arg
from ownership.engines.hypothesis_engine.walks import Path
from ownership.lang.instance import Instance


def path_reproduction(inst: Instance, path: Path) -> str:
    """The pasteable reproduction of ``path``, in the form Hypothesis prints its steps."""
    rules = rule_names(inst)
    cls = class_name(inst.spec.name)
    params = ", ".join(f"{k}={v}" for k, v in inst.param_values.items())
    spec_path = build_trace(inst, [], engine="hypothesis", violation=None).spec_path
    lines = [
        "from ownership.engines.hypothesis_engine.machine import load_machine",
        f"{cls} = load_machine({spec_path!r}{', ' if params else ''}{params})",
        f"state = {cls}()",
    ]
    for index, picks in path:
        ai = inst.action_instances[index]
        kwargs = {n: shown_arg(inst, ai, k) for k, n in enumerate(ai.action.arg_names)}
        kwargs[PICKS] = tuple(picks)
        lines.append(f"state.{rules[ai.action.name]}({', '.join(f'{k}={kwargs[k]!r}' for k in sorted(kwargs))})")
    lines.append("state.teardown()")
    return "\n".join(lines)


def hypothesis_reproduction(inst: Instance, exc: BaseException) -> str | None:
    """Hypothesis' printed steps (its exception notes), made runnable by a ``load_machine`` header."""
    steps = [
        ln for ln in getattr(exc, "__notes__", ()) if ln.startswith("state") and not ln.startswith("state.invariant_")
    ]
    if not steps:
        return None
    params = ", ".join(f"{k}={v}" for k, v in inst.param_values.items())
    cls = class_name(inst.spec.name)
    path = build_trace(inst, [], engine="hypothesis", violation=None).spec_path
    head = [
        "from ownership.engines.hypothesis_engine.machine import load_machine",
        f"{cls} = load_machine({path!r}{', ' if params else ''}{params})",
    ]
    return "\n".join(head + steps)
