"""What each fix would buy: a dependency replay of the trace (docs/whatif.md).

:func:`predict` builds each rank's dependency model (:mod:`traceread.whatif.model`), replays it as
recorded (the replay's own error against the measured median step), then once per fix
(:mod:`traceread.whatif.fixes`) and once with every fix, and returns a :class:`WhatIf`: the
predicted median steady-state step of each fix, its saving, the naive subtraction beside it, and the
assumptions made. :func:`rank_at_speed` is the straggler lever for the job analysis.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, TypeAlias

import numpy as np
import pandas as pd

from traceread import causes
from traceread.config import Thresholds
from traceread.engine.lanes import event_view
from traceread.note import (
    EXTERNAL_STREAM_WAITS,
    INFERRED_WAITS,
    LAUNCHES_NOT_RECORDED,
    UNEXPLAINED_WAITS,
    UNORDERED_DEPENDENCIES,
    Note,
)
from traceread.trace import Trace
from traceread.vocabulary import COMM_BOUND, DATA_STARVED, GAP_CLASSES, LAUNCH_BOUND, part_col
from traceread.whatif import fixes as fx
from traceread.whatif import graphs as gr
from traceread.whatif import model as mdl
from traceread.whatif import replay as rp
from traceread.whatif.fixes import FIX_CAUSES, Bus, Fix, Scale
from traceread.whatif.graph_constants import device_names
from traceread.whatif.nominal import nominal_edges

# ``beside(fn)``: what gives ``fn()``'s result where it is read (the runner makes it on a thread meanwhile)
Beside: TypeAlias = Callable[[Callable[[], Any]], Callable[[], Any]]

WHATIF_VERSION = "1.3"
ALL_FIXED = "all"
# A fix predicted to move the step by less than this share, with no idle of its cause as large, gets no row in the
# report's table (traceread.render.whatif) and no part in "all of them".
LISTED_MIN_SHARE = 0.001
# The causes whose fix moves host work off the training thread (to loader worker processes)
MOVES_HOST_WORK: tuple[str, ...] = (DATA_STARVED,)
_I64 = np.int64


@dataclass(frozen=True)
class FixPrediction:
    """One fix's prediction. ``step_ns`` is the predicted median steady step (None for a one-time
    fix: it buys no steady-state speed-up, ``once_ns`` says what it saves over the capture)."""

    fix: str  # the label: a cause, ``cause=factor``, a ``pattern=factor`` scale, or ``all``
    cause: str
    step_ns: int | None
    saving_ns: int | None
    saving_share: float | None  # of the measured median step
    naive_step_ns: int | None  # the measured median step minus the cause's idle (None: no idle class)
    once_ns: int = 0  # capture time saved once (first start to last end of the replay)
    assumption: str = ""
    # The far end of the interval where the fix moves work to other host processes or threads (step_ns is the
    # near end: they take nothing from the training thread); None where it moves none
    step_high_ns: int | None = None


@dataclass(frozen=True)
class WhatIf:
    """The replay's figures for a run (see module doc)."""

    measured_step_ns: int
    replayed_step_ns: int
    replay_error: float  # replayed / measured - 1, on the median steady step
    steady_steps: int
    fixes: tuple[FixPrediction, ...]  # ordered by predicted saving, largest first
    all_fixed: FixPrediction | None
    assumptions: tuple[str, ...]
    notes: tuple[Note, ...] = ()  # as data: worded by traceread.render.notes
    version: str = WHATIF_VERSION
    nominal: dict[str, int] = field(default_factory=dict)
    # The replay with nominal delays only (traceread.whatif.nominal): what the dependencies alone explain.
    dependency_step_ns: int | None = None
    dependency_error: float | None = None  # dependency_step_ns / measured - 1
    # (input, rank) -> that rank's own step per step row (communication free; rows as the analysis' steps of
    # the rank): :func:`traceread.whatif.straggler.free_comm_lengths`, read off the comm-bound replay
    own_steps: dict[tuple[int, int], np.ndarray] = field(default_factory=dict, repr=False, compare=False)
    # GPU ops' waits for work the trace does not show (another process, work issued before the capture), ns
    external_wait_ns: int = 0

    def per_fix(self) -> pd.DataFrame:
        """One row per prediction (the fixes, then ``all``): flat, for indexes and tables."""
        rows = list(self.fixes) + ([self.all_fixed] if self.all_fixed is not None else [])
        return pd.DataFrame([{"fix": p.fix, "cause": p.cause, "step_ns": p.step_ns, "saving_ns": p.saving_ns,
                              "saving_share": p.saving_share, "naive_step_ns": p.naive_step_ns,
                              "once_ns": p.once_ns} for p in rows],
                            columns=["fix", "cause", "step_ns", "saving_ns", "saving_share", "naive_step_ns",
                                     "once_ns"])

    def prediction(self, fix: str) -> FixPrediction | None:
        for p in self.fixes + ((self.all_fixed,) if self.all_fixed is not None else ()):
            if p.fix == fix or p.cause == fix:
                return p
        return None


