"""traceread.ranks.p2p: pairing two ranks' calls by end time, by direction for transfers, without a cut-off."""

from __future__ import annotations

import numpy as np

from traceread.ranks import p2p


def _calls(kinds: list[str], ends: np.ndarray, nbytes: int = 1024) -> dict[str, np.ndarray]:
    ends = np.asarray(ends, dtype=np.int64)
    return {"collective": np.array(kinds, dtype=str), "end_ns": ends, "start_ns": ends - 30_000,
            "bytes": np.full(len(ends), nbytes, dtype=np.int64)}


def test_many_transfers_with_drops_paired_without_a_cut_off():
    """25 million candidate pairs (5000 x 5000; the old fallback skipped above 4 million), clocks unbounded."""
    rng = np.random.default_rng(0)
    n = 5000
    true_end = np.cumsum(rng.integers(200_000, 900_000, n))  # transfers of irregular spacing
    offset = 37_123_457
    a = _calls(["send"] * n, true_end)
    kept = np.sort(rng.choice(n, int(0.7 * n), replace=False))  # 30% of b's records dropped
    b = _calls(["recv"] * len(kept), true_end[kept] + offset)
    groups = p2p.p2p_groups(a, b, np.arange(n), np.arange(len(kept)), 0, 0)
    found = p2p.best_offset(groups, 50_000, None, tight=True)
    assert found is not None and found[0] == offset and found[1] == len(kept)
    got = p2p.match_by_time(groups, a, b, 50_000, None, tight=True)
    assert got is not None
    pa, pb = got
    assert len(pa) == len(kept)
    assert np.array_equal(pa, kept[pb])  # each recv with its own send


def test_directions_kept_apart_and_sizes_checked():
    """a's sends pair only with b's recvs and a's recvs with b's sends; a size that disagrees is no pair."""
    t = np.arange(1, 41, dtype=np.int64) * 1_000_000
    kinds_a = ["send", "recv"] * 20
    kinds_b = ["recv", "send"] * 20
    a = _calls(kinds_a, t)
    b = _calls(kinds_b, t - 2_500_000)
    b["bytes"][7] = 99  # one transfer's size disagrees
    got = p2p.match_by_time(p2p.p2p_groups(a, b, np.arange(40), np.arange(40), 0, 0), a, b, 50_000, None, tight=True)
    assert got is not None
    pa, pb = got
    assert set(pb.tolist()) == set(range(40)) - {7}
    assert np.array_equal(pa, pb)
    assert all(kinds_a[x] != kinds_b[y] for x, y in zip(pa.tolist(), pb.tolist(), strict=True))


def test_no_shared_traffic_is_no_match():
    """Two ranks whose transfers never end together (pipeline stages two apart) share nothing."""
    rng = np.random.default_rng(1)
    a = _calls(["send"] * 60, np.sort(rng.integers(0, 10**9, 60)))
    b = _calls(["recv"] * 60, np.sort(rng.integers(0, 10**9, 60)))
    assert p2p.match_by_time(p2p.p2p_groups(a, b, np.arange(60), np.arange(60), 0, 0), a, b, 20_000, None,
                             tight=True) is None


def test_batched_send_recv_kernels_pair_once():
    """batch_isend_irecv: one send-recv kernel on each side per exchange, paired once (not once per direction)."""
    t = np.arange(1, 31, dtype=np.int64) * 700_000
    a = _calls(["send-recv"] * 30, t)
    b = _calls(["send-recv"] * 30, t + 900_000)
    got = p2p.match_by_time(p2p.p2p_groups(a, b, np.arange(30), np.arange(30), 0, 0), a, b, 50_000, None, tight=True)
    assert got is not None
    pa, pb = got
    assert len(pa) == 30 and np.array_equal(pa, pb)


def test_collectives_paired_by_type_at_the_offset_most_agree_on():
    rng = np.random.default_rng(2)
    n = 3000
    t = np.cumsum(rng.integers(300_000, 2_000_000, n))
    kinds = rng.choice(["allreduce", "allgather"], n).tolist()
    a = _calls(kinds, t)
    b = _calls(kinds, t - 4_000_000 + rng.integers(-3_000, 3_000, n))
    got = p2p.match_by_time(p2p.typed_groups(a, b, np.arange(n), np.arange(n), 0, 0), a, b, 100_000,
                            100_000_000, min_share=0.0)
    assert got is not None
    pa, pb = got
    assert len(pa) == n and np.array_equal(pa, pb)
