"""A spec bound to concrete parameter values, and its concrete semantics.

An :class:`Instance` fixes every parameter, so every domain has a size and
every state is a flat tuple of ints/bools/None laid out variable by variable.
It runs actions (enumerating every outcome of ``s.choose``), evaluates
invariants, and converts states to and from their JSON form.  Every engine's
counterexample is replayed through :meth:`Instance.successors_of` before it is
shown: this module is the reference semantics.

This module holds the instance (its parameters, layout and action
instances) and the view ``s`` it hands to spec code, with the events spec
code emits.  The rest of the semantics is in one module per job, mixed into
:class:`Instance`: running actions (:mod:`ownership.lang.successors`), the
determinism audit (:mod:`ownership.lang.audit`), evaluating invariants
(:mod:`ownership.lang.invariants`) and the readable forms of a state
(:mod:`ownership.lang.statejson`); how variables sit in the state tuple is
:mod:`ownership.lang.fields`.  It runs a little over 400 lines because the
view and the instance are one object graph on the explorer's hot path: the
view's private lists (``_cells``, ``_picks``, ``_reads``) are read directly
by the successor loop, and the view is built from the instance's layout.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ownership.core.events import Event, make_event
from ownership.errors import Code, OwnershipError, SpecWarning, caller_location, location_in
from ownership.lang.audit import DeterminismAudit
from ownership.lang.declarations import Action, Domain, Params, Values
from ownership.lang.elements import Element, Elements, checker_caller, element_set, ix, symmetry_error
from ownership.lang.fields import Layout, make_field
from ownership.lang.guard import Disabled
from ownership.lang.invariants import InvariantChecks, known_invariant, refused_step_member
from ownership.lang.model import Spec
from ownership.lang.purity import check_static
from ownership.lang.statejson import StateCodec
from ownership.lang.successors import ActionInstance, Footprint, Successors
from ownership.lang.types import Ref, RefSet
from ownership.lang.writes import value_checker

if TYPE_CHECKING:
    from ownership.lang.evaluator import Evaluator

State = tuple[Any, ...]
"""A concrete state: one flat tuple, variables laid out in declaration order."""


def _plain(value: Any) -> Any:
    """An event field with elements replaced by their display names (spec code passes the elements).

    Events are for display; spec code may not turn an element of a symmetric
    domain into its name itself (the name would order the elements), so the
    view does it here, where nothing can decide on the result.
    """
    if value.__class__ is Element:
        return value._Element__name
    if isinstance(value, (list, tuple)) and any(v.__class__ is Element for v in value):
        return type(value)(v._Element__name if v.__class__ is Element else v for v in value)
    return value


def raw_cells_error() -> OwnershipError:
    """``s.cur``: the raw cell list is the engines' own, and reading it hides reads from the checker.

    The explorer skips re-running a disabled action when the cells its guard
    read are unchanged; a read that bypasses the variables is not in that log,
    so such a spec could be skipped in states where it would fire.
    """
    file, line = caller_location(3)
    return OwnershipError(
        Code.SPEC_IMPURE,
        "s.cur is not part of the view: read state through its variables (s.var[i], s.scalar), "
        "so the checker sees every cell an action or invariant depends on",
        file,
        line,
    )


class ViewBase:
    """What every engine's ``s`` offers spec code besides its state cells.

    Subclasses set ``_inst`` (the :class:`Instance`); the concrete view, the
    symbolic view and the parametric explorer's view differ only in how cells
    are stored.
    """

    _inst: Instance
    recording = False

    def all(self, domain: Domain) -> range:
        """Every element of ``domain`` (as indices)."""
        return range(self._inst.sizes[domain.name])

    def size(self, domain: Domain) -> int:
        """Number of elements of ``domain``."""
        return self._inst.sizes[domain.name]

    def name_of(self, domain: Domain, element: Any) -> str:
        """Display name of an element (``"-"`` for None, ``"?"`` for a symbolic one).

        For the checker's rendering: spec code asking the name of an element
        of a symmetric domain is refused (OWN060), since a name orders the
        elements as well as an index does.
        """
        if element is None:
            return "-"
        if domain.symmetric and not checker_caller(1):
            raise symmetry_error(domain.name, f"asks the name of an element of {domain.name}", names=True)
        if element.__class__ is Element:
            return element._Element__name  # type: ignore[no-any-return]
        return self._inst.names[domain.name][element] if isinstance(element, int) else "?"

    def terminal(self) -> bool:
        """The spec's ``@spec.terminal`` predicate on this state (nothing in flight)."""
        done = self._inst.spec.done
        if done is None:
            raise OwnershipError(Code.SPEC_INVALID, "no @spec.terminal predicate declared", self._inst.spec.file, self._inst.spec.line)
        return bool(done(self))

    def checks(self, invariant: str) -> bool:
        """Whether the spec checks ``invariant`` (events only flag what is checked)."""
        return invariant in self._inst.spec.invariants

    def emit(self, kind: str | Event, violates: str | None = None, **fields: Any) -> None:
        """Record an event for the trace picture; only views that record keep it.

        ``kind`` is a kind name with its ``fields`` (what specs write:
        ``s.emit("reply", req=..., status=200)``) or a declared
        :class:`~ownership.core.events.Event` (what the vocabulary builds).
        ``violates=X`` (or the event's own ``violates``) makes the step a
        violation of invariant ``X`` (when it is checked) in every engine,
        recording or not.
        """
        bad = kind.violates if isinstance(kind, Event) else violates
        if bad is not None:
            self.flag(bad)

    def _known(self, invariant: str) -> None:
        """OWN004 unless ``invariant`` is one of the spec's: a misspelt name would never be a violation."""
        known_invariant(self._inst.spec, invariant)

    def flag(self, invariant: str, when: Any = True) -> None:
        """This step violates ``invariant`` (if ``when``): what ``emit(..., violates=X)`` records.

        Vocabulary code calls it where the event itself is only built while
        recording; under the Z3 engines ``when`` may be a symbolic bool, which
        records the condition without forking the path.
        """
        return None


