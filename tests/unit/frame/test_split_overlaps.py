"""evidence_split and the sanity overlap count against independent counts (issue 28: both lost their
per-gap string column / pandas sort; the results must not move)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceread.attribution import evidence_split
from traceread.frame.sanity import _overlaps


def test_evidence_split_sums_by_kind_largest_first_ties_by_name() -> None:
    kinds = ["b", "a", "c", "d", "c2", "c2", "a", "é"]
    dur = [5, 3, 3, 2, 4, 6, 2, 1]
    g = pd.DataFrame({"class": pd.Categorical(["x"] * 7 + ["y"]), "dur_ns": dur,
                      "evidence_kind": pd.Series(kinds, dtype=object)})
    want: dict[str, int] = {}
    for k, d, c in zip(kinds, dur, g["class"], strict=True):
        if c == "x":
            want[k] = want.get(k, 0) + d
    got = evidence_split(g, "x")
    assert got == want
    assert list(got) == ["c2", "a", "b", "c", "d"]  # 10, then 5, 5 in name order, then 3, 2
    assert evidence_split(g, "z") == {}


def test_evidence_split_kinds_that_are_not_strings_read_as_their_text() -> None:
    g = pd.DataFrame({"class": pd.Categorical(["x", "x"]), "dur_ns": [1, 2],
                      "evidence_kind": pd.Series([3, "3"], dtype=object)})
    assert evidence_split(g, "x") == {"3": 3}


def _overlaps_by_hand(rank: np.ndarray, device: np.ndarray, stream: np.ndarray, start: np.ndarray,
                      end: np.ndarray) -> int:
    n = 0
    for key in set(zip(rank.tolist(), device.tolist(), stream.tolist(), strict=True)):
        rows = [i for i in range(len(start)) if (rank[i], device[i], stream[i]) == key]
        rows.sort(key=lambda i: (start[i], i))
        latest = None
        for i in rows:
            if latest is not None and start[i] < latest:
                n += 1
            latest = end[i] if latest is None else max(latest, end[i])
    return n


def test_overlaps_match_a_count_by_hand() -> None:
    rng = np.random.default_rng(3)
    for trial in range(60):
        n = int(rng.integers(2, 80))
        ev = pd.DataFrame({"rank": rng.integers(0, 2, n).astype(np.int32),
                           "device": rng.integers(0, 2, n).astype(np.int32),
                           "stream": rng.integers(0, 3, n).astype(np.int64)})
        start = rng.integers(0, 60, n).astype(np.int64)
        # short kernels (ends mostly in order) and long ones (an earlier kernel outlasting a later one)
        end = start + rng.integers(0, 3 if trial % 2 else 40, n)
        rows = np.arange(n)
        want = _overlaps_by_hand(*(ev[c].to_numpy() for c in ("rank", "device", "stream")), start, end)
        assert _overlaps(ev, rows, start, end) == want


def test_idle_by_class_sums_each_steps_gaps_by_class() -> None:
    from traceread.analysis.pipeline import idle_by_class
    from traceread.vocabulary import GAP_CLASSES, part_col

    rng = np.random.default_rng(5)
    steps = pd.DataFrame({"rank": np.array([0, 0, 1, 1, 3], np.int32), "device": np.array([0, 1, 0, 0, 7], np.int32),
                          "step": np.array([4, 4, 4, 5, 2**40], np.int64), "idle_ns": [10**9] * 5})
    n = 500
    gaps = pd.DataFrame({"rank": rng.choice([0, 1, 2, 3], n).astype(np.int32),
                         "device": rng.choice([0, 1, 7], n).astype(np.int32),
                         "step": rng.choice([4, 5, 6, 2**40], n).astype(np.int64),
                         "dur_ns": rng.integers(1, 1000, n).astype(np.int64),
                         "class": pd.Categorical.from_codes(rng.integers(-1, len(GAP_CLASSES), n),
                                                            categories=list(GAP_CLASSES))})
    out = idle_by_class(steps, gaps)
    for i, st in steps.iterrows():
        for cls in GAP_CLASSES:
            want = sum(int(g.dur_ns) for g in gaps.itertuples()
                       if (g.rank, g.device, g.step) == (st["rank"], st["device"], st["step"]) and g._5 == cls)
            if cls == "unattributed":
                others = sum(int(out.loc[i, part_col(c)]) for c in GAP_CLASSES if c != cls)
                want += max(10**9 - others - want, 0)
            assert int(out.loc[i, part_col(cls)]) == want, (i, cls)
    text = gaps.assign(**{"class": gaps["class"].astype(object)})
    pd.testing.assert_frame_equal(idle_by_class(steps, text), out)


def test_stream_order_is_lexsort() -> None:
    from traceread.frame.sanity import _stream_order

    rng = np.random.default_rng(2)
    for _ in range(100):
        n = int(rng.integers(1, 300))
        r, d = rng.integers(-1, 3, n).astype(np.int32), rng.integers(-1, 3, n).astype(np.int32)
        s, st = rng.choice([-1, 7, 2**33, 5], n).astype(np.int64), rng.integers(0, 20, n).astype(np.int64)
        want = np.lexsort((st, s, d, r))
        assert (_stream_order(r, d, s, st, None) == want).all()
        assert (_stream_order(r, d, s, st, np.argsort(st, kind="stable")) == want).all()
    many = np.arange(40_000, dtype=np.int64)  # too many streams for the small code: lexsort itself
    st = rng.integers(0, 5, len(many)).astype(np.int64)
    zeros = np.zeros(len(many), np.int32)
    assert (_stream_order(zeros, zeros, many[::-1].copy(), st, None) == np.lexsort((st, many[::-1], zeros, zeros))).all()
