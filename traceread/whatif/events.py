"""Stream waits read from the trace: the cross-stream edges they record, and waits on events recorded before the
capture (external waits, not replay error).

``stream.wait_event(e)`` is a ``cudaStreamWaitEvent`` (``hipStreamWaitEvent``, ``cuStreamWaitEvent``) call:
the work queued on the waiting stream after it starts once the work recorded into ``e`` by its
``cudaEventRecord`` has ended. Each wait whose event the trace identifies gives an edge: the first op launched on
the waiting stream after the wait call waits for the last op launched on the recorded stream before the record call
(:func:`stream_waits`; the dependency model takes it instead of inferring the wait from timing,
:mod:`traceread.whatif.model`). Where the capture holds no record call before the wait on the waiting
call's thread, the event was recorded before the capture began: the op the wait held waited for work
the trace does not show (sglang's decode capture). Its late start is then an external wait: the
dependencies-alone replay keeps it as measured and the report names it, instead of counting it as
the replay's error.

Each wait is matched to its record by the ids the trace holds: Kineto's ``Stream Wait Event`` cuda_sync record
(by the wait call's correlation) names the stream the event was recorded on (``wait_on_stream``) and the record
call's correlation (``wait_on_cuda_event_record_corr_id``), read into the ``event_waits`` side table. Where a trace
holds no such ids (nsys exports keep the waiting stream and an event id in ``SYNCHRONIZATION``, but nothing ties
an event id to the record call or its stream), the model infers the wait from timing instead: matching a wait to
the last record call of its thread and that call to the stream its thread last launched on disagreed with Kineto's
own ids on most of the waits of the reference traces that hold them. The waiting stream is the GPU-side wait
record's (by correlation) where the trace holds one, else the stream of the next op launched after the wait. A wait
with no record call before it on its thread is one on an event recorded before the capture.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from traceread import schema
from traceread.engine.lanes import EventView

_I64 = np.int64
STREAM_WAIT = re.compile(r"^(cuda|hip|cu)StreamWaitEvent(_v\d+)?$")
EVENT_RECORD = re.compile(r"^(cuda|hip|cu)EventRecord(WithFlags)?(_v\d+)?$")
_GPU_WAIT = re.compile(r"(?i)wait.?event")  # anywhere in the name: Kineto's "Stream Wait Event"


@dataclass(frozen=True)
class StreamWaits:
    """What the rank's stream-wait calls say: how many were read, how many wait on an event recorded before the
    capture, and the ops those held (indices into the model's ops); for the waits on an event recorded in the
    capture, each op a wait held (``waited``) and the op whose end the event marks (``source``), pairwise."""

    read: int
    external: int
    held_ops: np.ndarray
    waited: np.ndarray = field(default_factory=lambda: np.zeros(0, _I64))
    source: np.ndarray = field(default_factory=lambda: np.zeros(0, _I64))
    wait_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, _I64))  # the wait call (frame row) of each pair


def _match(v: EventView, rows: np.ndarray, rx: re.Pattern[str], anywhere: bool = False) -> np.ndarray:
    if not len(rows):
        return np.zeros(0, dtype=bool)
    find = rx.search if anywhere else rx.match
    return np.asarray(v.map_names(rows, lambda names: np.array([bool(find(str(n))) for n in names], dtype=bool)),
                      dtype=bool)


def stream_waits(v: EventView, rank: int, calls: np.ndarray, ops: np.ndarray, launch_time: np.ndarray,
                 linked: np.ndarray, event_waits: pd.DataFrame | None = None) -> StreamWaits:
    """The stream waits of ``rank`` (its API call rows ``calls``; its GPU op rows ``ops`` with each one's launch
    time ``launch_time`` where ``linked``; ``event_waits``: the trace's side table of that name): the ops held by a
    wait on an event recorded before the capture, each the first op launched on the waiting stream after the wait;
    and for the waits whose event the trace identifies, the op each held and the op its event marks (module doc)."""
    none = StreamWaits(0, 0, np.zeros(0, _I64))
    wait = _match(v, calls, STREAM_WAIT)
    if not wait.any():
        return none
    waits = calls[wait]
    records = calls[_match(v, calls, EVENT_RECORD)]
    w_tid, w_t = v.tid[waits].astype(_I64), v.start[waits].astype(_I64)
    rec_t = np.full(len(waits), -1, _I64)  # the record call's start (-1: none before the wait on its thread)
    for tid in np.unique(w_tid).tolist():  # threads are few
        mine = w_tid == tid
        r_t = np.sort(v.start[records[v.tid[records] == tid]].astype(_I64), kind="stable")  # nearly in order
        if not len(r_t):
            continue
        k = np.searchsorted(r_t, w_t[mine], side="left") - 1
        rec_t[mine] = np.where(k >= 0, r_t[np.maximum(k, 0)], -1)
    external = rec_t < 0
    # The waiting stream: the GPU-side wait record's (same correlation), else the next op launched after the wait.
    o_key = (v.device[ops].astype(_I64) << 40) ^ v.tid[ops].astype(_I64)
    gpu = v.rows((schema.LANE_GPU_SYNC,), None, rank)
    gpu = gpu[_match(v, gpu, _GPU_WAIT, anywhere=True)] if len(gpu) else gpu
    big = np.iinfo(_I64).max
    lt = np.where(linked, launch_time, big)
    by_launch = np.argsort(lt, kind="stable")
    lt_sorted = lt[by_launch]
    nxt = np.searchsorted(lt_sorted, w_t, side="left")
    has_next = (nxt < len(lt_sorted)) & (lt_sorted[np.minimum(nxt, max(len(lt_sorted) - 1, 0))] < big) \
        if len(lt_sorted) else np.zeros(len(waits), bool)
    key = np.where(has_next, o_key[by_launch[np.minimum(nxt, max(len(by_launch) - 1, 0))]] if len(by_launch)
                   else -1, -1)
    g_row = np.full(len(waits), -1, _I64)  # the GPU-side wait record of each wait (-1: none)
    if len(gpu):
        g_corr = v.corr[gpu].astype(_I64)
        g_order = np.argsort(g_corr, kind="stable")
        gc = g_corr[g_order]
        pos = np.minimum(np.searchsorted(gc, v.corr[waits].astype(_I64)), len(gc) - 1)
        hit = gc[pos] == v.corr[waits].astype(_I64)
        g = gpu[g_order[pos]]
        key = np.where(hit, (v.device[g].astype(_I64) << 40) ^ v.tid[g].astype(_I64), key)
        g_row = np.where(hit, g, -1)
    held = _first_launched(o_key, lt, key, w_t, key != -1)
    ext_held = held[external & (held >= 0)]
    if event_waits is None or event_waits.empty or not (g_row >= 0).any():
        return StreamWaits(len(waits), int(external.sum()), np.unique(ext_held))
    # The recorded event, by id: the GPU-side wait record's recorded stream and its record call (by correlation);
    # the event marks the last op launched on that stream by the record call.
    ew = event_waits.sort_values("row")
    e_row = ew["row"].to_numpy(_I64)
    at = np.minimum(np.searchsorted(e_row, g_row), max(len(e_row) - 1, 0))
    has = (g_row >= 0) & (e_row[at] == g_row)
    on_stream = np.where(has, ew["wait_on_stream"].to_numpy(_I64)[at], -1)
    rec_corr = np.where(has, ew["record_correlation"].to_numpy(_I64)[at], -1)
    c_corr = v.corr[calls].astype(_I64)
    c_order = np.argsort(c_corr, kind="stable")
    cc = c_corr[c_order]
    k = np.minimum(np.searchsorted(cc, rec_corr), max(len(cc) - 1, 0))
    found = has & (on_stream >= 0) & (rec_corr >= 0) & (cc[k] == rec_corr)
    rec_at = np.where(found, v.start[calls[c_order[k]]].astype(_I64), -1)
    r_key = np.where(found, (v.device[np.maximum(g_row, 0)].astype(_I64) << 40) ^ on_stream, -1)
    source = _last_launched(o_key, lt, r_key, rec_at, found)
    pair = found & (held >= 0) & (source >= 0) & (r_key != key)
    return StreamWaits(len(waits), int(external.sum()), np.unique(ext_held), held[pair].astype(_I64),
                       source[pair].astype(_I64), waits[pair].astype(_I64))


def _first_launched(o_key: np.ndarray, lt: np.ndarray, key: np.ndarray, t: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """Per query: the op (index) first launched on stream ``key`` at or after ``t``; -1 when none or not ``ok``."""
    return _launched(o_key, lt, key, t, ok, last=False)


def _last_launched(o_key: np.ndarray, lt: np.ndarray, key: np.ndarray, t: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """Per query: the op (index) last launched on stream ``key`` at or before ``t``; -1 when none or not ``ok``."""
    return _launched(o_key, lt, key, t, ok, last=True)


def _launched(o_key: np.ndarray, lt: np.ndarray, key: np.ndarray, t: np.ndarray, ok: np.ndarray,
              last: bool) -> np.ndarray:
    """Per query: the op launched on stream ``key`` last at or before ``t`` (``last``), else first at or after it."""
    out = np.full(len(key), -1, _I64)
    for k in np.unique(key[ok]).tolist():  # a loop over streams, not events
        q = np.flatnonzero(ok & (key == k))
        on = np.flatnonzero((o_key == k) & (lt < np.iinfo(_I64).max))
        if not len(on):
            continue
        on = on[np.argsort(lt[on], kind="stable")]
        if last:
            j = np.searchsorted(lt[on], t[q], side="right") - 1
            good = j >= 0
        else:
            j = np.searchsorted(lt[on], t[q], side="left")
            good = j < len(on)
        out[q[good]] = on[j[good]]
    return out


__all__ = ["StreamWaits", "stream_waits", "STREAM_WAIT", "EVENT_RECORD"]
