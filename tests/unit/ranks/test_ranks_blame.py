"""Waits that add up (traceread.ranks.blame): capped per collective, counted once, passed on along a chain."""

from __future__ import annotations

import numpy as np

from traceread.ranks.blame import blame, stages

NAN = np.nan


def _run(arr, end, own=None, tol=10.0):
    arr, end = np.array(arr, dtype=float), np.array(end, dtype=float)
    present = ~np.isnan(arr)
    last = np.nanargmax(arr, axis=0)
    own = np.zeros(arr.shape, dtype=bool) if own is None else np.array(own, dtype=bool)
    return blame(arr, end, present, last, own, tol)


def test_a_wait_is_at_most_the_ranks_own_time_in_the_collective():
    # rank 0 arrives at 0 and its call ends at 50 (its record is cut short), rank 1 arrives at 100
    b = _run([[0.0], [100.0]], [[50.0], [400.0]])
    assert b.waits[0, 0] == 50.0 and b.waits[1, 0] == 0.0
    assert b.direct[0, 1] == 50


def test_overlapping_waits_are_counted_once():
    # two calls on two streams: rank 0 waits for rank 1 in both, over overlapping intervals
    b = _run([[0.0, 20.0], [100.0, 120.0]], [[400.0, 420.0], [400.0, 420.0]])
    assert b.waits[0].tolist() == [100.0, 100.0]
    assert b.direct[0, 1] == 120  # [0, 100] U [20, 120], not 200
    assert b.waiting[0] == 120 and b.window[0] == 420


def test_a_wait_for_a_rank_that_had_itself_waited_goes_to_whom_it_waited_for():
    # instance 0: ranks 1 and 2; rank 2 is slow (its own delay), rank 1 waits 0..500
    # instance 1: ranks 0 and 1; rank 1 arrives late at 700 only because it waited; rank 0 waits from 100
    arr = [[NAN, 100.0], [0.0, 700.0], [500.0, NAN]]
    end = [[NAN, 900.0], [600.0, 900.0], [600.0, NAN]]
    own = [[False, False], [False, False], [True, True]]
    b = _run(arr, end, own)
    assert b.culprit.tolist() == [2, 2]
    assert b.attributed[0, 2] == 600 and b.attributed[1, 2] == 500 and b.attributed[:, 1].sum() == 0
    # with its own delay the late rank keeps the blame
    own[1][1] = True
    b = _run(arr, end, own)
    assert b.culprit.tolist() == [2, 1]


def test_stages_from_pair_transfers():
    # ranks 0-1-2 in a chain: 0 sends to 1 first, 1 sends to 2; a 3-member all-reduce is no link
    types = np.array([["send", "", "all-reduce"], ["recv", "send", "all-reduce"], ["", "recv", "all-reduce"]],
                     dtype=object)
    arr = np.array([[0.0, NAN, 50.0], [5.0, 20.0, 50.0], [NAN, 25.0, 50.0]])
    present = ~np.isnan(arr)
    st = stages(types, present, arr, [0, 1, 2])
    assert st.count == 3 and st.stage.tolist() == [0, 1, 2]
    # reversed numbering: the chain's stage 0 is the rank that sends first, whatever its rank number
    st = stages(types[::-1], present[::-1], arr[::-1], [0, 1, 2])
    assert st.stage.tolist() == [2, 1, 0]