def _one_time(cause: str) -> bool:
    """A fix of one-time work: it buys no steady-state figure (its saving is once)."""
    c = causes.find(cause)
    return c is not None and c.kind == causes.ONE_TIME


@dataclass
class _Unit:
    """One (trace, rank): its model, its steps and the bounds of those on the recorded times. The model is
    built once and every replay shares its arrays (a fix's :class:`~traceread.whatif.fixes.Plan` is made
    once and copies only what it writes, into the unit's ``scratch`` arrays, as the sweep writes into its
    own: allocated once per rank, not once per replay, whose freed copies scattered the heap); each
    distinct replay runs once."""

    trace: int
    model: mdl.RankModel
    steps: pd.DataFrame
    base: tuple[np.ndarray, np.ndarray]
    ctx: fx.Context
    index: rp.StepIndex
    plans: dict[fx.Lever, fx.Plan] = field(default_factory=dict)
    outcomes: dict[tuple[tuple[fx.Lever, ...], bool], tuple[np.ndarray, int]] = field(default_factory=dict)
    scratch: dict[str, np.ndarray] = field(default_factory=dict)  # one replay's copies at a time (fx.Edges)
    changes: dict[fx.Lever, bool] | None = None  # after release: whether each planned fix changed anything
    together: list[fx.Lever] = field(default_factory=list)  # the fixes of its "all" replay (_listed)

    def release(self) -> None:
        """Drop the model's arrays and the plans once every replay needed has run (their outcomes stay):
        :func:`predict` then holds one rank's model at a time, not every rank's."""
        m = self.model
        emptied: dict[str, Any] = {f.name: np.zeros(0, getattr(m, f.name).dtype) for f in fields(m)
                                   if isinstance(getattr(m, f.name), np.ndarray)}
        self.model = replace(m, **emptied)
        self.changes = {f: not p.empty for f, p in self.plans.items()}
        self.plans.clear()
        self.scratch.clear()
        self.ctx.settled()  # a piece made ahead that no plan asked for
        self.ctx = replace(self.ctx, gaps=self.ctx.gaps.iloc[:0], copies=None, parts={}, ahead={})  # the trace's gap rows
        self.index = rp.StepIndex((), self.index.analysed)

    def plan(self, f: fx.Lever) -> fx.Plan:
        if f not in self.plans:
            self.plans[f] = fx.plan(self.model, f, self.ctx)
            # A plan's temporaries can go back: kept, the replays' copies after it grew the heap past them; once
            # per fix, not once per replay.
            self.ctx.between()
        return self.plans[f]

    def _changes(self, f: fx.Lever) -> bool:
        if self.changes is None:
            return not self.plan(f).empty
        if f not in self.changes:
            raise RuntimeError(f"what-if: {f} asked for after the model was released")
        return self.changes[f]

    def outcome(self, todo: Sequence[fx.Lever], nominal: bool = False) -> tuple[np.ndarray, int]:
        """Step lengths and capture span of the replay with ``todo`` applied (``nominal``: from the nominal
        delays, :mod:`traceread.whatif.nominal`, instead of the calibrated ones)."""
        m = self.model
        if nominal and todo:
            raise ValueError("what-if: the nominal replay takes no fix")
        # A fix that changes nothing here replays as the unfixed model does: that replay serves it.
        key = (tuple(f for f in todo if self._changes(f)), nominal)
        if key not in self.outcomes:
            if self.changes is not None:
                raise RuntimeError("what-if: a replay asked for after the model was released")
            if nominal:
                v = self.ctx.view
                lp = m.launch_point
                rows = m.row[np.maximum(lp, 0)]
                long_call = (lp >= 0) & (rows >= 0) & \
                    ((v.end[rows] - v.start[rows]).astype(_I64) > self.ctx.cfg.launch_call_max_ns)
                e = nominal_edges(m, v.name[m.row[m.sync_end]], self.scratch, long_call)
            else:
                e = fx.Edges.of(m, self.scratch)
                for f in key[0]:
                    fx.apply_plan(e, self.plan(f))
            r = rp.replay(m, e, self.scratch)
            self.outcomes[key] = (self.index.lengths(r, self.base), rp.span(r))
        return self.outcomes[key]