class View(ViewBase):
    """The ``s`` that actions and invariants receive.

    Variables are attributes (``s.d_state[r]``, ``s.clock``), parameters are
    ``s.params.NAME``, domains are iterated with ``s.all(Req)``.  Writes go to
    a private copy of the state, so a disabled action leaves nothing behind.
    """

    symbolic = False
    """True only under the Z3 engine (vocabulary operations check it)."""

    def __init__(self, instance: Instance) -> None:
        object.__setattr__(self, "_inst", instance)
        object.__setattr__(self, "_cells", [None] * instance.width)
        object.__setattr__(self, "params", instance.params)
        object.__setattr__(self, "_events", [])
        object.__setattr__(self, "_judging", False)
        object.__setattr__(self, "_picks", [])
        object.__setattr__(self, "_counts", [])
        object.__setattr__(self, "_prefix", [])
        object.__setattr__(self, "_chosen", [])
        object.__setattr__(self, "_labels", [])
        object.__setattr__(self, "_forced", None)
        object.__setattr__(self, "_chooser", None)
        object.__setattr__(self, "_reduce", frozenset())
        object.__setattr__(self, "recording", True)
        object.__setattr__(self, "_scalars", {})
        object.__setattr__(self, "_scalar_put", {})
        object.__setattr__(self, "_scalar_wrap", {})
        object.__setattr__(self, "_reads", [])
        object.__setattr__(self, "_writes", [])
        object.__setattr__(self, "_flags", [])
        cur = self._cells
        reads = self._reads
        writes = self._writes
        symmetric = instance.elements.keys()
        for lay in instance.layouts.values():
            var = instance.spec.vars[lay.name]
            put = value_checker(var, instance.sizes, symmetric)
            if not lay.shape:
                self._scalars[lay.name] = lay.offset
                self._scalar_put[lay.name] = put
                named = var.type.refers_to() if isinstance(var.type, (Ref, RefSet)) else None
                if named in instance.elements:
                    self._scalar_wrap[lay.name] = (instance.elements[named], isinstance(var.type, RefSet))
            else:
                object.__setattr__(self, lay.name, make_field(cur, lay, reads, writes, var, put, instance.elements,
                                                              instance.all_of))

    def __getattr__(self, name: str) -> Any:
        scalars = object.__getattribute__(self, "_scalars")
        if name in scalars:
            self._reads.append(scalars[name])
            v = self._cells[scalars[name]]
            if v is not None and name in self._scalar_wrap:
                elems, is_set = self._scalar_wrap[name]
                if not is_set:
                    return elems[v]
                # A set of a symmetric domain: the mask for the checker, the elements for spec code.
                return v if checker_caller(1) else element_set(v, elems)
            return v
        if name == "cur":
            raise raw_cells_error()
        raise AttributeError(f"spec has no state variable or view method {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._scalars:
            pos = self._scalars[name]
            self._cells[pos] = self._scalar_put[name](value)
            self._writes.append(pos)
            return
        raise AttributeError(f"cannot assign {name!r}: not a scalar state variable")

    def choose(self, options: Sequence[Any], label: str = "choice", *, domain: Domain | None = None) -> Any:
        """Nondeterministic choice: every option is explored as its own successor.

        An empty ``options`` disables the action.  Options should be domain
        elements or ints (the trace records the chosen value, and when
        recording, ``label`` with the value's name: the tables and the
        picture say what each choice decided).  Passing the
        ``domain`` of the options lets a symmetry-reducing search try only one
        of several elements that are indistinguishable right now.
        """
        if options.__class__ is Elements:
            options = options._Elements__items  # type: ignore[attr-defined]
        if not options:
            raise Disabled
        pos = len(self._picks)
        forced = self._forced
        if forced is not None:
            # Replaying a recorded trace: take the recorded value if it is allowed here
            # (traces hold plain indices, options may be elements).
            plain = [ix(o) for o in options]
            if pos >= len(forced) or forced[pos] not in plain:
                raise Disabled
            value = options[plain.index(forced[pos])]
            self._picks.append(0)
            self._counts.append(1)
            self._chosen.append(ix(value))
            if self.recording:
                self._labels.append((label, self._shown_choice(value, domain)))
            return value
        chooser = self._chooser
        if chooser is not None:
            # A random search (Hypothesis) draws the value itself.
            value = chooser(options)
            self._picks.append(next(k for k, o in enumerate(options) if o is value or (o.__class__ is not Element and o == value)))
            self._counts.append(len(options))
            self._chosen.append(ix(value))
            if self.recording:
                self._labels.append((label, self._shown_choice(value, domain)))
            return value
        if domain is not None and domain.name in self._reduce:
            options = self._inst.distinct_elements(domain.name, options, self._cells)
        idx = self._prefix[pos] if pos < len(self._prefix) else 0
        value = options[idx]
        self._picks.append(idx)
        self._counts.append(len(options))
        self._chosen.append(value._Element__i if value.__class__ is Element else value)
        if self.recording:
            self._labels.append((label, self._shown_choice(value, domain)))
        return value

    def _shown_choice(self, value: Any, domain: Domain | None) -> str:
        """A chosen value as the trace shows it: an element's name, ``yes``/``no``, else the value."""
        if value.__class__ is Element:
            return str(value._Element__name)
        if isinstance(value, bool):
            return "yes" if value else "no"
        if domain is not None and isinstance(value, int):
            return self.name_of(domain, value)
        return str(value)

    def emit(self, kind: str | Event, violates: str | None = None, **fields: Any) -> None:
        """Record an event for the trace picture (reads, writes, replies); see :meth:`ViewBase.emit`.

        Searches turn recording off (``s.recording`` is false) because events
        are rebuilt when the trace is replayed; code that computes costly
        event fields can check ``s.recording`` first.
        """
        if self._judging:
            raise refused_step_member(self, "emit")
        if isinstance(kind, Event):
            if fields or violates is not None:
                raise TypeError("emit(event) takes no other arguments: the event carries its fields and violates")
            violates = kind.violates
        if violates is not None and violates not in self._flags:
            # Kept whether or not recording: a violating event is a violation in every engine.
            if violates not in self._inst.spec.invariants:
                known_invariant(self._inst.spec, violates)
            self._flags.append(violates)
        if self.recording:
            if isinstance(kind, Event):
                self._events.append(kind)
            else:
                # Events hold plain values: names for elements, as the renderers show them.
                self._events.append(make_event(kind, {k: _plain(v) for k, v in fields.items()}, violates))

    @property
    def events(self) -> list[Event]:
        """The events this step recorded so far (OWN064 in an invariant: a state has no events)."""
        if self._judging:
            raise refused_step_member(self, "events")
        return self._events

    def all(self, domain: Domain) -> Any:
        """Every element of ``domain``: :class:`Element` objects for a symmetric domain, else ints."""
        return self._inst.all_of[domain.name]

    def flag(self, invariant: str, when: Any = True) -> None:
        """This step violates ``invariant`` if ``when`` (see :meth:`ViewBase.flag`); OWN064 in an invariant."""
        if self._judging:
            raise refused_step_member(self, "flag")
        if when and invariant not in self._flags:
            if invariant not in self._inst.spec.invariants:
                known_invariant(self._inst.spec, invariant)
            self._flags.append(invariant)


class Instance(Successors, DeterminismAudit, InvariantChecks, StateCodec):
    """A spec with every parameter fixed: the concrete semantics engines share."""

    def __init__(self, spec: Spec, overrides: Mapping[str, int] | None = None) -> None:
        spec.validate()
        check_static(spec)
        self.spec = spec
        values = spec.default_params()
        for name, value in (overrides or {}).items():
            if name not in spec.params:
                known = ", ".join(spec.params) or "none"
                raise OwnershipError(
                    Code.UNKNOWN_PARAM, f"spec {spec.name} has no parameter {name!r} (known: {known})", spec.file, spec.line
                )
            values[name] = value
        for name, p in spec.params.items():  # type and range, refused at the declaration (OWN011)
            values[name] = p.checked(values[name])
        self.param_values = values
        self.params = Params(values)
        self.sizes: dict[str, int] = {}
        self.names: dict[str, Sequence[str]] = {}
        for d in spec.domains.values():
            try:
                n = d.resolve_size(self.params)
            except Exception as exc:  # noqa: BLE001 - user code
                raise OwnershipError(Code.BAD_PARAM, f"size of domain {d.name}: {exc}", spec.file, spec.line) from None
            if n < 0:
                raise OwnershipError(Code.BAD_PARAM, f"domain {d.name} has negative size {n}", spec.file, spec.line)
            self.sizes[d.name] = n
            self.names[d.name] = d.element_names(n)
        # One opaque element per element of each symmetric domain (see ownership.lang.elements).
        self.elements: dict[str, tuple[Element, ...]] = {
            d.name: tuple(Element(d.name, i, self.names[d.name][i]) for i in range(self.sizes[d.name]))
            for d in spec.domains.values()
            if d.symmetric
        }
        # What s.all(D) hands spec code: a symmetric domain's elements never by position.
        self.all_of: dict[str, Any] = {
            d.name: Elements(d.name, self.elements[d.name]) if d.name in self.elements else range(self.sizes[d.name])
            for d in spec.domains.values()
        }
        self.value_sets: dict[str, list[int]] = {}
        for vs in spec.value_sets.values():
            self.value_sets[vs.name] = sorted(set(int(x) for x in vs.values(self.params)))
        self.layouts: dict[str, Layout] = {}
        off = 0
        for var in spec.vars.values():
            shape = tuple(self.sizes[d.name] for d in var.index)
            lay = Layout(var.name, off, shape)
            self.layouts[var.name] = lay
            off += lay.length
        self.width = off
        # Positions of every cell indexed by each element (one domain axis at a time).
        self.element_cells: dict[str, list[list[int]]] = {}
        for d in spec.domains.values():
            cells: list[list[int]] = [[] for _ in range(self.sizes[d.name])]
            for var in spec.vars.values():
                lay = self.layouts[var.name]
                axes = [x.name for x in var.index]
                if axes.count(d.name) != 1:
                    continue
                for k, key in enumerate(itertools.product(*[range(n) for n in lay.shape])):
                    cells[key[axes.index(d.name)]].append(lay.offset + k)
            self.element_cells[d.name] = cells
        self.init_state: State = tuple(
            itertools.chain.from_iterable([v.init] * self.layouts[v.name].length for v in spec.vars.values())
        )
        self.action_instances: list[ActionInstance] = []
        for act in spec.actions.values():
            ranges = [self._arg_values(d) for d in act.arg_domains]
            for args in itertools.product(*ranges):
                label = self.format_call(act, args)
                call = tuple(
                    self.elements[d.name][a] if isinstance(d, Domain) and d.name in self.elements else a
                    for d, a in zip(act.arg_domains, args, strict=True)
                )
                self.action_instances.append(ActionInstance(len(self.action_instances), act, tuple(args), label, call))
        self.invariants = list(spec.invariants.values())
        self.view = View(self)
        self._footprints: list[Footprint | None] = [None] * len(self.action_instances)
        self.warnings: dict[tuple[Any, ...], SpecWarning] = {}
        """Warnings raised while actions ran (e.g. an impossible allocation), once per place; results carry them."""
        self._expanded = 0

    def add_warning(self, warning: SpecWarning) -> None:
        """Record ``warning`` for this instance's results (the first one per code, place and subject)."""
        self.warnings.setdefault((warning.code, warning.file, warning.line, warning.subject), warning)

    # -- helpers ------------------------------------------------------------
    def _arg_values(self, d: Domain | Values) -> list[int]:
        if isinstance(d, Values):
            return self.value_sets[d.name]
        return list(range(self.sizes[d.name]))

    def format_arg(self, d: Domain | Values, value: int) -> str:
        if isinstance(d, Values):
            return str(value)
        return self.names[d.name][value]

    def format_call(self, act: Action, args: Sequence[int]) -> str:
        shown = ", ".join(self.format_arg(d, a) for d, a in zip(act.arg_domains, args, strict=True))
        return f"{act.name}({shown})"

    def parse_arg(self, d: Domain | Values, text: Any) -> int:
        """Inverse of :meth:`format_arg`; raises ``ValueError``."""
        if isinstance(d, Values):
            if isinstance(text, bool) or not isinstance(text, int) or text not in self.value_sets[d.name]:
                raise ValueError(f"{text!r} is not one of {self.value_sets[d.name]}")
            return text
        try:
            return self.names[d.name].index(text)
        except ValueError:
            raise ValueError(f"{text!r} is not an element of {d.name}") from None

    def find_instance(self, name: str, args: Sequence[int]) -> ActionInstance:
        for ai in self.action_instances:
            if ai.action.name == name and ai.args == tuple(args):
                return ai
        raise KeyError(name)

    def _runtime_error(self, what: str, exc: Exception, file: str | None) -> OwnershipError:
        line = location_in(file, exc) if file else None
        return OwnershipError(
            Code.SPEC_RUNTIME, f"{what} raised {type(exc).__name__}: {exc}", file or self.spec.file, line
        )

    # -- the view's modes ----------------------------------------------------
    @contextlib.contextmanager
    def mode(self, *, recording: bool | None = None, choice_reduction: Iterable[str] | None = None) -> Iterator[None]:
        """Within the block, the view records events or not, and reduces choices in the given domains.

        ``recording=False`` skips events (a search's hot loop: events are
        rebuilt when a trace is replayed).  ``choice_reduction`` lets
        ``s.choose(..., domain=D)`` try one of each class of identical
        elements of D, which is only sound while a search reduces states by
        the symmetry of those domains (choosing between two elements whose
        cells are identical leads to states that differ by swapping them,
        which the search merges anyway).  ``None`` leaves a mode as it is.
        Both modes are restored on leaving the block, also on an exception,
        so nested engines (a search inside a check) leave each other's
        modes alone.
        """
        view = self.view
        was_recording, was_reduce = view.recording, view._reduce
        if recording is not None:
            object.__setattr__(view, "recording", recording)
        if choice_reduction is not None:
            object.__setattr__(view, "_reduce", frozenset(choice_reduction))
        try:
            yield
        finally:
            object.__setattr__(view, "recording", was_recording)
            object.__setattr__(view, "_reduce", was_reduce)

    def evaluator(self, *, recording: bool = True, choice_reduction: Iterable[str] = ()) -> Evaluator:
        """This instance's :class:`~ownership.lang.evaluator.Evaluator` with these modes, built on first use.

        An evaluator has a view of its own whose modes never change, so
        callers that keep one need no :meth:`mode` block and touch no private
        cell of the view; one is kept per set of modes.
        """
        from ownership.lang.evaluator import Evaluator

        reduce = frozenset(choice_reduction)
        kept: dict[tuple[bool, frozenset[str]], Evaluator] = self.__dict__.setdefault("_evaluators", {})
        found = kept.get((recording, reduce))
        if found is None:
            found = kept[(recording, reduce)] = Evaluator(self, recording=recording, choice_reduction=reduce)
        return found

    def distinct_elements(self, domain: str, options: Sequence[Any], cur: Sequence[Any]) -> list[Any]:
        """``options`` with all but the first of each group of identical elements removed."""
        rows = self.element_cells[domain]
        seen: set[tuple[Any, ...]] = set()
        out: list[Any] = []
        for e in options:
            sig = tuple([cur[i] for i in rows[ix(e)]])
            if sig not in seen:
                seen.add(sig)
                out.append(e)
        return out

    def describe_params(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.param_values.items())
