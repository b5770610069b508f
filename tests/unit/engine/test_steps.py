"""find_steps: step sources, GPU-lag extension, warmup and outlier flags, on hand-built frames."""

from __future__ import annotations

from itertools import pairwise

import pandas as pd
import pytest
from _frames import annotation, api, kernel, make_events, op
from hypothesis import given, settings
from hypothesis import strategies as st

from traceread import schema
from traceread.config import Thresholds
from traceread.engine.steps import find_steps
from traceread.render.notes import text as words  # notes are data; the reports word them

CFG = Thresholds()


def steps_of(rows, **kw):
    res = find_steps(make_events(rows, **{k: v for k, v in kw.items() if k in ("meta_steps", "fmt")}), CFG,
                     **{k: v for k, v in kw.items() if k in ("warmup_steps", "step_range")})
    assert list(res.steps.columns) == list(schema.STEP_COLUMNS)
    for col, (dtype, _) in schema.STEP_COLUMNS.items():
        assert str(res.steps[col].dtype) == dtype, col
    return res


def test_profiler_steps_and_gpu_lag_extension():
    # CPU step 1 is [0,1000); its kernel, launched at 900, runs until 1400 -> device step 1 ends
    # at 1400 and device step 2 starts there, not at the CPU's 1000.
    rows = [annotation("ProfilerStep#1", 0, 1000), annotation("ProfilerStep#2", 1000, 2000),
            api("cudaLaunchKernel", 900, 910, corr=1), kernel(1100, 1400, corr=1),
            api("cudaLaunchKernel", 1500, 1510, corr=2), kernel(1600, 1700, corr=2),
            dict(kernel(1100, 1400), lane="gpu_annotation", category="gpu_annotation",
                 name="ProfilerStep#1")]
    res = steps_of(rows)
    s = res.steps
    assert res.source == "ProfilerStep"
    assert s["step"].tolist() == [1, 2]  # the GPU mirror of ProfilerStep#1 is not a third step
    assert s["start_ns"].tolist() == [0, 1400] and s["end_ns"].tolist() == [1400, 2000]
    assert s["cpu_start_ns"].tolist() == [0, 1000] and s["cpu_end_ns"].tolist() == [1000, 2000]
    assert s["busy_ns"].tolist() == [300, 100] and s["idle_ns"].tolist() == [1100, 500]


def test_lag_longer_than_next_step_keeps_steps_disjoint():
    rows = [annotation(f"ProfilerStep#{i}", 100 * i, 100 * i + 100) for i in range(1, 4)]
    rows += [api("cudaLaunchKernel", 150, 160, corr=1), kernel(170, 450, corr=1)]
    s = steps_of(rows).steps
    assert s["start_ns"].tolist() == [100, 450, 450] and s["end_ns"].tolist() == [450, 450, 450]
    assert (s["start_ns"].to_numpy()[1:] >= s["end_ns"].to_numpy()[:-1]).all()


def test_meta_steps_are_used_when_the_loader_found_them():
    meta = pd.DataFrame({"rank": [0, 0], "step": [7, 8], "name": ["ProfilerStep#7", "ProfilerStep#8"],
                         "start_ns": [0, 50], "end_ns": [50, 100]})
    s = steps_of([kernel(10, 20)], meta_steps=meta).steps
    assert s["step"].tolist() == [7, 8] and s["end_ns"].tolist() == [50, 100]


@pytest.mark.parametrize("first,count,expected", [(0, 5, [True, False, False, False, False]),
                                                   (0, 3, [False] * 3), (3, 5, [False] * 5)])
def test_warmup_only_for_profiler_step_zero_with_enough_steps(first, count, expected):
    rows = [annotation(f"ProfilerStep#{first + i}", 100 * i, 100 * i + 100) for i in range(count)]
    rows.append(kernel(10, 20))
    assert steps_of(rows).steps["warmup"].tolist() == expected


def test_warmup_override_and_outlier_flag():
    lengths = [100, 100, 100, 100, 400]
    starts = [0, 100, 200, 300, 400]
    rows = [annotation(f"ProfilerStep#{i}", s, s + n) for i, (s, n) in enumerate(zip(starts, lengths, strict=False))]
    rows.append(kernel(10, 20))
    res = steps_of(rows, warmup_steps=2)
    assert res.steps["warmup"].tolist() == [True, True, False, False, False]
    assert res.steps["outlier"].tolist() == [False, False, False, False, True]
    assert any("outlier" in n for n in map(words, res.notes))


