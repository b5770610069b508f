"""The runner's :func:`analyze`: the analysis' stages in order (:data:`traceread.analysis.stages.STAGES`), the
replay beside them, the heap between them."""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import pandas as pd

from traceread.analysis import Analysis, Failure, stages
from traceread.config import Thresholds
from traceread.engine.lanes import EngineCache
from traceread.runner import heap
from traceread.runner.replay import REPLAY_BESIDE_RULES_MAX_EVENTS, Replay
from traceread.runner.workers import on_a_thread
from traceread.trace import SideTables, Trace

if TYPE_CHECKING:
    from traceread.metrics.workload import Workload
    from traceread.whatif import Bus, Fix, Scale

T = TypeVar("T")

__all__ = ["analyze", "check_user_patterns", "keep_replay_selections", "share_cache", "REPLAY_BESIDE_RULES_MAX_EVENTS"]


def analyze(
    traces: list[Trace] | tuple[Trace, ...],
    workload: Workload | None = None,
    cfg: Thresholds = Thresholds(),  # noqa: B008 - frozen, never mutated
    top_gaps: int = 10,
    warmup_steps: int | None = None,
    step_range: str | None = None,
    failures: tuple[Failure, ...] | list[Failure] = (),
    rank_pattern: str | None = None,
    fixes: Sequence[Fix | Scale | Bus] | None = None,
    early: Callable[[Analysis, Callable[[], Analysis]], None] | None = None,
) -> Analysis:
    """Run the whole diagnosis on ``traces`` (loaded, one job) and return an :class:`~traceread.analysis.Analysis`.

    ``workload`` holds the MFU inputs (:class:`~traceread.metrics.workload.Workload`) or is None; ``failures`` are
    inputs the caller could not load, carried through so every report lists them. ``rank_pattern`` is the
    file-name rank regex for grouping inputs into jobs (``traceread.ranks``; named group ``rank``). ``fixes`` are
    the levers the what-if replays (default: every lever at its default factor; ``traceread whatif --fix``).
    ``early`` is called once, before this returns, with the analysis as found before its what-if and a function
    that returns the whole analysis: one rank's replay may still run then, and what does not read the what-if
    (the JSON report's tables, which its document places before the what-if) is written meanwhile; the function
    waits for the replay. (A job of several ranks waits for it before its job section: ``early`` is given the
    whole analysis twice.)

    The analysis' stages (:data:`traceread.analysis.stages.STAGES`) in order; between them the runner starts the
    what-if replay on its thread once the steps are found, and gives the engine's selections and freed heap
    pages back once the rules and tables are done (after ``launch``); the replay's result is the ``whatif``
    stage's.
    """
    share_cache(traces)
    check_user_patterns(traces, fixes)
    work = stages.Work(tuple(traces), cfg, stages.Options(workload, top_gaps, warmup_steps, step_range,
                                                          tuple(failures), rank_pattern))
    first = stages.STAGES[0]
    assert first.name == "steps"  # the replay starts from the steps as found
    # One input makes what reads no steps (its sanity notes, kernel and compact tables) beside its steps and rules,
    # and its collective table beside the rules: none of them reads the gaps or the rules.
    beside = on_a_thread if len(traces) == 1 else stages.Hooks.beside
    stages.walk(work, stages.Hooks(between=heap.trim, beside=beside), (first,))
    per = work.steps or []
    replay = Replay.start(traces, per, cfg, fixes)

    def rules_done(done: stages.Work) -> None:
        assert done.tables is not None
        steps, gaps = done.tables.steps, done.tables.gaps
        keep_replay_selections(traces, steps)
        heap.trim()  # freed pages go back before the replay's fixes, the analysis' largest step
        replay.classified(steps, gaps)

    # One input's steps and gaps are the analysis' own (pipe.concat of one frame is that frame): its replay beside
    # the rules has them as soon as the gaps are classified, and plans its fixes beside the attribution and tables.
    # (An input too large for its replay beside the rules replays after them: that replay's model is its peak,
    # above the rules' and the tables' working memory together.)
    hooks = stages.Hooks(classified=replay.classified if replay.early and len(traces) == 1 else None,
                         replayed=replay.result, between=heap.trim, beside=beside)
    at = stages.NAMES.index(REPLAY_READ_AT)
    before, after = stages.STAGES[1:at], stages.STAGES[at:]
    try:
        # An input small enough for its replay beside the rules also keeps freed pages from one phase to the next
        with heap.freed_pages_kept() if replay.early else contextlib.nullcontext():
            stages.walk(work, hooks, before, after={RULES_DONE_AFTER: rules_done})
            if work.groups is not None:  # a job's section reads the replay's own steps: it waits for it here
                stages.walk(work, hooks, after)
    except BaseException as exc:
        replay.cancel(exc)
        raise
    if work.groups is None:  # one rank: the replay, which may still run, gives its freed pages back as it goes
        if early is not None:
            assert work.analysis is not None
            try:
                early(work.analysis, lambda: _finished(work, hooks, after))
            except BaseException as exc:
                replay.cancel(exc)
                raise
        _finished(work, hooks, after)
    elif early is not None:
        assert work.job is not None
        done = work.job
        early(done, lambda: done)
    assert work.job is not None
    return work.job


