"""Host-side work on hand-built timelines: input work on the training thread (data-starved), eager
dispatch and quiet host stretches (not), set-up / teardown (one-time-cost), frame names."""

from __future__ import annotations

import pandas as pd
import pytest
from _frames import annotation, api, kernel, make_events, op

from traceread.config import Thresholds
from traceread.host_calls import frame_label
from traceread.rules import classify

CFG = Thresholds()
US, MS = 1_000, 1_000_000


def gap_row(start: int, end: int, launch: int, **cols) -> dict:
    row = dict(rank=0, device=0, step=1, start_ns=start, end_ns=end, dur_ns=end - start, offset_ns=start, phase=0.1,
               launch_count=1, longest_cpu_ns=0, longest_cpu_name="", python_frame="", next_kernel_name="k",
               next_launch_start_ns=launch, next_launch_end_ns=launch + 5 * US, launch_after_gap_start=True,
               queue_depth=0)
    for kind in ("comm", "comm_collective", "comm_p2p", "memcpy_htod", "memcpy_dtoh", "memcpy_pageable",
                 "cpu_runtime", "dataloader", "sync", "alloc", "optimizer"):
        row[f"{kind}_ns"] = cols.pop(f"{kind}_ns", 0)
    row.update(cols)
    return row


def one(row: dict, trace) -> pd.Series:
    return classify(pd.DataFrame([row]), None, trace, CFG).iloc[0]


def py(name: str, start: int, end: int) -> dict:
    return op(name, start, end, category="python_function")


def _input_trace(outer: str, inner: list[str]) -> object:
    """compute ==|........ 3 ms ........|==   host [outer [inner...]]|.to()|launch"""
    rows = [kernel(0, 1 * MS), py("train.py(300): train_loop", 0, 6 * MS),
            py(outer, 1 * MS + 10 * US, 3 * MS + 900 * US)]
    t = 1 * MS + 20 * US
    for name in inner:
        rows.append(py(name, t, t + 900 * US))
        t += 950 * US
    rows += [api("cudaMemcpyAsync", 3 * MS + 920 * US, 3 * MS + 930 * US),
             api("cudaLaunchKernel", 3 * MS + 950 * US, 3 * MS + 955 * US),
             api("cudaLaunchKernel", 100 * US, 105 * US),  # the train loop launches: not launch-free
             kernel(4 * MS, 5 * MS)]
    return make_events(rows)


def test_inline_preprocessing_is_data_starved_with_the_frames_named():
    trace = _input_trace("transformers/pipelines/video_classification.py(129): preprocess",
                         ["transformers/pipelines/video_classification.py(174): read_video_pyav",
                          "numpy/core/shape_base.py(372): stack"])
    row = one(gap_row(1 * MS, 4 * MS, 3 * MS + 950 * US), trace)
    assert row["class"] == "data-starved" and row["evidence_kind"] == "host-input"
    assert "preprocess (video_classification.py:129)" in row["evidence"]
    assert "read_video_pyav (video_classification.py:174)" in row["evidence"]
    assert "train_loop" not in row["evidence"]  # it launches kernels: dispatch, not input work


def test_generic_frames_are_input_work_when_the_batch_is_copied_in_the_gap():
    trace = _input_trace("train.py(88): prepare_batch", ["train.py(41): load_sample"])
    fed = one(gap_row(1 * MS, 4 * MS, 3 * MS + 950 * US, memcpy_htod_ns=15 * US), trace)
    assert fed["class"] == "data-starved"
    unfed = one(gap_row(1 * MS, 4 * MS, 3 * MS + 950 * US), trace)
    assert unfed["class"] != "data-starved"  # unnamed host work, no batch copy: not shown to be input


def test_eager_dispatch_frames_are_not_input_work():
    """A long gap held by Python frames that launch kernels (a forward) is never input work."""
    rows = [kernel(0, 1 * MS), py("transformers/models/x.py(50): preprocess_layer", 1 * MS, 3 * MS + 990 * US)]
    rows += [api("cudaLaunchKernel", 1 * MS + k * 300 * US, 1 * MS + k * 300 * US + 5 * US) for k in range(1, 10)]
    rows += [kernel(4 * MS, 5 * MS)]
    row = one(gap_row(1 * MS, 4 * MS, 3 * MS + 700 * US, memcpy_htod_ns=15 * US, launch_count=9), make_events(rows))
    assert row["class"] != "data-starved"


