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

The model's other waits are looked up here too: the recorded waits' edges (:func:`recorded_edges`) and the op each
host sync waited for (:func:`sync_waited`, by timing).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from traceread import intervals, schema
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


def _name_codes(v: EventView, codes: np.ndarray, *rxs: re.Pattern[str]) -> list[np.ndarray]:
    """Per pattern: the name codes among ``codes`` whose name it matches (``match``; -1 is the trailing '').
    The view's names are matched once each where they are fewer than the codes (the view's name flags are
    made so), else the distinct names of ``codes`` (as :meth:`EventView.map_names`)."""
    if len(v.names) <= len(codes):
        used = np.arange(len(v.names))
    else:
        seen = np.zeros(len(v.names), dtype=bool)
        seen[codes] = True
        used = np.flatnonzero(seen)
    names = [str(n) for n in v.names[used]]
    return [used[np.array([bool(rx.match(n)) for n in names], dtype=bool)] for rx in rxs]


def _of_codes(codes: np.ndarray, wanted: np.ndarray, n_names: int) -> np.ndarray:
    """Bool per code: is it one of ``wanted`` (name codes, -1 standing for ``n_names - 1``, the trailing '')."""
    if len(wanted) and wanted[-1] == n_names - 1:
        wanted = np.append(wanted, -1)
    return intervals.one_of(codes, wanted)


def stream_waits(v: EventView, rank: int, calls: np.ndarray, ops: np.ndarray, launch_time: np.ndarray,
                 linked: np.ndarray, event_waits: pd.DataFrame | None = None, names: np.ndarray | None = None,
                 o_key: np.ndarray | None = None) -> StreamWaits:
    """The stream waits of ``rank`` (its API call rows ``calls``; its GPU op rows ``ops`` with each one's launch
    time ``launch_time`` where ``linked``; ``event_waits``: the trace's side table of that name): the ops held by a
    wait on an event recorded before the capture, each the first op launched on the waiting stream after the wait;
    and for the waits whose event the trace identifies, the op each held and the op its event marks (module doc).
    ``names``: the calls' name codes, ``o_key``: the ops' stream keys (``device << 40 ^ tid``), when read already."""
    none = StreamWaits(0, 0, np.zeros(0, _I64))
    if not len(calls):
        return none
    codes = v.name[calls] if names is None else names
    wait_codes, record_codes = _name_codes(v, codes, STREAM_WAIT, EVENT_RECORD)
    if not len(wait_codes):  # no call is a wait: nothing read per call
        return none
    waits = calls[_of_codes(codes, wait_codes, len(v.names))]
    if not len(waits):
        return none
    records = calls[_of_codes(codes, record_codes, len(v.names))]
    w_tid, w_t = v.tid[waits].astype(_I64), v.start[waits].astype(_I64)
    r_tid, r_start = v.tid[records], v.start[records].astype(_I64, copy=False)
    rec_t = np.full(len(waits), -1, _I64)  # the record call's start (-1: none before the wait on its thread)
    for tid in np.unique(w_tid).tolist():  # threads are few
        mine = w_tid == tid
        r_t = np.sort(r_start[r_tid == tid], kind="stable")  # nearly in order
        if not len(r_t):
            continue
        k = np.searchsorted(r_t, w_t[mine], side="left") - 1
        rec_t[mine] = np.where(k >= 0, r_t[np.maximum(k, 0)], -1)
    external = rec_t < 0
    # The waiting stream: the GPU-side wait record's (same correlation), else the next op launched after the wait.
    if o_key is None:
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
    n_linked = int(np.searchsorted(lt_sorted, big))  # the linked ops lead (the others' time is big)
    launched = _Launched(by_launch[:n_linked], lt_sorted[:n_linked], o_key[by_launch[:n_linked]])
    held = launched.first(key, w_t, key != -1)
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
    source = launched.last(r_key, rec_at, found)
    pair = found & (held >= 0) & (source >= 0) & (r_key != key)
    return StreamWaits(len(waits), int(external.sum()), np.unique(ext_held), held[pair].astype(_I64),
                       source[pair].astype(_I64), waits[pair].astype(_I64))