def _finished(work: stages.Work, hooks: stages.Hooks, after: tuple[stages.Stage, ...]) -> Analysis:
    """The whole analysis of one rank: the stages from the what-if on (the first waits for the replay), walked once."""
    if work.job is None:
        stages.walk(work, hooks, after)
    assert work.job is not None
    return work.job


# The stage after which the engine's selections the replay does not read, and the freed heap pages, go back.
RULES_DONE_AFTER = "launch"
# The stage that reads the replay's result (it waits for the replay's thread).
REPLAY_READ_AT = "whatif"
assert RULES_DONE_AFTER in stages.NAMES and REPLAY_READ_AT in stages.NAMES


def check_user_patterns(traces: Sequence[Trace], fixes: Sequence[Fix | Scale | Bus] | None) -> None:
    """Match each ``--scale`` pattern over every name of ``traces`` here, in the calling thread, before the
    replay's thread does. A regex cannot be stopped inside a thread (the time budget of
    :func:`traceread.bounds.search_names` is a signal, which only the main thread receives), so a pattern
    that backtracks for ever on a trace's names would hang the replay, and the process with it: past the
    budget here it is a usage error, and within it the replay's matching of the same names is as quick."""
    from traceread import bounds
    from traceread.whatif import Scale

    scales = [f for f in fixes or () if isinstance(f, Scale)]
    if not scales:
        return
    names: set[str] = set()
    for t in traces:
        col = t.events["name"]
        names.update(map(str, col.cat.categories if isinstance(col.dtype, pd.CategoricalDtype) else col.unique()))
    ordered = sorted(names)
    for s in scales:
        what = f"--scale {s.pattern}"
        bounds.search_names(bounds.user_pattern(s.pattern, what, re.IGNORECASE), ordered, what, bounds.MATCH_BUDGET_S)


def share_cache(traces: Sequence[Trace]) -> EngineCache:
    """One engine cache for every trace of an analysis (the one the first of them already carries, else a new
    one): it keeps one trace's event view at a time, so the analysis of several holds one view, not one each;
    a view is built under its lock (threads may ask for it together). Each trace's pending side tables are
    read under a lock of its own: the replay's thread and the rules may
    ask for one together, and it is read once."""
    cache = next((t.cache for t in traces if t.cache is not None), None) or EngineCache()
    if isinstance(cache.building, contextlib.nullcontext):  # the steps and the tables beside them may ask together
        cache.building = threading.Lock()
    for t in traces:
        t.cache = cache
        if isinstance(t.side, SideTables) and isinstance(t.side.reading, contextlib.nullcontext):
            t.side.reading = threading.Lock()
    return cache


def keep_replay_selections(traces: Sequence[Trace], steps: pd.DataFrame) -> None:
    """The engine's cached selections of each trace are dropped once the steps, gaps, rules, attribution
    and tables are done with them, but those the replay reads of its ranks (the replay is the analysis'
    largest step)."""
    from traceread.engine.lanes import cached_view
    from traceread.whatif.model import selections

    for i, trace in enumerate(traces):
        view = cached_view(trace)
        if view is not None:
            ranks: Any = steps.loc[steps["trace"] == i, "rank"].unique() if len(steps) else ()
            view.keep_selections({key for r in ranks for key in selections(int(r))})
