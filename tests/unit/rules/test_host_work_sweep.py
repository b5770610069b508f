"""The host-work rule's compiled pass over one thread's frames (``_cintervals.free_near``) against its numpy
twin (``rules.host_work._free_near_numpy``): random frames with tied starts, nesting, zero lengths,
markers and missing names (code -1), launch points on frame edges, touching gap unions, int32 and
int64 rows, rows out of start order (the twin answers), empty inputs; and the rule's labels' nesting
walk against the loop it replaced."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from traceread import intervals as iv
from traceread.rules import host_work as hw

pytestmark = pytest.mark.skipif(iv._CGAPS is None, reason="the compiled sweeps were not built (no C compiler)")


def _case(seed: int):
    rng = np.random.default_rng(seed)
    n_ev, span = int(rng.integers(0, 300)), int(rng.choice([10, 100, 3000]))
    start = rng.integers(0, span, size=n_ev).astype(np.int64)
    end = start + rng.choice([0, 1, 2, 5, span // 3 + 1], size=n_ev)
    n_names = int(rng.integers(1, 6))
    name = rng.integers(-1, n_names, size=n_ev).astype(rng.choice([np.int16, np.int32, np.int64]))
    marker = rng.random(n_names + 1) < 0.3  # the trailing entry answers for code -1
    v = SimpleNamespace(start=start, end=end, name=name)
    hev = rng.choice(n_ev, size=int(rng.integers(0, n_ev + 1)), replace=False) if n_ev else np.zeros(0, np.int64)
    hev = hev[np.argsort(start[hev], kind="stable")].astype(rng.choice([np.int32, np.int64]))
    # launch points: some exactly on frame starts and ends
    pts = np.concatenate([rng.integers(0, span, size=int(rng.integers(0, 20))),
                          start[hev][: int(rng.integers(0, 3))], end[hev][: int(rng.integers(0, 3))]])
    pts = np.sort(pts).astype(np.int64)
    cuts = np.sort(rng.integers(0, span + 1, size=2 * int(rng.integers(1, 12))))
    us, ue = iv.union(cuts[0::2], cuts[1::2] + rng.integers(0, 2, size=len(cuts) // 2))
    if len(us) == 0:
        us, ue = np.array([0], np.int64), np.array([1], np.int64)
    return v, hev, marker, pts, us, ue


def _same(got, want):
    (fg, ng), (fw, nw) = got, want
    assert ng.tolist() == nw.tolist()
    assert fg.s.tolist() == fw.s.tolist() and fg.e.tolist() == fw.e.tolist()
    assert np.asarray(fg.rows, np.int64).tolist() == np.asarray(fw.rows, np.int64).tolist()
    assert fg.points.tolist() == fw.points.tolist()


@pytest.mark.parametrize("seed", range(80))
def test_free_near_equals_its_numpy_twin(seed):
    v, hev, marker, pts, us, ue = _case(seed)
    _same(hw._free_near(v, hev, marker, pts, us, ue), hw._free_near_numpy(v, hev, marker, pts, us, ue))


def test_out_of_order_rows_and_points_fall_back_to_the_twin():
    v, hev, marker, pts, us, ue = _case(3)
    assert len(hev) > 2 and len(pts) > 2
    rev = hev[::-1].copy()
    if v.start[rev[0]] != v.start[rev[-1]]:  # not sorted by start: the compiled pass refuses, the twin answers
        c = iv._CGAPS  # the compiled module itself, switched off or not
        out = [np.empty(len(rev), np.int64) for _ in range(4)]
        assert c.free_near(v.start, v.end, v.name, rev, marker, pts, us, ue, *out) is None
    shuffled = pts[::-1].copy()
    _same(hw._free_near(v, hev, marker, shuffled, us, ue), hw._free_near_numpy(v, hev, marker, shuffled, us, ue))


def test_bad_rows_and_names_are_refused():
    c = iv._CGAPS  # the compiled module itself, switched off or not
    start = np.array([0, 5], np.int64)
    out = [np.empty(2, np.int64) for _ in range(4)]
    args = (np.array([0], np.int64), np.array([10], np.int64))
    with pytest.raises(IndexError):
        c.free_near(start, start + 1, np.array([0, 0], np.int16), np.array([0, 2], np.int64), np.zeros(1, bool),
                    np.zeros(0, np.int64), *args, *out)
    with pytest.raises(IndexError):
        c.free_near(start, start + 1, np.array([0, 7], np.int16), np.array([0, 1], np.int64), np.zeros(1, bool),
                    np.zeros(0, np.int64), *args, *out)
    with pytest.raises(ValueError):
        c.free_near(start, start + 1, np.array([0, 0], np.int16), np.array([0, 1], np.int64), np.zeros(1, bool),
                    np.zeros(0, np.int64), *args, *[np.empty(1, np.int64) for _ in range(4)])


def test_switch_uses_the_twin(monkeypatch):
    v, hev, marker, pts, us, ue = _case(5)
    monkeypatch.setenv(iv.DISABLE_ENV, "1")
    _same(hw._free_near(v, hev, marker, pts, us, ue), hw._free_near_numpy(v, hev, marker, pts, us, ue))


def _children_loop(s, e, inner):
    """The loop ``_children`` replaced (its reference)."""
    out, reach = [], np.iinfo(np.int64).min
    for k in inner:
        if e[k] > reach:
            out.append(int(k))
            reach = int(e[k])
    return out


@pytest.mark.parametrize("seed", range(30))
def test_children_equal_the_nesting_loop(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 60))
    s = np.sort(rng.integers(0, 50, size=n)).astype(np.int64)
    e = s + rng.choice([0, 1, 4, 30], size=n)
    inner = np.sort(rng.choice(n, size=int(rng.integers(0, n + 1)), replace=False)) if n else np.zeros(0, np.int64)
    assert hw._children(s, e, inner) == _children_loop(s, e, inner)