# What the fixes read of the gaps
_GAP_COLUMNS = ("class", "rank", "start_ns", "end_ns", "evidence_kind", "memcpy_htod_ns", "dataloader_ns")


def _trace_gaps(gaps: pd.DataFrame, i: int) -> pd.DataFrame:
    """Input ``i``'s gaps, the columns and classes the fixes read only (a trace holds millions of gap rows,
    most of classes no fix reads: launch-bound, comm-bound)."""
    cols = [c for c in _GAP_COLUMNS if c in gaps.columns]
    if not len(gaps):
        return gaps[cols]
    keep = np.ones(len(gaps), dtype=bool)
    if "class" in gaps.columns:
        keep &= gaps["class"].isin(fx.GAP_CLASSES_READ).to_numpy(dtype=bool, na_value=False)
    if "trace" in gaps.columns:
        keep &= gaps["trace"].to_numpy() == i
    return gaps.loc[keep, cols]


def _nothing() -> None:
    """The default ``between`` hook: nothing between the pieces (the runner gives freed heap pages back there)."""


def _units(traces: Sequence[Trace], steps: pd.DataFrame, gaps: pd.DataFrame, cfg: Thresholds,
           between: Callable[[], None] = _nothing) -> list[_Unit]:
    return list(_each_unit(traces, steps, gaps, cfg, between=between))


def _each_unit(traces: Sequence[Trace], steps: pd.DataFrame, gaps: pd.DataFrame | Callable[[], pd.DataFrame],
               cfg: Thresholds, early: Sequence[tuple[Sequence[fx.Lever], bool]] = (),
               between: Callable[[], None] = _nothing, beside: Beside | None = None,
               graphs: bool = False) -> Iterator[_Unit]:
    """Each (trace, rank)'s unit, its model built when the unit is reached. ``gaps`` may be a function that
    returns them (:func:`predict_staged`: it may wait for the rules); it is called once a unit's ``early``
    replays (``(fixes, nominal)``, as :meth:`_Unit.outcome` takes them), which read no gap, have run.
    ``between`` is called between the pieces of a rank's build, its plans and its replays. With ``graphs``
    (the CUDA-graph fix is planned) and ``beside``, the rank's host side of that plan, which reads no model
    (:func:`traceread.whatif.graphs.dispatch_host`), is handed to ``beside`` before the model is built."""
    for i, trace in enumerate(traces):
        st = steps[steps["trace"] == i] if "trace" in steps.columns else steps
        if st.empty:
            continue
        v = event_view(trace)
        g: pd.DataFrame | None = None  # the trace's gaps as the fixes read them: made once, for its first rank
        for rank in np.unique(st["rank"].to_numpy()):
            rs = st[st["rank"] == rank]
            ahead = {gr.DISPATCH_HOST: beside(functools.partial(gr.dispatch_host, v, int(rank), cfg))} \
                if graphs and beside is not None else {}
            m = mdl.build(v, int(rank), mdl.steps_points(rs, int(rank)), cfg, between, trace.side.get("event_waits"))
            index = rp.StepIndex.of(m, rs)
            unit = _Unit(i, m, rs, index.bounds(rp.recorded(m)),
                         fx.Context(v, pd.DataFrame(columns=list(_GAP_COLUMNS)), cfg, trace.side.get("copy_args"),
                                    between, device_names(trace, int(rank)), ahead=ahead),
                         index)
            del m, index  # only the unit holds them: released, the model goes before the next one is built
            between()  # the build's freed temporaries can go back before the replays' copies are made
            for fixed, nominal in early:
                unit.outcome(fixed, nominal)
            if g is None:
                g = _trace_gaps(gaps() if callable(gaps) else gaps, i)
            unit.ctx = replace(unit.ctx, gaps=g)
            yield unit


