"""The what-if replay on a thread of its own, beside the rules (:class:`Replay`)."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

import pandas as pd

from traceread.analysis import pipeline as pipe
from traceread.config import Thresholds
from traceread.runner import heap
from traceread.runner.workers import on_a_thread

if TYPE_CHECKING:
    from traceread.trace import Trace
    from traceread.whatif import Bus, Fix, Scale

# The most events the analysed traces may hold for the what-if replay to start beside the rules (Replay).
REPLAY_BESIDE_RULES_MAX_EVENTS = 8_000_000


class Replay:
    """The what-if replay (a large share of ``analyze`` on a large trace) on a thread of its own.

    It starts once the steps are found (:meth:`start`): while the rules classify the gaps on the main thread
    it builds the first rank's model and replays it as recorded (``whatif.predict_staged``); its fixes wait
    for the classified gaps (:meth:`classified`). It reads the traces, steps and gaps and writes nothing
    they hold, and most of its time is numpy and compiled code that releases the GIL, so it runs beside
    the rules and then beside what follows them (the attribution, the tables, the trace summaries). The
    runner waits for it (:meth:`result`) before it hands the analysis out; a job's section waits before it
    starts.

    Several inputs, or one of more than ``REPLAY_BESIDE_RULES_MAX_EVENTS`` events, start the replay only
    when the rules are done (as :meth:`classified` is called): a rank's model beside the rules' working
    memory would raise the analysis' peak.
    """

    def __init__(self, fn: Callable[[], Any], inputs: Future[tuple[pd.DataFrame, pd.DataFrame]],
                 early: bool = True) -> None:
        self._fn = fn
        self._failed: list[str] = []
        self._value: Any = None
        self._error: BaseException | None = None
        self._inputs = inputs
        self._thread = threading.Thread(target=self._run, name="traceread-whatif")
        self.early = early  # started beside the rules (one input of at most REPLAY_BESIDE_RULES_MAX_EVENTS events)
        if early:
            self._thread.start()

    @classmethod
    def start(cls, traces: Sequence[Trace], per: list[pipe.PerTrace], cfg: Thresholds,
              fixes: Sequence[Fix | Scale | Bus] | None = None) -> Replay:
        """The replay of ``traces`` from their steps as found (``per``), predicting ``fixes`` (None: every lever)."""
        found = pipe.concat([pipe.with_trace(p.found, i) for i, p in enumerate(per)
                             if p.found is not None and len(p.found)], pipe.STEP_OUT_COLUMNS)
        # One input only: the engine keeps one trace's view at a time (traceread.engine.lanes.event_view), which the
        # replay of one trace and the rules of another would take from each other.
        early = len(traces) == 1 and len(traces[0].events) <= REPLAY_BESIDE_RULES_MAX_EVENTS
        if early and not found.empty:
            from traceread.engine.lanes import event_view

            event_view(traces[0])  # built here, not by both threads at once
        inputs: Future[tuple[pd.DataFrame, pd.DataFrame]] = Future()
        return cls(lambda: _whatif(traces, found, inputs.result, cfg, fixes), inputs, early=early)

    def classified(self, steps: pd.DataFrame, gaps: pd.DataFrame) -> None:
        """The analysis' steps (with idle by class) and classified gaps: the fixes' inputs (given once: a later
        call, with the same frames, does nothing)."""
        if self._inputs.done():
            return
        self._inputs.set_result((steps, gaps))
        if not self.early:
            self._thread.start()

    def cancel(self, exc: BaseException) -> None:
        """The analysis failed: the replay stops (or, given its inputs, ends) and holds no thread."""
        if not self._inputs.done():
            self._inputs.set_exception(exc)
        if self._thread.is_alive() or self.early:
            self._thread.join()

    def _run(self) -> None:
        try:
            self._value = pipe.guarded("what-if replay", self._fn, self._failed)
        except BaseException as exc:  # noqa: BLE001 - re-raised where the result is read
            self._error = exc

    def result(self) -> tuple[Any, tuple[str, ...]]:
        """The replay's value (None when it could not run) and its ``unavailable`` lines."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value, tuple(self._failed)


def _whatif(traces: Sequence[Trace], steps: pd.DataFrame, classified: Callable[[], tuple[pd.DataFrame, pd.DataFrame]],
            cfg: Thresholds, fixes: Sequence[Fix | Scale | Bus] | None = None) -> Any:
    """What each fix would buy (:func:`traceread.whatif.predict_staged`), or None without steps."""
    if steps.empty:
        return None
    from traceread.whatif import predict_staged

    # The CUDA-graph plan's host side reads no model: made on a thread of its own while the model is built
    return predict_staged(list(traces), steps, classified, cfg, fixes, heap.trim,
                          functools.partial(on_a_thread, name="traceread-graphs"))
