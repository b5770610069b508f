"""The runner: calls the analysis' stages and owns what is not the analysis' own business.

The stages (:mod:`traceread.analysis.pipeline`, :mod:`traceread.analysis`) are functions of their inputs and the
thresholds. What makes them fast and lean lives here:

* the what-if replay's thread (:mod:`traceread.runner.replay`), started beside the rules and given the
  classified gaps through the stages' hooks (:class:`traceread.analysis.Hooks`);
* the heap (:mod:`traceread.runner.heap`): freed pages given back between the phases (the ``between``
  hooks of the stages), or kept through an analysis small enough for its replay beside the rules;
* the engine's cache (:class:`traceread.engine.lanes.EngineCache`: the event view and what is derived from it), one
  per analysis, carried by its traces (:func:`share_cache`), and its selections kept for the replay once the
  rules are done (:func:`keep_replay_selections`);
* the loads (:func:`load`): their threads and forked decoders (:mod:`traceread.runner.workers`, handed to the
  loaders as a :class:`traceread.loaders.parallel.Parallel`), pandas imported beside the decode
  (:mod:`traceread.runner.prefetch`), their freed read buffers given back after each;
* the output writer's thread (:func:`traceread.runner.write.write_pieces`).

:func:`analyze` waits for the replay before it hands the analysis out: an :class:`~traceread.analysis.Analysis`
is plain data.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from traceread.runner import heap

if TYPE_CHECKING:
    from traceread.runner.run import analyze, keep_replay_selections, share_cache
    from traceread.trace import Trace

__all__ = ["analyze", "load", "keep_replay_selections", "share_cache", "command_heap", "analysis_heap"]


def command_heap() -> bool:
    """A command's process-wide malloc setting at its start, before any thread (:func:`heap.one_heap`)."""
    return heap.one_heap()


def analysis_heap() -> bool:
    """``analyze``'s malloc setting, from its loads on (:func:`heap.reuse_freed_pages`), in small pages
    (:func:`heap.small_pages`)."""
    heap.small_pages()
    return heap.reuse_freed_pages()


def load(path: str | os.PathLike[str], **kwargs: Any) -> Trace:
    """:func:`traceread.loaders.load` (same arguments) with the runner's threads and forked decoders beside it
    (:data:`traceread.runner.workers.THREADS`), its freed read buffers given back to the OS after it."""
    from traceread.loaders import load as load_trace
    from traceread.runner.workers import THREADS

    return load_trace(path, between=heap.trim, parallel=THREADS, **kwargs)


def __getattr__(name: str) -> Any:
    """``analyze`` and the stages' wiring, imported when first used: importing the runner (as the loaders'
    callers do for :func:`load`) costs nothing until an analysis runs."""
    if name in ("analyze", "keep_replay_selections", "share_cache"):
        from traceread.runner import run

        return getattr(run, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