def test_inferred_from_optimizer_steps_with_a_note():
    rows = [kernel(0, 10)]
    rows += [op("Optimizer.step#AdamW.step", 90 + 100 * i, 100 + 100 * i, category="user_annotation")
             for i in range(4)]
    res = steps_of(rows)
    assert res.source == "inferred:Optimizer.step"
    # iterations run from one optimizer step's end to the next one's end
    assert res.steps["cpu_start_ns"].tolist() == [100, 200, 300]
    assert res.steps["cpu_end_ns"].tolist() == [200, 300, 400]
    assert res.steps["step"].tolist() == [0, 1, 2]
    assert any("Optimizer.step" in n for n in map(words, res.notes))


def test_inferred_from_dataloader_when_no_optimizer():
    rows = [kernel(0, 10), kernel(400, 450)]
    rows += [annotation("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 100 * i, 100 * i + 5)
             for i in range(3)]
    res = steps_of(rows)
    assert res.source == "inferred:enumerate(DataLoader)"
    assert res.steps["cpu_start_ns"].tolist() == [0, 100]
    assert res.steps["cpu_end_ns"].tolist() == [100, 200]


def test_a_single_marker_is_not_a_cadence():
    rows = [kernel(0, 10), op("Optimizer.step#AdamW.step", 20, 30, category="user_annotation")]
    assert steps_of(rows).source == "gpu-span"


def test_gpu_span_when_no_markers_per_rank_and_device():
    rows = [kernel(50, 60), kernel(70, 90, device=1), kernel(500, 700, rank=1)]
    res = steps_of(rows)
    assert res.source == "gpu-span"
    s = res.steps
    assert s[["rank", "device", "start_ns", "end_ns"]].values.tolist() == [
        [0, 0, 50, 90], [0, 1, 50, 90], [1, 0, 500, 700]]
    assert s["busy_ns"].tolist() == [10, 20, 200]


def test_nvtx_step_range():
    rows = [kernel(5, 10)] + [annotation("train_iter", 100 * i, 100 * i + 90) for i in range(2)]
    rows.append(annotation("forward", 0, 50))
    res = steps_of(rows, step_range="train_iter", fmt="nsys")
    assert res.source == "nvtx" and res.steps["cpu_end_ns"].tolist() == [90, 190]


def test_kernel_spanning_a_step_boundary_splits_busy_time():
    rows = [annotation("ProfilerStep#1", 0, 100), annotation("ProfilerStep#2", 100, 200), kernel(80, 130)]
    s = steps_of(rows).steps
    assert s["busy_ns"].tolist() == [20, 30] and s["idle_ns"].tolist() == [80, 70]


@settings(max_examples=30, deadline=None)
@given(cuts=st.lists(st.integers(1, 200), min_size=1, max_size=5, unique=True),
       work=st.lists(st.tuples(st.integers(0, 220), st.integers(0, 60), st.integers(1, 40)), max_size=10))
def test_device_steps_are_disjoint_and_hold_their_launched_work(cuts, work):
    bounds = [0, *sorted(cuts)]
    rows = [annotation(f"ProfilerStep#{i + 1}", a, b) for i, (a, b) in enumerate(pairwise(bounds))]
    for corr, (launch, delay, dur) in enumerate(work, start=1):
        rows += [api("cudaLaunchKernel", launch, launch + 1, corr=corr),
                 kernel(launch + delay, launch + delay + dur, corr=corr)]
    rows.append(kernel(0, 0))
    s = steps_of(rows).steps
    starts, ends = s["start_ns"].to_numpy(), s["end_ns"].to_numpy()
    assert (starts <= ends).all() and (starts[1:] >= ends[:-1]).all()
    assert (starts >= s["cpu_start_ns"]).all() and (ends >= s["cpu_end_ns"]).all()
    for launch, delay, dur in work:
        i = next((i for i, (a, b) in enumerate(pairwise(bounds)) if a <= launch < b), None)
        if i is not None:
            assert ends[i] >= launch + delay + dur  # the step holds the work launched in it