def _steady(steps: pd.DataFrame) -> np.ndarray:
    keep = ~(steps["warmup"].to_numpy(bool) | steps["outlier"].to_numpy(bool))
    return keep if keep.any() else np.ones(len(steps), bool)


def _median_step(units: list[_Unit], lengths: list[np.ndarray]) -> int:
    """Median over steady step numbers of the slowest unit's length of that step."""
    if not units:
        return 0
    keeps = [_steady(u.steps) for u in units]
    step = np.concatenate([u.steps["step"].to_numpy()[k] for u, k in zip(units, keeps, strict=True)])
    return _median_of_max(step, np.concatenate([length[k] for length, k in zip(lengths, keeps, strict=True)]))


def _median_of_max(step: np.ndarray, ns: np.ndarray) -> int:
    """The median over step numbers of the largest ``ns`` of each (integers; 0 without steps): numpy, not a
    DataFrame groupby, as it runs once per prediction on a few thousand steps."""
    if not len(step):
        return 0
    order = np.argsort(step, kind="stable")
    step, ns = step[order], ns[order]
    first = np.flatnonzero(np.concatenate(([True], step[1:] != step[:-1])))
    return int(np.median(np.maximum.reduceat(ns, first)))


def _run(units: list[_Unit], todo: Sequence[fx.Lever], nominal: bool = False) -> tuple[int, int]:
    """Median step and capture span of the replay with ``todo`` applied (``nominal``: from the
    nominal delays, :mod:`traceread.whatif.nominal`, instead of the calibrated ones)."""
    outcomes = [u.outcome(todo, nominal) for u in units]
    return _median_step(units, [o[0] for o in outcomes]), max([0, *(o[1] for o in outcomes)])


def _moves_host_work(f: fx.Lever) -> bool:
    """Whether the fix moves host work to other processes or threads (loader workers), which then compete with the
    training thread: its prediction gets an interval (``whatif_worker_host_slowdown``, docs/whatif.md)."""
    return isinstance(f, Fix) and f.cause in MOVES_HOST_WORK and f.factor is None


def _with_interval(units: list[_Unit], p: FixPrediction, todo: list[list[fx.Lever]], slow: fx.HostSlowdown
                   ) -> FixPrediction:
    """``p`` with the far end of its interval: the same fixes with the host ``slow.share`` slower."""
    if p.step_ns is None:
        return p
    high, _ = _run_each(units, [[*t, slow] for t in todo])
    if high - p.step_ns < LISTED_MIN_SHARE * p.step_ns:
        return p  # nothing competes with the training thread, or the host has slack: no interval to state
    return replace(p, step_high_ns=high)


def _run_each(units: list[_Unit], todo: list[list[fx.Lever]]) -> tuple[int, int]:
    """:func:`_run` with each unit's own fixes (the "all" replay: each unit's listed ones)."""
    outcomes = [u.outcome(t) for u, t in zip(units, todo, strict=True)]
    return _median_step(units, [o[0] for o in outcomes]), max([0, *(o[1] for o in outcomes)])


