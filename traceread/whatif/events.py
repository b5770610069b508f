"""Stream waits on events recorded before the capture: external waits, not replay error.

``stream.wait_event(e)`` is a ``cudaStreamWaitEvent`` (``hipStreamWaitEvent``, ``cuStreamWaitEvent``) call:
the work queued on the waiting stream after it starts once the work recorded into ``e`` by its
``cudaEventRecord`` has ended. Where the capture holds no record call before the wait on the waiting
call's thread, the event was recorded before the capture began: the op the wait held waited for work
the trace does not show (sglang's decode capture). Its late start is then an external wait: the
dependencies-alone replay keeps it as measured and the report names it, instead of counting it as
the replay's error.

The event id that ties a wait to its record is not read (Kineto keeps it in the ``cuda_sync`` record's
args, nsys in ``SYNCHRONIZATION.eventId``; neither reaches the events frame), so a wait is matched to
the last record call of its thread before it, as ``torch.cuda.Stream.wait_stream`` issues them. The
waiting stream is the GPU-side ``Stream Wait Event`` record's (by correlation) where the trace holds
one, else the stream of the next op its thread launched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from traceread import schema
from traceread.engine.lanes import EventView

_I64 = np.int64
STREAM_WAIT = re.compile(r"^(cuda|hip|cu)StreamWaitEvent(_v\d+)?$")
EVENT_RECORD = re.compile(r"^(cuda|hip|cu)EventRecord(WithFlags)?(_v\d+)?$")
_GPU_WAIT = re.compile(r"(?i)wait.?event")


@dataclass(frozen=True)
class StreamWaits:
    """What the rank's stream-wait calls say: how many were read, how many wait on an event recorded before the
    capture, and the ops those held (indices into the model's ops)."""

    read: int
    external: int
    held_ops: np.ndarray


def _match(v: EventView, rows: np.ndarray, rx: re.Pattern[str]) -> np.ndarray:
    if not len(rows):
        return np.zeros(0, dtype=bool)
    return np.asarray(v.map_names(rows, lambda names: np.array([bool(rx.match(str(n))) for n in names], dtype=bool)),
                      dtype=bool)


def stream_waits(v: EventView, rank: int, calls: np.ndarray, ops: np.ndarray, launch_time: np.ndarray,
                 linked: np.ndarray) -> StreamWaits:
    """The stream waits of ``rank`` (its API call rows ``calls``; its GPU op rows ``ops`` with each one's launch
    time ``launch_time`` where ``linked``): the ops held by a wait on an event recorded before the capture, each
    the first op launched on the waiting stream after the wait."""
    none = StreamWaits(0, 0, np.zeros(0, _I64))
    wait = _match(v, calls, STREAM_WAIT)
    if not wait.any():
        return none
    waits = calls[wait]
    records = calls[_match(v, calls, EVENT_RECORD)]
    w_tid, w_t = v.tid[waits].astype(_I64), v.start[waits].astype(_I64)
    external = np.ones(len(waits), dtype=bool)
    for tid in np.unique(w_tid).tolist():  # threads are few
        mine = w_tid == tid
        r_t = np.sort(v.start[records[v.tid[records] == tid]].astype(_I64))
        external[mine] = np.searchsorted(r_t, w_t[mine], side="left") == 0  # no record before it
    ext = np.flatnonzero(external)
    if not len(ext):
        return StreamWaits(len(waits), 0, np.zeros(0, _I64))
    # The waiting stream: the GPU-side wait record's (same correlation), else the next op the thread launched.
    o_key = (v.device[ops].astype(_I64) << 40) ^ v.tid[ops].astype(_I64)
    gpu = v.rows((schema.LANE_GPU_SYNC,), None, rank)
    gpu = gpu[_match(v, gpu, _GPU_WAIT)] if len(gpu) else gpu
    g_corr = v.corr[gpu].astype(_I64) if len(gpu) else np.zeros(0, _I64)
    lt = np.where(linked, launch_time, np.iinfo(_I64).max)
    by_launch = np.argsort(lt, kind="stable")
    held = []
    for i in ext.tolist():  # waits on events recorded before the capture are few
        hit = np.flatnonzero(g_corr == int(v.corr[waits[i]])) if len(g_corr) else np.zeros(0, _I64)
        after = by_launch[np.searchsorted(lt[by_launch], w_t[i], side="left"):]
        after = after[lt[after] < np.iinfo(_I64).max]
        if len(hit):
            g = gpu[hit[0]]
            key = (int(v.device[g]) << 40) ^ int(v.tid[g])
        elif len(after):
            key = int(o_key[after[0]])
        else:
            continue
        on = after[o_key[after] == key]
        if len(on):
            held.append(int(on[0]))
    return StreamWaits(len(waits), len(ext), np.unique(np.asarray(held, dtype=_I64)))


__all__ = ["StreamWaits", "stream_waits", "STREAM_WAIT", "EVENT_RECORD"]
