"""Run-level attribution: parts sum to step time, overlaps count once, verdicts follow the thresholds."""

from __future__ import annotations

import numpy as np
import pandas as pd
from _frames import kernel, make_events

from traceread.attribution import PARTS, Attribution, attribute, part_col
from traceread.causes import first_response
from traceread.config import Thresholds
from traceread.render.notes import text as words  # notes are data; the reports word them

CFG = Thresholds()
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"
ELEM = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>"


def steps(*windows, device=0, rank=0, warmup=()):
    return pd.DataFrame({"rank": np.int32(rank), "device": np.int32(device), "step": np.arange(len(windows)),
                         "start_ns": [w[0] for w in windows], "end_ns": [w[1] for w in windows],
                         "cpu_start_ns": [w[0] for w in windows], "cpu_end_ns": [w[1] for w in windows],
                         "busy_ns": 0, "idle_ns": 0, "warmup": [i in warmup for i in range(len(windows))],
                         "outlier": False})


def gaps(*rows, device=0, rank=0):
    return pd.DataFrame({"rank": np.int32(rank), "device": np.int32(device), "step": 0,
                         "start_ns": [r[0] for r in rows], "end_ns": [r[1] for r in rows],
                         "dur_ns": [r[1] - r[0] for r in rows], "class": [r[2] for r in rows]})


def row(a: Attribution, device=0) -> dict:
    return a.table[a.table["device"] == device].iloc[0].to_dict()


def test_parts_sum_to_step_time_and_overlap_counts_once():
    """gemm [0,100) and elementwise [50,150) overlap: [0,150) busy, 100 compute-bound.

    step [0,400):  |gemm....|elem|.gap.|elem......|.....gap.....|
                   0        100  150   200        300           400
    """
    trace = make_events([kernel(0, 100, GEMM), kernel(50, 150, ELEM, stream=8), kernel(200, 300, ELEM)])
    a = attribute(trace, steps((0, 400)), gaps((150, 200, "launch-bound"), (300, 400, "data-starved")), CFG)
    r = row(a)
    assert r[part_col("compute-bound")] == 100
    assert r[part_col("memory-bound")] == 150
    assert r[part_col("launch-bound")] == 50 and r[part_col("data-starved")] == 100
    assert sum(r[part_col(p)] for p in PARTS) == r["step_ns"] == 400
    assert abs(sum(a.shares.values()) - 1.0) < 1e-12
    assert a.dominant_cause == "data-starved" and a.dominant_cost_share == 0.25
    assert "loader workers" in first_response(a.dominant_cause, a.dominant_evidence)


def test_idle_without_a_gap_row_goes_to_unattributed():
    trace = make_events([kernel(0, 100, GEMM)])
    r = row(attribute(trace, steps((0, 400)), gaps((100, 250, "sync-stall")), CFG))
    assert r[part_col("sync-stall")] == 150 and r[part_col("unattributed")] == 150


def test_gaps_overlapping_busy_time_are_scaled_not_double_counted():
    trace = make_events([kernel(0, 300, GEMM)])
    a = attribute(trace, steps((0, 400)), gaps((250, 400, "comm-bound")), CFG)
    r = row(a)
    assert r[part_col("comm-bound")] == 100 and sum(r[part_col(p)] for p in PARTS) == 400
    assert any("exceed idle time" in n for n in map(words, a.notes))


def test_warmup_steps_are_left_out_and_kernels_outside_steps_ignored():
    trace = make_events([kernel(0, 100, ELEM), kernel(1000, 1090, GEMM), kernel(5000, 6000, ELEM)])
    r = row(attribute(trace, steps((0, 1000), (1000, 1100), warmup=(0,)), gaps((1090, 1100, "launch-bound")), CFG))
    assert r["step_ns"] == 100 and r["steps"] == 1
    assert r[part_col("compute-bound")] == 90 and r[part_col("memory-bound")] == 0


def test_packed_memory_bound_run_is_memory_bound():
    trace = make_events([kernel(0, 300, ELEM), kernel(300, 380, GEMM), kernel(385, 1000, ELEM)])
    a = attribute(trace, steps((0, 1000)), gaps((380, 385, "unattributed")), CFG)
    assert a.dominant_cause == "memory-bound"
    assert a.dominant_cost_share == (1000 - 80 - 5) / 1000
    assert "fuse" in first_response(a.dominant_cause, a.dominant_evidence)


CUSTOM = "sage_fwd"  # a custom kernel no pattern names (class "other")