def _listed(u: _Unit, f: fx.Lever, steps: pd.DataFrame) -> bool:
    """Whether the report's table lists ``f`` for this unit (``render.whatif``'s rule, on the unit's own steps): it
    moves the unit's median steady step by ``LISTED_MIN_SHARE`` or more, or its cause's idle does. "All of them"
    combines the listed fixes only: a lever with no row moves nothing the table shows."""
    keep = _steady(u.steps)
    if not keep.any():
        return False
    measured = float(np.median((u.steps["end_ns"] - u.steps["start_ns"]).to_numpy(_I64)[keep]))
    step = float(np.median(u.outcome([f])[0][keep]))
    if abs(measured - step) >= LISTED_MIN_SHARE * measured:
        return True
    if not isinstance(f, Fix) or f.cause not in GAP_CLASSES:
        return False
    mine = steps
    if "trace" in mine.columns:
        mine = mine[mine["trace"] == u.trace]
    mine = mine[mine["rank"] == u.model.rank] if "rank" in mine.columns else mine
    naive = _naive(mine, f.cause) if part_col(f.cause) in mine.columns else None
    return naive is not None and naive < measured * (1 - LISTED_MIN_SHARE)


def _naive(steps: pd.DataFrame, cause: str) -> int | None:
    if cause not in GAP_CLASSES or steps.empty:
        return None
    keep = steps[_steady(steps)]
    after = (keep["end_ns"] - keep["start_ns"] - keep[part_col(cause)]).to_numpy()
    if after.dtype.kind not in "iu":  # a float or missing part: the groupby's NaN handling decides
        frame = pd.DataFrame({"step": keep["step"].to_numpy(), "after": after})
        return int(np.median(frame.groupby("step")["after"].max().to_numpy()))
    return _median_of_max(keep["step"].to_numpy(), after)


def predict(traces: Sequence[Trace], steps: pd.DataFrame, gaps: pd.DataFrame, cfg: Thresholds,
            fixes: Sequence[Fix | Scale | fx.Bus] | None = None, between: Callable[[], None] = _nothing) -> WhatIf | None:
    """Replay every rank of ``traces`` (the analysis' ``steps`` and classified ``gaps``, with a
    ``trace`` column) and predict each fix (default: every lever at its default factor). None when
    there are no steps."""
    return predict_staged(traces, steps, lambda: (steps, gaps), cfg, fixes, between)


