"""find_gaps / step_totals on hand-built micro-traces with known answers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from _frames import annotation, api, comm, copy, kernel, make_events, memset, op

from traceread.config import Thresholds
from traceread.engine.gaps import (
    FRACTION_COLUMNS,
    FRAME_COLUMNS,
    GAP_COLUMNS,
    OVERLAP_KINDS,
    find_gaps,
    with_fractions,
)
from traceread.engine.step_totals import step_totals
from traceread.engine.steps import find_steps
from traceread.rules import build_context

CFG = Thresholds()


def run(rows, **kw):
    trace = make_events(rows, **kw)
    steps = find_steps(trace, CFG).steps
    gaps = find_gaps(trace, steps)
    check_gaps(trace, steps, gaps)
    return trace, steps, gaps


def check_gaps(trace, steps, gaps):
    """Invariants every gaps frame keeps (called after each find_gaps)."""
    assert list(gaps.columns) == list(FRAME_COLUMNS)
    assert not set(FRACTION_COLUMNS) & set(gaps.columns)  # derived on output, not held
    assert list(with_fractions(gaps).columns) == list(GAP_COLUMNS)
    assert (gaps["dur_ns"] > 0).all() and (gaps["dur_ns"] == gaps["end_ns"] - gaps["start_ns"]).all()
    full = with_fractions(gaps)
    for k in OVERLAP_KINDS:
        frac = full[f"{k}_frac"]
        assert ((frac >= 0) & (frac <= 1)).all(), k
        assert np.allclose(frac, gaps[f"{k}_ns"] / gaps["dur_ns"])
    totals = step_totals(steps, gaps)
    idle = gaps.groupby(["rank", "device", "step"])["dur_ns"].sum()
    merged = totals.set_index(["rank", "device", "step"]).join(idle.rename("gap_sum")).fillna(0)
    assert (merged["idle_ns"] == merged["gap_sum"]).all()
    assert (totals["busy_ns"] + totals["idle_ns"] == totals["step_ns"]).all()


def spans(gaps):
    return list(zip(gaps["start_ns"].tolist(), gaps["end_ns"].tolist(), strict=False))


def test_overlapping_kernels_on_two_streams_leave_only_true_holes():
    rows = [annotation("ProfilerStep#1", 0, 100),
            kernel(10, 40, stream=7), kernel(30, 60, stream=8), kernel(70, 80, stream=8)]
    _, steps, gaps = run(rows)
    assert spans(gaps) == [(0, 10), (60, 70), (80, 100)]
    assert gaps["offset_ns"].tolist() == [0, 60, 80]
    assert np.allclose(gaps["phase"], [0, 0.6, 0.8])
    assert steps["busy_ns"].tolist() == [60]


def test_kernel_spanning_a_step_boundary():
    rows = [annotation("ProfilerStep#1", 0, 100), annotation("ProfilerStep#2", 100, 200), kernel(80, 130)]
    _, _, gaps = run(rows)
    assert spans(gaps) == [(0, 80), (130, 200)] and gaps["step"].tolist() == [1, 2]


def test_step_numbers_and_offsets_are_int32_when_every_one_fits():
    """A gap's step number and offset are held at int32 (a 5M-gap export: 18 MB less held each) unless one
    does not fit."""
    rows = [annotation("ProfilerStep#1", 0, 100), annotation("ProfilerStep#2", 100, 200), kernel(80, 130)]
    _, _, gaps = run(rows)
    assert gaps["step"].dtype == np.int32 and gaps["step"].tolist() == [1, 2]
    assert gaps["offset_ns"].dtype == np.int32 and gaps["offset_ns"].tolist() == [0, 30]
    big = [annotation(f"ProfilerStep#{2**31 + 1}", 0, 100), kernel(80, 90),
           annotation(f"ProfilerStep#{2**31 + 2}", 100, 2**32), kernel(2**31 + 200, 2**31 + 300)]
    _, _, gaps = run(big)
    assert gaps["step"].dtype == np.int64 and gaps["step"].tolist() == [2**31 + 1, 2**31 + 1, 2**31 + 2, 2**31 + 2]
    assert gaps["offset_ns"].dtype == np.int64 and gaps["offset_ns"].tolist() == [0, 90, 0, 2**31 + 200]


def test_gpu_lagging_its_cpu_step_is_not_idle():
    rows = [annotation("ProfilerStep#1", 0, 100), annotation("ProfilerStep#2", 100, 200),
            api("cudaLaunchKernel", 10, 20, corr=1), kernel(30, 150, corr=1),
            api("cudaLaunchKernel", 110, 120, corr=2), kernel(150, 190, corr=2)]
    _, steps, gaps = run(rows)
    assert steps["start_ns"].tolist() == [0, 150]
    # [100,150) belongs to step 1 on the device and is busy; only the leading/trailing holes remain.
    assert spans(gaps) == [(0, 30), (190, 200)]


def test_zero_length_and_identical_kernels():
    rows = [annotation("ProfilerStep#1", 0, 100), kernel(50, 50, name="empty_kernel"),
            kernel(60, 70, name="a_kernel", corr=1), kernel(60, 70, name="a_kernel", stream=8),
            kernel(60, 60, name="zero_at_60"), api("cudaLaunchKernel", 5, 6, corr=1)]
    _, _, gaps = run(rows)
    assert spans(gaps) == [(0, 60), (70, 100)]  # the zero-length kernel splits nothing
    assert gaps["next_kernel_name"].tolist() == ["a_kernel", ""]
    assert gaps["next_launch_start_ns"].tolist()[0] in (5, -1)


def test_comm_partly_overlapping_compute():
    rows = [annotation("ProfilerStep#1", 0, 100), kernel(0, 40), kernel(70, 100),
            comm(30, 60), comm(65, 90, name="ncclDevKernel_SendRecv(x)")]
    _, _, gaps = run(rows)
    assert spans(gaps) == [(40, 70)]
    g = gaps.iloc[0]
    assert g["comm_ns"] == 25 and g["comm_collective_ns"] == 20 and g["comm_p2p_ns"] == 5


def test_gap_with_no_cpu_activity():
    rows = [annotation("ProfilerStep#1", 0, 100), kernel(0, 40), kernel(60, 100),
            api("cudaLaunchKernel", 0, 5, corr=1)]
    _, _, gaps = run(rows)
    g = gaps.iloc[0]
    assert (g["start_ns"], g["end_ns"]) == (40, 60)
    for k in OVERLAP_KINDS:
        assert g[f"{k}_ns"] == 0
    assert g["launch_count"] == 0 and g["longest_cpu_ns"] == 0 and g["longest_cpu_name"] == ""
    assert g["python_frame"] == "" and g["next_launch_start_ns"] == -1 and not g["launch_after_gap_start"]


def test_optimizer_steps_without_step_markers():
    rows = [kernel(0, 50), kernel(120, 150), kernel(210, 250), kernel(310, 320),
            op("Optimizer.step#SGD.step", 80, 100, category="user_annotation"),
            op("Optimizer.step#SGD.step", 180, 200, category="user_annotation"),
            op("Optimizer.step#SGD.step", 280, 300, category="user_annotation")]
    _, steps, gaps = run(rows)
    assert steps["step"].tolist() == [0, 1]
    assert steps[["start_ns", "end_ns"]].values.tolist() == [[100, 200], [200, 300]]
    assert spans(gaps) == [(100, 120), (150, 200), (200, 210), (250, 300)]
    assert gaps["optimizer_ns"].tolist() == [0, 20, 0, 20]


def test_host_side_measures():
    rows = [annotation("ProfilerStep#1", 0, 1000), kernel(0, 100),
            annotation("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", 100, 300),
            api("cudaStreamSynchronize", 300, 400), api("cudaMalloc", 350, 450),
            op("aten::copy_", 460, 560),
            api("cudaLaunchKernel", 500, 520, corr=1), api("cuLaunchKernel", 505, 515, corr=1, category="driver"),
            api("cudaLaunchKernel", 530, 540, corr=2),
            op("train.py(10): <module>", 0, 1000, category="python_function"),
            op("model.py(5): forward", 90, 200, category="python_function"),
            kernel(600, 700, corr=1, name="next_one"), kernel(700, 1000, corr=2)]
    _, _, gaps = run(rows)
    g = gaps.iloc[0]
    assert (g["start_ns"], g["end_ns"]) == (100, 600)
    assert g["dataloader_ns"] == 200 and g["sync_ns"] == 100 and g["alloc_ns"] == 100
    assert g["cpu_runtime_ns"] == 100 + 50 + 20 + 10  # sync..malloc union, then the two launches
    assert g["launch_count"] == 2
    assert g["longest_cpu_ns"] == 100 and g["longest_cpu_name"] in ("cudaStreamSynchronize", "cudaMalloc",
                                                                    "aten::copy_")
    assert g["python_frame"] == "model.py(5): forward"
    assert g["next_kernel_name"] == "next_one"
    assert (g["next_launch_start_ns"], g["next_launch_end_ns"]) == (500, 520)  # the runtime call, not the driver
    assert g["launch_after_gap_start"]


@pytest.mark.parametrize("name,sync", [("cudaFree", True), ("hipFree", True), ("cuMemFree_v2", True),
                                       ("cudaFreeHost", True), ("cudaStreamSynchronize", True), ("cudaMemcpy", True),
                                       ("hipMemcpyWithStream", True), ("cudaMalloc", False),
                                       ("cudaFreeAsync", False), ("cudaMemcpyAsync", False)])
def test_the_gap_engine_and_the_rules_agree_on_what_is_a_sync(name, sync):
    """One table of host calls (traceread.host_calls): cudaFree synchronizes the device, so it is in
    the engine's sync_ns as it is a sync at the drain for the rules (the engine once left it out)."""
    trace, steps, gaps = run([annotation("ProfilerStep#1", 0, 1000), kernel(0, 100), api(name, 50, 400),
                              api("cudaLaunchKernel", 500, 520, corr=1), kernel(600, 1000, corr=1)])
    g = gaps.iloc[0]
    assert (g["start_ns"], g["end_ns"]) == (100, 600)
    held = build_context(gaps, steps, trace, CFG).sync_at_drain  # the rules: a sync in progress at the drain
    assert (g["sync_ns"] == 300) == sync and bool(held[0]) == sync


