"""One record per cause: every part of step time and every verdict, with all that is said or drawn of it.

A :class:`Cause` holds what each layer needs to know about one class: its name (also its value in the
JSON reports' enums), its kind (a steady cause, a one-time cost, the capture boundary, the residual
class, a busy part, a verdict), its words (the part-of-step label, the verdict's meaning, the first
response and the levers, the job section's reason, the what-if's assumption), its colour in pictures,
and where its code lives: the rule module that classifies its gaps and the what-if planner that removes
it, named by module path. This package is in the lowest layer (``tests/test_layers.py``): the
vocabulary, the rules, attribution, ranks, the what-if, the renderers, scan and diff all read it, and it
imports nothing else of traceread. The rule and the planner are code of higher
layers; the record names them and each is resolved only by its own layer (``traceread.rules`` imports
the rule modules, ``traceread.whatif.fixes`` the planners), so no import goes up.

Adding a cause is one rule module plus one record: in :data:`BUILTIN` (``traceread.causes.builtin``), or,
for a cause defined outside the package (a plug-in, a test), in a module named by the environment
variable ``TRACEREAD_EXTRA_CAUSES`` (``module:ATTRIBUTE`` of a :class:`Cause` or a sequence of them, comma
separated), read once when this package is imported. :data:`CAUSES` is then fixed for the process.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

# The kinds of cause. A gap class is one of the first four: idle time, classified by a rule.
STEADY = "steady"  # a steady-state cause of idle time: fix it, re-measure
ONE_TIME = "one-time"  # idle time of work done once (compilation, set-up): re-profile, don't fix
BOUNDARY = "boundary"  # idle at the capture's edges: a part of step time, never a cause
RESIDUAL = "residual"  # idle no rule claims (``unattributed``): the last gap class
BUSY = "busy"  # a part of busy time (attribution's kernel classes)
VERDICT = "verdict"  # a run-level verdict only (``healthy``)
GAP_KINDS: tuple[str, ...] = (STEADY, ONE_TIME, BOUNDARY, RESIDUAL)
KINDS: tuple[str, ...] = GAP_KINDS + (BUSY, VERDICT)

ENV = "TRACEREAD_EXTRA_CAUSES"


@dataclass(frozen=True)
class Cause:
    """Everything said, drawn or computed about one part of step time or verdict (see module doc)."""

    name: str  # the class name; also its value in the reports' JSON enums
    kind: str  # one of KINDS
    title: str  # heading of its advice: "Launch-bound"
    meaning: str  # completes "N% of step time ...": "the GPUs wait for the CPU to launch the next kernel"
    first_response: str  # what to do first, ending "then re-measure" where it applies
    levers: tuple[str, ...]  # in the order to try them
    # The row label in "Where the step time goes" and the picture's legend (a gap class: "idle: <name>").
    part_label: str = ""
    verdict: bool = True  # may name a run's dominant cause (the boundary and two busy parts may not)
    colour: str | None = None  # its idle shade in the timeline pictures (gap classes)
    job_reason: str | None = None  # the job section: why a straggler reached a collective late
    # The rule: the module whose ``RULE`` classifies its gaps, and where it stands in the order the rules are
    # tried (lower first; None: the residual class, which takes what no rule claims).
    rule: str | None = None
    precedence: float | None = None
    # The what-if fix: ``module:function`` of its planner (traceread.whatif.fixes.Planner), whether planning
    # reads the classified gaps (then it waits for the rules), and what the replay assumes.
    fix: str | None = None
    fix_reads_gaps: bool = False
    assumption: str = ""
    # Perfetto: the GPU lanes whose work a gap of this class waits on (a flow arrow from it to the gap).
    evidence_lanes: tuple[str, ...] = ()
    # A named piece of evidence (``evidence_kind``) with a fix of its own: kind -> (first response, levers).
    by_evidence: Mapping[str, tuple[str, tuple[str, ...]]] = field(default_factory=lambda: MappingProxyType({}),
                                                               hash=False)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"cause {self.name!r}: kind {self.kind!r} is none of {', '.join(KINDS)}")
        if self.kind in GAP_KINDS and (self.rule is None or self.colour is None or self.job_reason is None):
            raise ValueError(f"cause {self.name!r}: a gap class needs a rule module, a colour and a job reason")
        if (self.rule is not None and self.kind != RESIDUAL) != (self.precedence is not None):
            raise ValueError(f"cause {self.name!r}: a rule needs a precedence (the residual class has none)")
        if not self.part_label and self.kind in GAP_KINDS:
            object.__setattr__(self, "part_label", f"idle: {self.name}")
        if not isinstance(self.by_evidence, MappingProxyType):
            object.__setattr__(self, "by_evidence", MappingProxyType(dict(self.by_evidence)))

    @property
    def is_gap_class(self) -> bool:
        return self.kind in GAP_KINDS

    def response(self, evidence: str = "") -> str:
        """The first response, following a named piece of evidence when it has a fix of its own."""
        own = self.by_evidence.get(evidence)
        return own[0] if own else self.first_response

    def levers_for(self, evidence: str = "") -> tuple[str, ...]:
        """The levers in the order to try them (the evidence's own when it has some)."""
        own = self.by_evidence.get(evidence)
        return own[1] if own else self.levers


def _extra() -> tuple[Cause, ...]:
    """The causes named by ``TRACEREAD_EXTRA_CAUSES`` (see module doc)."""
    out: list[Cause] = []
    for spec in filter(None, (s.strip() for s in os.environ.get(ENV, "").split(","))):
        module, _, attr = spec.partition(":")
        value = getattr(importlib.import_module(module), attr or "CAUSE")
        found = [value] if isinstance(value, Cause) else list(value) if isinstance(value, Sequence) else []
        if not found or not all(isinstance(c, Cause) for c in found):
            raise TypeError(f"{ENV}: {spec} is not a Cause or a sequence of them")
        out += found
    return tuple(out)


def _merge(builtin: Sequence[Cause], extra: Sequence[Cause]) -> tuple[Cause, ...]:
    """The records in report order: extra gap classes after the built-in steady and one-time ones (before the
    capture boundary and the residual class), extra others after the built-in ones of their kind."""
    out = list(builtin)
    for c in extra:
        if any(c.name == o.name for o in out):
            raise ValueError(f"{ENV}: cause {c.name!r} is already defined")
        if c.kind in (BOUNDARY, RESIDUAL):
            raise ValueError(f"{ENV}: cause {c.name!r}: there is one {c.kind} class")
        same = [i for i, o in enumerate(out) if (o.kind in (STEADY, ONE_TIME)) == (c.kind in (STEADY, ONE_TIME))
                and o.is_gap_class == c.is_gap_class]
        out.insert(same[-1] + 1 if same else len(out), c)
    return tuple(out)


def _load() -> tuple[Cause, ...]:
    from traceread.causes.builtin import BUILTIN

    return _merge(BUILTIN, _extra())


CAUSES: tuple[Cause, ...] = _load()
BY_NAME: Mapping[str, Cause] = MappingProxyType({c.name: c for c in CAUSES})


def get(name: str) -> Cause:
    """The record of ``name`` (KeyError for a name that is no cause)."""
    return BY_NAME[name]


def find(name: str) -> Cause | None:
    """The record of ``name``, or None."""
    return BY_NAME.get(name)


def first_response(cause: str, evidence: str = "") -> str:
    """The first response for ``cause`` ('' for a name that is no cause), following its named evidence when
    that evidence has a fix of its own."""
    c = BY_NAME.get(cause)
    return c.response(evidence) if c is not None else ""


def levers(cause: str, evidence: str = "") -> tuple[str, ...]:
    """The levers for ``cause`` in the order to try them (the evidence's own when it has some)."""
    return BY_NAME[cause].levers_for(evidence)


def gap_classes() -> tuple[Cause, ...]:
    """The gap classes in report order (the residual class last)."""
    return tuple(c for c in CAUSES if c.is_gap_class)


def rules_in_order() -> tuple[Cause, ...]:
    """The gap classes that have a rule with a mask, in the order the rules are tried."""
    return tuple(sorted((c for c in CAUSES if c.precedence is not None), key=lambda c: c.precedence or 0.0))


def residual() -> Cause:
    """The class of the gaps no rule claims."""
    return next(c for c in CAUSES if c.kind == RESIDUAL)


def fixes() -> tuple[Cause, ...]:
    """The causes the what-if can remove, in report order."""
    return tuple(c for c in CAUSES if c.fix is not None)


__all__ = ["Cause", "CAUSES", "BY_NAME", "KINDS", "GAP_KINDS", "STEADY", "ONE_TIME", "BOUNDARY", "RESIDUAL", "BUSY",
           "VERDICT", "ENV", "get", "find", "first_response", "levers", "gap_classes", "rules_in_order", "residual", "fixes"]