def predict_staged(traces: Sequence[Trace], steps: pd.DataFrame,
                   classified: Callable[[], tuple[pd.DataFrame, pd.DataFrame]], cfg: Thresholds,
                   fixes: Sequence[Fix | Scale | fx.Bus] | None = None,
                   between: Callable[[], None] = _nothing, beside: Beside | None = None) -> WhatIf | None:
    """:func:`predict` begun before the rules have classified the gaps (the runner runs it beside them,
    :mod:`traceread.runner.replay`):
    ``steps`` are the steps as found, without their idle by class; the first rank's model is built and
    its replays as recorded, and those of the fixes that read no gap (``fixes.reads_gaps``), run from them
    alone. ``classified()`` returns the analysis' steps (with idle by class) and classified gaps, waiting
    for them if need be; the other fixes read those. ``between`` is called between the pieces of each rank's
    build, plans and replays (the runner gives freed heap pages back there). ``beside(fn)`` makes ``fn()`` and
    returns what gives its result (the runner: on a thread meanwhile): the part of a plan that reads no model
    is handed to it before the model is built."""
    todo: list[Fix | Scale | fx.Bus] = list(fixes) if fixes is not None else [Fix(c) for c in FIX_CAUSES]
    # One-time work buys no steady-state figure (its saving is once): "all" is every other fix at once, of those
    # the table lists (_listed).
    steady = [f for f in todo if not (isinstance(f, Fix) and _one_time(f.cause))]
    # Every replay of a rank runs while its model is built, then the model goes (one rank's at a time).
    unfixed = (False, True)
    replays: list[tuple[Sequence[fx.Lever], bool]] = [([], n) for n in unfixed] + [([f], False) for f in todo]
    slow = fx.HostSlowdown(cfg.whatif_worker_host_slowdown)
    replays += [([f, slow], False) for f in todo if _moves_host_work(f)]
    # Each rank's own steps (the job's straggler lever) come with the comm-bound fix: communication free
    own_free = Fix(COMM_BOUND) in todo
    if own_free:
        replays.append(([fx.CommFree()], False))
    # The replays that read no gap (the recorded dependencies; the fixes of causes the rules' classes do not
    # locate: launch, communication, memory-bound kernels) run before the rules are done, on the core the
    # rules leave idle; the rest wait for the classified gaps.
    early = [(fixed, nominal) for fixed, nominal in replays if not any(fx.reads_gaps(f) for f in fixed)]
    from traceread.whatif.straggler import peer_free_lengths

    units = []
    peer_free: dict[tuple[int, int], np.ndarray | None] = {}
    graphs = any(isinstance(f, Fix) and f.cause == LAUNCH_BOUND for f in todo)
    for u in _each_unit(traces, steps, lambda: classified()[1], cfg, early, between, beside, graphs):
        # The build's temporaries can go back once (kept, the replays' copies landed beside them in the heap's
        # free pieces and grew it past the build's peak), but nothing between a rank's replays: each replay
        # then reuses the pages the replay before it freed.
        between()
        for fixed, nominal in replays:
            u.outcome(fixed, nominal)
        peer_free[(u.trace, u.model.rank)] = peer_free_lengths(u)  # the job's own steps without peer waits
        if len(steady) > 1:
            u.together = [f for f in steady if _listed(u, f, classified()[0])]
            u.outcome(u.together)
            if any(_moves_host_work(f) for f in u.together):
                u.outcome([*u.together, slow])
        u.release()
        mdl.forget_selections(u.ctx.view, u.model.rank)
        units.append(u)
        between()  # the model's pages and the rank's selections can go back
    if not units:
        return None
    steps = classified()[0]
    measured = _median_step(units, [(u.steps["end_ns"] - u.steps["start_ns"]).to_numpy(_I64) for u in units])
    replayed, span0 = _run(units, [])
    dependency_step, _ = _run(units, [], nominal=True)
    preds = [_with_interval(units, _prediction(units, f, measured, span0, steps), [[f]] * len(units), slow)
             if _moves_host_work(f) else _prediction(units, f, measured, span0, steps) for f in todo]
    together = any(len(u.together) > 1 for u in units)
    all_fixed = _as_prediction(ALL_FIXED, ALL_FIXED, _run_each(units, [u.together for u in units]), measured, span0,
                               None, False, "every steady-state fix listed above at once") if together else None
    if all_fixed is not None and any(_moves_host_work(f) for u in units for f in u.together):
        all_fixed = _with_interval(units, all_fixed, [u.together for u in units], slow)
    notes: list[Note] = []
    dropped = sum(u.model.dropped_edges for u in units)
    if dropped:
        notes.append(Note.of(UNORDERED_DEPENDENCIES, count=dropped))
    waits = sum(u.model.inferred_waits for u in units)
    if waits:
        notes.append(Note.of(INFERRED_WAITS, count=waits))
    external = sum(u.model.external_waits for u in units)
    unexplained = sum(u.model.unexplained_waits for u in units) - external
    if unexplained:
        wait_ns = sum(u.model.unexplained_wait_ns - u.model.external_wait_ns for u in units)
        notes.append(Note.of(UNEXPLAINED_WAITS, count=unexplained, wait_ns=wait_ns))
    if external:
        notes.append(Note.of(EXTERNAL_STREAM_WAITS, count=external,
                             wait_ns=sum(u.model.external_wait_ns for u in units)))
    unlaunched = [u.model for u in units if not mdl.launches_recorded(u.model, cfg)]
    if unlaunched and any(isinstance(f, Fix) and f.cause == LAUNCH_BOUND for f in todo):
        notes.append(Note.of(LAUNCHES_NOT_RECORDED, ranks=len(unlaunched), kernels=sum(m.compute_ops for m in unlaunched),
                             launched=sum(m.compute_ops_launched for m in unlaunched)))
    preds.sort(key=lambda p: (p.saving_ns is None, -(p.saving_ns or 0), p.fix))
    # Each rank's own steps (the job's straggler lever): its replay with communication free (fixes.CommFree).
    own = {(u.trace, u.model.rank): u.outcome([fx.CommFree()])[0] for u in units} if own_free else {}
    own.update({k: v for k, v in peer_free.items() if v is not None and k in own})
    return WhatIf(measured_step_ns=measured, replayed_step_ns=replayed,
                  replay_error=(replayed / measured - 1.0) if measured else 0.0,
                  steady_steps=int(max(_steady(u.steps).sum() for u in units)), fixes=tuple(preds),
                  all_fixed=all_fixed, assumptions=mdl.assumptions(), notes=tuple(notes),
                  nominal=dict(units[0].model.nominal), dependency_step_ns=dependency_step,
                  dependency_error=(dependency_step / measured - 1.0) if measured else None, own_steps=own,
                  external_wait_ns=sum(u.model.unexplained_wait_ns for u in units))