def test_memcpy_direction_and_kind_from_copy_args_and_names():
    rows = [annotation("ProfilerStep#1", 0, 100), kernel(0, 10), kernel(90, 100),
            copy(10, 30, name="Memcpy HtoD (Pinned -> Device)"), copy(40, 50, name="Memcpy DtoH (Device -> Pageable)"),
            copy(60, 65, name="memcpy"), memset(70, 72)]
    side = {"copy_args": pd.DataFrame({"row": [5], "bytes": [8], "copy_kind": ["PtoP"], "src_kind": ["Device"],
                                       "dst_kind": ["Device"]})}
    _, _, gaps = run(rows, side=side)
    g = gaps.iloc[0]
    assert g["memcpy_htod_ns"] == 20 and g["memcpy_pinned_ns"] == 20
    assert g["memcpy_dtoh_ns"] == 10 and g["memcpy_pageable_ns"] == 10
    assert g["memcpy_ptop_ns"] == 5 and g["memcpy_dtod_ns"] == 0 and g["memset_ns"] == 2
    assert g["memcpy_htod_pageable_ns"] == 0  # pinned H2D and pageable D2H: no pageable H2D


def test_pageable_h2d_from_the_name_or_the_copy_args_kinds():
    """Kineto names the memory kinds in the copy's name; nsys in copy_args (src_kind): both count."""
    rows = [annotation("ProfilerStep#1", 0, 100), kernel(0, 10), kernel(90, 100),
            copy(10, 30, name="Memcpy HtoD (Pageable -> Device)"), copy(40, 70, name="Memcpy HtoD")]
    side = {"copy_args": pd.DataFrame({"row": [4], "bytes": [8], "copy_kind": ["HtoD"], "src_kind": ["Pageable"],
                                       "dst_kind": ["Device"]})}
    _, _, gaps = run(rows, side=side)
    g = gaps.iloc[0]
    assert g["memcpy_htod_ns"] == 50 and g["memcpy_htod_pageable_ns"] == 50 and g["memcpy_pinned_ns"] == 0


