"""The words of the analysis' notes (``traceread.note.Note``): one function per kind, shared by the
Markdown and JSON reports (a note given as a sentence is that sentence)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from traceread.note import (
    BUBBLES_NOT_JUDGED,
    BUBBLES_NOT_JUDGED_MORE,
    OVERLAPPING_KERNELS,
    REPEATED_GPU_ACTIVITY,
    STRAGGLER_COMM_BOUND,
    TIMELINE_HOLES,
    WAITING_FOR,
    Note,
)


def _straggler_comm_bound(d: dict[str, Any]) -> str:
    return (f"comm-bound: {d['waiting_ns'] / 1e6:.3f} ms of the comm-bound time on the other ranks of {d['job']} is "
            f"waiting for straggler rank {d['rank']} ({d['cause']}), not slow interconnect (see the job section)")


def _waiting_for(d: dict[str, Any]) -> str:
    who = f"straggler rank {d['who']}" if d["waits_on"] == "rank" else f"pipeline stage {d['who']}"
    fix = (" (slower than the other stages: rebalance layers across stages; a different schedule does not "
           "remove it)" if d["waits_on"] == "stage" else "")
    cls = d["idle_class"]
    return (f"{cls}: {d['share']:.0%} of the {cls} time on the other ranks of {d['job']} is waiting for "
            f"{who}{fix} (see the job section)")


def _repeated_gpu_activity(d: dict[str, Any]) -> str:
    return (f"{d['count']} GPU activities appear more than once (same stream, times, name and correlation): "
            "the file repeats events, so kernel counts and per-kernel totals include the repeats")


def _overlapping_kernels(d: dict[str, Any]) -> str:
    return (f"{d['count']} kernels start before the previous kernel on their stream ended: a stream runs "
            "its kernels in order, so clocks were skewed or captures merged; busy time counts the overlap once")


def _timeline_holes(d: dict[str, Any]) -> str:
    return (f"the GPU timeline has {d['count']} hole(s) of at least {d['min_ns'] / 1e9:.0f} s (longest "
            f"{float(d['longest_ns']) / 1e9:.0f} s): a clock jump or several captures in one file; steps across a "
            "hole are not steady state")


def _bubbles_not_judged(d: dict[str, Any]) -> str:
    return (f"pipeline bubbles cannot be judged on rank {d['rank']} device {d['device']}: only {d['steps']} analysed "
            f"step(s), periodicity needs at least {d['needed']}")


def _bubbles_not_judged_more(d: dict[str, Any]) -> str:
    return (f"pipeline bubbles cannot be judged on {d['pairs']} more rank/device pairs either: only "
            f"{d['fewest']}-{d['most']} analysed step(s)")


WORDS: dict[str, Callable[[dict[str, Any]], str]] = {
    STRAGGLER_COMM_BOUND: _straggler_comm_bound,
    WAITING_FOR: _waiting_for,
    REPEATED_GPU_ACTIVITY: _repeated_gpu_activity,
    OVERLAPPING_KERNELS: _overlapping_kernels,
    TIMELINE_HOLES: _timeline_holes,
    BUBBLES_NOT_JUDGED: _bubbles_not_judged,
    BUBBLES_NOT_JUDGED_MORE: _bubbles_not_judged_more,
}


def text(note: Note | str) -> str:
    """The sentence of ``note``."""
    if isinstance(note, str):
        return note
    words = WORDS[note.kind](note.fields)
    return f"{note.label}: {words}" if note.label else words