def recorded_edges(waited: np.ndarray, source: np.ndarray, stream_key: np.ndarray, op_node: np.ndarray,
                   os_: np.ndarray, oe: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The recorded waits' edges (op indices ``(held, source)``): each pair of another stream whose source ended by
    the held op's start and comes before it in the sweep; an op held by several waits waits for the source that
    ended last."""
    ok = (stream_key[source] != stream_key[waited]) & (op_node[source] < op_node[waited]) & (oe[source] <= os_[waited])
    w, s = waited[ok], source[ok]
    if not len(w):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    order = np.lexsort((oe[s], w))
    w, s = w[order], s[order]
    last = np.concatenate((w[1:] != w[:-1], [True]))
    return w[last], s[last]


def sync_waited(os_: np.ndarray, oe: np.ndarray, ls: np.ndarray, ss: np.ndarray, se: np.ndarray,
                tol: int, by_end_ends: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """Per sync ``[ss, se]``: the op (index) that ended last at or before ``se + tol`` among ops that
    started before ``se`` and were launched at or before ``ss``; -1 when none. ``by_end_ends``: the ops by
    end (stable) and their ends, when made already."""
    if len(os_) == 0 or len(ss) == 0:
        return np.full(len(ss), -1, dtype=_I64)
    if by_end_ends is None:
        by_end = np.argsort(oe, kind="stable")
        by_end_ends = by_end, oe[by_end]
    by_end, ends = by_end_ends
    # An op launched after the sync began cannot be what it waited for: take the running latest op
    # among those launched by then. Ops ordered by end; keep, per prefix, the op with the latest end
    # whose launch precedes the sync: approximated by stepping back over late launches (few).
    k = np.searchsorted(ends, se + tol, side="right") - 1
    out = np.full(len(ss), -1, dtype=_I64)
    for _ in range(4):  # a blocking copy's own op, a few concurrent launches from other threads
        ok = k >= 0
        cand = by_end[np.maximum(k, 0)]
        good = ok & (ls[cand] <= ss) & (os_[cand] < se) & (out < 0)
        out[good] = cand[good]
        k = np.where(good | ~ok, -1, k - 1)
        if not (k >= 0).any():
            break
    return out


@dataclass(frozen=True)
class _Launched:
    """The linked ops by launch time (stable: ``by_launch``, op indices), their launch times and stream keys in
    that order: each stream's ops by launch are a filter of it, not a sort of their own."""

    by_launch: np.ndarray
    lt: np.ndarray
    key: np.ndarray

    def first(self, key: np.ndarray, t: np.ndarray, ok: np.ndarray) -> np.ndarray:
        """Per query: the op (index) first launched on stream ``key`` at or after ``t``; -1 when none or not ``ok``."""
        return self._find(key, t, ok, last=False)

    def last(self, key: np.ndarray, t: np.ndarray, ok: np.ndarray) -> np.ndarray:
        """Per query: the op (index) last launched on stream ``key`` at or before ``t``; -1 when none or not ``ok``."""
        return self._find(key, t, ok, last=True)

    def _find(self, key: np.ndarray, t: np.ndarray, ok: np.ndarray, last: bool) -> np.ndarray:
        out = np.full(len(key), -1, _I64)
        for k in np.unique(key[ok]).tolist():  # a loop over streams, not events
            q = np.flatnonzero(ok & (key == k))
            sel = self.key == k
            on, lt = self.by_launch[sel], self.lt[sel]
            if not len(on):
                continue
            if last:
                j = np.searchsorted(lt, t[q], side="right") - 1
                good = j >= 0
            else:
                j = np.searchsorted(lt, t[q], side="left")
                good = j < len(on)
            out[q[good]] = on[j[good]]
        return out


__all__ = ["StreamWaits", "stream_waits", "recorded_edges", "sync_waited", "STREAM_WAIT", "EVENT_RECORD"]