def test_unknown_kernels_are_their_own_busy_part_after_the_classified_ones():
    """custom [0,300) overlaps gemm [100,200) and elementwise [250,400); custom alone [600,900).

    step [0,1000): |cus|gemm|cus|elem/cus|elem|..gap..|custom....|.gap.|
                   0   100  200  250      300 400     600        900  1000
    """
    trace = make_events([kernel(0, 300, CUSTOM), kernel(100, 200, GEMM, stream=8), kernel(250, 400, ELEM, stream=9),
                         kernel(600, 900, CUSTOM)])
    a = attribute(trace, steps((0, 1000)), gaps((400, 600, "launch-bound"), (900, 1000, "launch-bound")), CFG)
    r = row(a)
    assert r[part_col("compute-bound")] == 100
    assert r[part_col("memory-bound")] == 150  # [250,400): elementwise ran, so not unclassified
    assert r[part_col("unclassified")] == 100 + 50 + 300  # [0,100), [200,250), [600,900)
    assert sum(r[part_col(p)] for p in PARTS) == r["step_ns"] == 1000
    assert any("unknown class" in n for n in map(words, a.notes))


def test_unknown_kernels_never_make_a_run_memory_bound_nor_draw_the_fusion_lever():
    # Packed with custom kernels: little idle, and not memory-bound (nothing is known of them).
    packed = make_events([kernel(0, 900, CUSTOM), kernel(900, 990, ELEM)])
    a = attribute(packed, steps((0, 1000)), gaps((990, 1000, "launch-bound")), CFG)
    assert a.dominant_cause == "healthy" and a.shares["unclassified"] == 0.9
    # Idle-dominated with custom kernels: no "fusion is the next lever" note, no memory-bound runner-up.
    idle = make_events([kernel(0, 300, CUSTOM), kernel(300, 350, ELEM)])
    b = attribute(idle, steps((0, 1000)), gaps((350, 1000, "launch-bound")), CFG)
    assert b.dominant_cause == "launch-bound"
    assert not any("fusion" in n for n in map(words, b.notes))
    assert row(b)["verdict"] == "launch-bound"
    # The same run with classified memory-bound kernels instead keeps the lever.
    elem = make_events([kernel(0, 300, ELEM), kernel(300, 350, ELEM)])
    c = attribute(elem, steps((0, 1000)), gaps((350, 1000, "launch-bound")), CFG)
    assert any("fusion is the next lever" in n for n in map(words, c.notes))


def test_cuda_graphs_are_compute_bound_whatever_their_name():
    trace = make_events([kernel(0, 500, "CUDA Graph", category="cuda_graph")])
    r = row(attribute(trace, steps((0, 1000)), gaps((500, 1000, "launch-bound")), CFG))
    assert r[part_col("compute-bound")] == 500 and r[part_col("unclassified")] == 0


def test_packed_compute_bound_run_is_healthy():
    trace = make_events([kernel(0, 960, GEMM), kernel(960, 990, ELEM)])
    a = attribute(trace, steps((0, 1000)), gaps((990, 1000, "launch-bound")), CFG)
    assert a.dominant_cause == "healthy" and a.dominant_cost_share == 0.01
    tighter = attribute(trace, steps((0, 1000)), gaps((990, 1000, "launch-bound")),
                        CFG.with_overrides({"healthy_max_idle": 0.005}))
    assert tighter.dominant_cause == "launch-bound"


def test_each_device_gets_its_own_row_and_verdict():
    trace = make_events([kernel(0, 900, GEMM, device=0), kernel(0, 100, ELEM, device=1)])
    st = pd.concat([steps((0, 1000), device=0), steps((0, 1000), device=1)], ignore_index=True)
    gp = pd.concat([gaps((900, 1000, "launch-bound"), device=0), gaps((100, 1000, "comm-bound"), device=1)])
    a = attribute(trace, st, gp, CFG)
    assert list(a.table["verdict"]) == ["healthy", "comm-bound"]
    assert a.dominant_cause == "comm-bound" and a.dominant_cost_share == 0.45
    assert set(a.to_dict()) >= {"dominant_cause", "dominant_cost_share", "shares", "per_device", "notes"}


def test_no_steps_gives_an_empty_table_and_a_note():
    a = attribute(make_events([kernel(0, 10, GEMM)]), steps().iloc[:0], gaps(), CFG)
    assert a.table.empty and any("nothing to attribute" in n for n in map(words, a.notes))