def _prediction(units: list[_Unit], f: Fix | Scale | fx.Bus, measured: int, span0: int, steps: pd.DataFrame) -> FixPrediction:
    result = _run(units, [f])
    if isinstance(f, fx.Bus):
        return _as_prediction(f.label(), "bus", result, measured, span0, None, False,
                              f"the bus-bound batch copies {f.factor:g}x fewer bytes")
    if isinstance(f, Scale):
        return _as_prediction(f.label(), "scale", result, measured, span0, None, False,
                              f"ops and host ranges matching {f.pattern!r} {f.factor:g}x faster")
    cause = causes.find(f.cause)
    why = cause.assumption if cause is not None else ""
    if f.factor is not None:
        why = f"{f.cause}: {f.factor:g}x faster"
    return _as_prediction(f.label(), f.cause, result, measured, span0, _naive(steps, f.cause),
                          _one_time(f.cause), why)


def _as_prediction(label: str, cause: str, result: tuple[int, int], measured: int, span0: int,
                   naive: int | None, one_time: bool, why: str) -> FixPrediction:
    step, span = result
    once = max(span0 - span, 0)
    if one_time:
        return FixPrediction(label, cause, None, None, None, naive, once, why)
    saving = measured - step
    return FixPrediction(label, cause, step, saving, (saving / measured) if measured else None, naive, once, why)


def rank_at_speed(traces: Sequence[Trace], steps: pd.DataFrame, gaps: pd.DataFrame, cfg: Thresholds,
                  trace: int, rank: int, factor: float) -> FixPrediction | None:
    """The straggler lever: rank ``rank`` of input ``trace`` runs ``factor``x faster (every GPU op
    and its host clock) and the other ranks stop waiting for it at the collectives they share
    (:mod:`traceread.whatif.straggler`: the measured job step less the change of the slowest rank's own
    step, its replay with communication taking no time); the job's predicted median step. For "the straggler at the median rank's speed", ``factor`` is the straggler's
    median step over the median rank's. None when there are no steps or no such rank."""
    from traceread.whatif.straggler import own_steps

    units = _units(traces, steps, gaps, cfg)
    target = [i for i, u in enumerate(units) if u.trace == trace and u.model.rank == rank]
    if not units or not target:
        return None
    measured = _median_step(units, [(u.steps["end_ns"] - u.steps["start_ns"]).to_numpy(_I64) for u in units])
    before = _median_step(units, own_steps(units, {}))
    after = _median_step(units, own_steps(units, {i: factor for i in target}))
    step = measured - (before - after)
    return FixPrediction(f"straggler:rank{rank}", "straggler", step, measured - step,
                         (measured - step) / measured if measured else None, None, 0,
                         f"rank {rank} {factor:g}x faster; the others stop waiting for it at collectives")


__all__ = ["WhatIf", "FixPrediction", "Fix", "Scale", "Bus", "FIX_CAUSES", "predict", "predict_staged", "rank_at_speed", "WHATIF_VERSION",
           "ALL_FIXED", "LISTED_MIN_SHARE"]
