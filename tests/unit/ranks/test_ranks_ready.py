"""traceread.ranks.summary.ready_times: when a rank was ready for a communication kernel (peer waits)."""

from __future__ import annotations

import numpy as np

from traceread.ranks.summary import PEER_WAIT_MIN_NS, ready_times, stream_previous_end


def test_a_late_start_with_nothing_local_is_a_peer_wait():
    start = np.array([1_000_000, 2_000_000, 3_000_000, 4_000_000])
    lead = np.array([0, 1_100_000, 2_100_000, 3_100_000])  # the previous collective's end
    busy = np.array([900_000, 1_990_000, 2_500_000, 4_000_000])  # the compute before (its start: compute runs)
    launched = np.array([950_000, 1_500_000, 2_600_000, 3_500_000])
    got = ready_times(start, lead, busy, launched)
    # 0: launched 50 us before, compute until 100 us before: not over the threshold, its start
    # 1: compute ended 10 us before: its start; 2: ready at its launch, 400 us before: a peer wait
    # 3: compute still ran at its start: its start
    assert got.tolist() == [1_000_000, 2_000_000, 2_600_000, 4_000_000]
    assert (start - got <= start - np.maximum(np.maximum(lead, busy), launched)).all()


def test_the_threshold_is_exclusive():
    start = np.array([PEER_WAIT_MIN_NS, PEER_WAIT_MIN_NS + 1])
    zero = np.zeros(2, dtype=np.int64)
    assert ready_times(start, zero, zero, zero).tolist() == [PEER_WAIT_MIN_NS, 0]


def test_only_the_kernel_before_on_its_own_stream_holds_a_call_back():
    """A pipeline rank's send (stream 23) waits for its receiver beside a receive (stream 21) waiting for its
    sender: the receive's end is not when the send could start. Given out of start order, two devices."""
    dev = np.array([0, 0, 1, 0, 0, 0])
    stream = np.array([21, 23, 21, 21, 23, 23])
    start = np.array([1_000_000, 1_001_000, 1_500_000, 3_000_000, 3_001_000, 2_500_000])
    end = np.array([2_000_000, 2_000_000, 1_600_000, 3_500_000, 3_600_000, 2_600_000])
    got = stream_previous_end(dev, stream, start, end)
    lo = np.iinfo(np.int64).min
    # each stream's first kernel: nothing before it; then the previous kernel on the same stream and device only
    assert got.tolist() == [lo, lo, lo, 2_000_000, 2_600_000, 2_000_000]
    # the send at 1.001 ms, its data computed by 0.5 ms and launched at 0.4 ms, started 501 us after it was
    # ready: a peer wait (the receive beside it ended after the send started, and does not count)
    ready = ready_times(start[1:2], got[1:2], np.array([500_000]), np.array([400_000]))
    assert ready.tolist() == [500_000]