def test_a_quiet_checkpoint_stretch_is_not_input_work():
    """Not input work; since issue 42 the host's own work (the CPU the bottleneck): launch-bound with
    evidence kind host-work, its frame named, never the CUDA-graph fix."""
    trace = make_events([kernel(0, 1 * MS), annotation("## save_checkpoint ##", 1 * MS, 3 * MS + 900 * US),
                         api("cudaLaunchKernel", 3 * MS + 950 * US, 3 * MS + 955 * US), kernel(4 * MS, 5 * MS)])
    row = one(gap_row(1 * MS, 4 * MS, 3 * MS + 950 * US), trace)
    assert row["class"] == "launch-bound" and row["evidence_kind"] == "host-work"
    assert "save_checkpoint" in row["evidence"] and "the CPU is the bottleneck" in row["evidence"]
    from traceread.causes import first_response
    assert "off the training step" in first_response("launch-bound", "host-work")


def test_setup_and_teardown_ranges_are_one_time_cost():
    """clean_up [cudaFreeHost ...] init_data [cudaHostAlloc, cudaStreamCreate]: set-up, not launch overhead."""
    trace = make_events([
        kernel(0, 1 * MS), annotation("main->test->clean_up", 1 * MS + 10 * US, 2 * MS),
        api("cudaStreamDestroy", 1 * MS + 20 * US, 1 * MS + 40 * US), api("cudaFreeHost", 1 * MS + 50 * US, 2 * MS),
        annotation("main->test->init_data", 2 * MS + 10 * US, 3 * MS + 900 * US),
        api("cudaStreamCreate", 2 * MS + 20 * US, 2 * MS + 30 * US), api("cudaHostAlloc", 2 * MS + 40 * US, 3 * MS),
        *[api("cudaLaunchKernel", 3 * MS + k * 10 * US, 3 * MS + k * 10 * US + 5 * US) for k in range(1, 60)],
        kernel(4 * MS, 5 * MS)])
    row = one(gap_row(1 * MS, 4 * MS, 3 * MS + 590 * US, cpu_runtime_ns=2 * MS, launch_count=59), trace)
    assert row["class"] == "one-time-cost" and row["evidence_kind"] == "setup-teardown"
    assert "init_data" in row["evidence"] or "cudaHostAlloc" in row["evidence"]


def test_allocator_evidence_counts_a_call_that_spans_the_gap():
    """A 3 ms hipFree that began before the gap holds it: 1 call, not 0."""
    steps = pd.DataFrame({"rank": [0] * 4, "device": [0] * 4, "step": [0, 1, 2, 3],
                          "start_ns": [k * 10 * MS for k in range(4)], "end_ns": [(k + 1) * 10 * MS for k in range(4)],
                          "warmup": False, "outlier": False})
    rows = [kernel(30 * MS, 31 * MS), api("hipFree", 30 * MS + 500 * US, 34 * MS + 100 * US),
            api("hipLaunchKernel", 34 * MS + 200 * US, 34 * MS + 205 * US), kernel(34 * MS + 300 * US, 35 * MS)]
    rows += [api("hipFree", k * 10 * MS + MS, k * 10 * MS + MS + 50 * US) for k in range(3)]
    row = classify(pd.DataFrame([gap_row(31 * MS, 34 * MS + 300 * US, 34 * MS + 200 * US, step=3)]), steps,
                   make_events(rows), CFG).iloc[0]
    assert row["class"] == "sync-stall" and row["evidence_kind"] == "allocator"
    assert "host in 1 synchronizing allocator call(s)" in row["evidence"]


@pytest.mark.parametrize(("name", "label"), [
    ("transformers/pipelines/video_classification.py(129): preprocess", "preprocess (video_classification.py:129)"),
    ("<built-in method to of Tensor object at 0x7cc1559c5310>", "built-in method to (Tensor)"),
    ("<built-in function linear>", "built-in function linear"),
    ("nn.Module: TimesformerModel_0", "nn.Module: TimesformerModel_0"),
    ("aten::mm", "aten::mm"),
])
def test_frame_labels(name, label):
    assert frame_label(name) == label
