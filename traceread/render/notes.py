"""The words of the analysis' notes (``traceread.note.Note``): one function per kind, shared by the
Markdown and JSON reports (a note given as a sentence is that sentence)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from traceread.note import STRAGGLER_COMM_BOUND, WAITING_FOR, Note


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


WORDS: dict[str, Callable[[dict[str, Any]], str]] = {
    STRAGGLER_COMM_BOUND: _straggler_comm_bound,
    WAITING_FOR: _waiting_for,
}


def text(note: Note | str) -> str:
    """The sentence of ``note``."""
    if isinstance(note, str):
        return note
    return WORDS[note.kind](note.fields)