def test_queue_depth_counts_launched_not_started_work():
    rows = [annotation("ProfilerStep#1", 0, 1000)]
    for i in range(3):  # three launches early; kernels run later, one after another
        rows += [api("cudaLaunchKernel", 10 + i, 11 + i, corr=i + 1), kernel(100 + 200 * i, 200 + 200 * i, corr=i + 1)]
    _, _, gaps = run(rows)
    assert spans(gaps) == [(0, 100), (200, 300), (400, 500), (600, 1000)]
    assert gaps["queue_depth"].tolist() == [0, 2, 1, 0]


def test_links_use_rank_and_pid_never_correlation_alone():
    # Two ranks and two processes reuse correlation id 1; each kernel must find its own launch.
    rows = [api("cudaLaunchKernel", 10, 20, corr=1, rank=0), kernel(100, 200, corr=1, rank=0),
            api("cudaLaunchKernel", 30, 40, corr=1, rank=1), kernel(100, 200, corr=1, rank=1),
            api("cudaLaunchKernel", 50, 60, corr=1, rank=2, pid=7),
            api("cudaLaunchKernel", 70, 80, corr=1, rank=2, pid=8),
            dict(kernel(300, 400, corr=1, rank=2), pid=8),
            annotation("ProfilerStep#1", 0, 500, rank=0), annotation("ProfilerStep#1", 0, 500, rank=1),
            annotation("ProfilerStep#1", 0, 500, rank=2)]
    _, _, gaps = run(rows)
    first = gaps.groupby("rank").first()
    assert first["next_launch_start_ns"].tolist() == [10, 30, 70]
