"""The op table's search for the innermost op around each launch (``op_time._innermost_on_thread``: every
thread at once on one key) against ``intervals.innermost_covering`` run thread by thread, on random call
stacks with equal starts, zero-length frames and queries outside every frame."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from traceread import intervals
from traceread.metrics import op_time


def _stack(rng: np.random.Generator, t0: int, n: int) -> list[tuple[int, int]]:
    """``n`` frames of one thread's call stack (laminar), some sharing a start, some zero-length."""
    out: list[tuple[int, int]] = []
    t = t0
    while len(out) < n:
        width = int(rng.integers(1, 400))
        out.append((t, t + width))
        s = t
        for _ in range(int(rng.integers(0, 4))):  # nested children, the first may share the start
            if s >= t + width - 1:
                break
            w = int(rng.integers(0, max(1, (t + width - s) // 2)))
            out.append((s, s + w))
            s += w + int(rng.integers(0, 3))
        t += width + int(rng.integers(0, 5))
    return out[:n]


def _view(rng: np.random.Generator, threads: int, per: int, shuffle: bool = True):
    rank, pid, tid, start, end = [], [], [], [], []
    for k in range(threads):
        frames = _stack(rng, int(rng.integers(0, 50)), per)
        if shuffle:  # rows in any order (else in start order, outer first, as a profiler writes them)
            rng.shuffle(frames)
        for s, e in frames:
            rank.append(k % 2)
            pid.append(100 + k % 3)
            tid.append(7 * k)
            start.append(s)
            end.append(e)
    n = len(start)
    q = rng.integers(0, n, 3 * n)  # query rows: a thread each; times anywhere near the frames
    times = np.asarray(start, dtype=np.int64)[q] + rng.integers(-3, 300, len(q))
    v = SimpleNamespace(rank=np.array(rank, np.int32), pid=np.array(pid, np.int64), tid=np.array(tid, np.int64),
                        start=np.array(start, np.int64), end=np.array(end, np.int64))
    return v, q.astype(np.int64), times


def _per_thread(v, at_rows: np.ndarray, times: np.ndarray, cand: np.ndarray) -> np.ndarray:
    out = np.full(len(at_rows), -1, dtype=np.int64)
    thread = list(zip(v.rank.tolist(), v.pid.tolist(), v.tid.tolist(), strict=True))
    for key in set(thread[i] for i in at_rows.tolist()):
        q = np.array([i for i, r in enumerate(at_rows.tolist()) if thread[r] == key], dtype=np.int64)
        mine = np.array([c for c in cand.tolist() if thread[c] == key], dtype=np.int64)
        if len(mine) == 0:
            continue
        j = intervals.innermost_covering(times[q], v.start[mine], v.end[mine])
        out[q[j >= 0]] = mine[j[j >= 0]]
    return out


@pytest.mark.parametrize("seed", range(6))
def test_every_thread_at_once_answers_as_each_thread_alone(seed: int) -> None:
    rng = np.random.default_rng(seed)
    v, at_rows, times = _view(rng, threads=1 + seed, per=60, shuffle=seed % 2 == 1)
    cand = np.flatnonzero(rng.random(len(v.start)) < 0.8).astype(np.int64)  # a subset, as the filter leaves
    want = _per_thread(v, at_rows, times, cand)
    got = op_time._innermost_on_thread(v, at_rows, times, cand)
    assert (want >= 0).sum() > len(want) // 4  # the queries do land in frames
    np.testing.assert_array_equal(got, want)


def test_times_too_far_apart_for_one_key_go_thread_by_thread() -> None:
    rng = np.random.default_rng(9)
    v, at_rows, times = _view(rng, threads=3, per=40)
    far = v.tid == 14  # one thread moved 2**61 ns later: three threads no longer fit one int64 key
    v.start[far] += 1 << 61
    v.end[far] += 1 << 61
    times = np.where(far[at_rows], times + (1 << 61), times)
    cand = np.arange(len(v.start), dtype=np.int64)
    np.testing.assert_array_equal(op_time._innermost_on_thread(v, at_rows, times, cand),
                                  _per_thread(v, at_rows, times, cand))
