"""one-time-cost and the allocator side of sync-stall, on hand-built timelines.

Every gap below is [100 us, 100 us + dur) on rank 0 / device 0 (see test_rules.gap); the trace rows
say what the host was doing meanwhile.
"""

from __future__ import annotations

import pandas as pd
import pytest
from _frames import annotation, api, kernel, make_events, op
from test_rules import CFG, US, gap, one, queued

from traceread.attribution import dominant_idle
from traceread.causes import first_response
from traceread.render import advice
from traceread.rules import GAP_CLASSES, classify


def _steps(n: int, length: int = 1_000 * US) -> pd.DataFrame:
    return pd.DataFrame({"rank": 0, "device": 0, "step": range(n), "start_ns": [i * length for i in range(n)],
                         "end_ns": [(i + 1) * length for i in range(n)], "warmup": False, "outlier": False})


def test_compile_range_covering_the_gap_is_a_one_time_cost():
    """host NVTX [KernelExecutor::compileFusion [executor_utils::Nvrtc::CompileProgram]] over the gap."""
    trace = make_events([kernel(0, 100 * US), annotation("KernelExecutor::compileFusion", 90 * US, 2_000 * US),
                         annotation("executor_utils::Nvrtc::CompileProgram", 150 * US, 1_900 * US),
                         kernel(2_100 * US, 2_200 * US)])
    row = one(gap(dur=2_000 * US, next_launch_start_ns=2_050 * US, next_launch_end_ns=2_060 * US), trace=trace)
    assert row["class"] == "one-time-cost" and row["evidence_kind"] == "compile"
    assert "compileFusion" in row["evidence"] and "JIT compilation" in row["evidence"]


def test_a_compiled_region_running_is_not_compilation():
    """'Torch-Compiled Region' and 'CompiledFxGraph' are compiled code running, not compiling."""
    trace = make_events([kernel(0, 100 * US), annotation("Torch-Compiled Region: 0/0", 90 * US, 2_000 * US),
                         annotation("## Call CompiledFxGraph abc ##", 95 * US, 1_990 * US)])
    assert one(gap(dur=2_000 * US), trace=trace)["class"] != "one-time-cost"


def test_graph_capture_span_is_a_one_time_cost_not_launch_overhead():
    """host BeginCapture |launch launch GetCaptureInfo launch ...| EndCapture: dense launches, but captured."""
    rows = [kernel(0, 100 * US), api("cudaStreamBeginCapture", 90 * US, 95 * US)]
    rows += [api("cudaLaunchKernel", t, t + 10 * US) for t in range(110 * US, 1_900 * US, 30 * US)]
    rows += [api("cudaStreamGetCaptureInfo_v2", t, t + 2 * US) for t in range(120 * US, 1_900 * US, 60 * US)]
    rows += [api("cudaStreamEndCapture", 1_950 * US, 1_960 * US), api("cudaGraphInstantiate", 1_960 * US, 2_050 * US)]
    row = gap(dur=2_000 * US, launch_count=60, cpu_runtime_ns=700 * US,
              next_launch_start_ns=2_060 * US, next_launch_end_ns=2_070 * US)
    got = one(row, trace=make_events(rows))
    assert got["class"] == "one-time-cost" and got["evidence_kind"] == "graph-capture"
    # Without the capture calls the same gap is launch-bound.
    plain = [r for r in rows if "Capture" not in r["name"] and "Instantiate" not in r["name"]]
    assert one(row, trace=make_events(plain))["class"] == "launch-bound"


def test_module_load_run_covers_the_host_time_between_loads():
    """host cuLibraryLoadData x8, 1 ms apart with untraced host time between: one loading run."""
    rows = [kernel(0, 100 * US)] + [api("cuLibraryLoadData", t, t + 300 * US, category="driver")
                                    for t in range(120 * US, 9_000 * US, 1_300 * US)]
    got = one(gap(dur=9_000 * US, next_launch_start_ns=9_050 * US, next_launch_end_ns=9_060 * US),
              trace=make_events(rows))
    assert got["class"] == "one-time-cost" and got["evidence_kind"] == "module-load"
    assert "cuLibraryLoadData ... 7 calls" in got["evidence"]


@pytest.mark.parametrize("call", ["cudaFuncGetAttributes_v3020", "cuFuncSetAttribute", "cudaOccupancyMaxActiveBlocksPerMultiprocessor",
                                  "cuModuleGetFunction", "cuLibraryGetKernel"])
def test_a_long_function_query_is_lazy_module_loading_and_a_short_one_is_not(call):
    """Issue 42: under CUDA lazy loading a function's first attribute / occupancy query or look-up loads
    its module (milliseconds): one-time cost, module-load, named; the same call in microseconds is not."""
    cat = "driver" if call.startswith("cu") and not call.startswith("cuda") else "runtime"
    row = gap(dur=4_000 * US, next_launch_start_ns=4_010 * US, next_launch_end_ns=4_020 * US)
    got = one(row, trace=make_events([kernel(0, 100 * US), api(call, 110 * US, 3_900 * US, category=cat)]))
    assert got["class"] == "one-time-cost" and got["evidence_kind"] == "module-load", got["evidence"]
    assert call in got["evidence"]
    short = one(row, trace=make_events([kernel(0, 100 * US), api(call, 110 * US, 118 * US, category=cat)]))
    assert short["class"] != "one-time-cost"


def test_first_launch_is_lazy_loading_and_a_repeat_launch_is_not():
    """host [cudaLaunchKernel 3 ms] (first launch of k) -> one-time; the same for a kernel seen before -> not."""
    first = make_events([kernel(0, 100 * US, name="a"), api("cudaLaunchKernel", 110 * US, 3_100 * US, corr=9),
                         kernel(3_150 * US, 3_300 * US, name="b", corr=9)])
    row = gap(dur=3_050 * US, next_launch_start_ns=110 * US, next_launch_end_ns=3_100 * US)
    got = one(row, trace=first)
    assert got["class"] == "one-time-cost" and got["evidence_kind"] == "first-launch"
    again = make_events([kernel(0, 50 * US, name="b", corr=8), kernel(60 * US, 100 * US, name="a"),
                         api("cudaLaunchKernel", 110 * US, 3_100 * US, corr=9),
                         kernel(3_150 * US, 3_300 * US, name="b", corr=9)])
    assert one(row, trace=again)["class"] != "one-time-cost"


def test_first_launch_is_judged_the_same_after_a_sync():
    """A 2.97 ms first launch right after a sync that held the drain: still the lazy load, not a sync-stall."""
    rows = [kernel(0, 100 * US, name="a"), api("cudaStreamSynchronize", 20 * US, 101 * US),
            api("cudaLaunchKernel", 105 * US, 3_075 * US, corr=9), kernel(3_090 * US, 3_200 * US, name="b", corr=9)]
    row = gap(dur=2_990 * US, next_launch_start_ns=105 * US, next_launch_end_ns=3_075 * US)
    with_sync = one(row, trace=make_events(rows))
    without = one(row, trace=make_events([r for r in rows if r["name"] != "cudaStreamSynchronize"]))
    assert with_sync["class"] == without["class"] == "one-time-cost"
    assert with_sync["evidence_kind"] == without["evidence_kind"] == "first-launch"


def test_queued_next_kernel_is_not_a_one_time_cost():
    """The GPU held its next kernel: it waited on a dependency, whatever the host was compiling."""
    trace = make_events([kernel(0, 100 * US), annotation("compile_fx_inner", 90 * US, 2_000 * US)])
    assert one(queued(dur=1_000 * US), trace=trace)["class"] != "one-time-cost"


def _alloc_rows(steps: int, calls_per_step: int, name: str = "hipFree", dur: int = 200 * US) -> list[dict]:
    rows = []
    for s in range(steps):
        for c in range(calls_per_step):
            t = s * 1_000 * US + 100 * US + c * 250 * US
            rows.append(api(name, t, t + dur))
    return rows


def test_allocator_calls_every_step_are_a_sync_stall_with_allocator_evidence():
    """hipFree in every step (caching allocator thrash): sync-stall, evidence 'allocator', its own first fix."""
    steps = _steps(6)
    trace = make_events([kernel(0, 100 * US)] + _alloc_rows(6, 3))
    gaps = pd.DataFrame([gap(start=s * 1_000 * US + 100 * US, dur=700 * US, step=s) for s in range(6)])
    out = classify(gaps, steps, trace, CFG)
    assert (out["class"] == "sync-stall").all() and (out["evidence_kind"] == "allocator").all()
    assert "allocator" in out["evidence"].iloc[0]
    assert "expandable_segments" in first_response("sync-stall", "allocator")
    assert "expandable_segments" in advice.first_response("sync-stall", "allocator")
    assert "expandable_segments" in advice.levers("sync-stall", "allocator")[0]


def test_allocator_calls_in_the_first_step_only_are_growth():
    """cudaMalloc only in step 0 of 6: the allocator growing to its working set, a one-time cost."""
    steps = _steps(6)
    trace = make_events([kernel(0, 100 * US)] + _alloc_rows(1, 3, "cudaMalloc"))
    out = classify(pd.DataFrame([gap(dur=700 * US, step=0)]), steps, trace, CFG)
    assert out["class"][0] == "one-time-cost" and out["evidence_kind"][0] == "allocator-growth"


def _cudnn_first_call(first: bool) -> list[dict]:
    """host [aten::cudnn_convolution [cudaFree 1.2 ms][cudaStreamCreateWithFlags 0.6 ms][cudaMalloc 0.1 ms]]
    over the gap: the first cuDNN op of the thread creates its handle (Kineto shows only these calls)."""
    rows = [kernel(0, 100 * US)]
    if not first:  # an earlier cuDNN op on the same thread already created the handle
        rows.append(op("aten::cudnn_convolution", 10 * US, 60 * US))
    rows += [op("aten::cudnn_convolution", 95 * US, 2_100 * US), api("cudaFree", 110 * US, 1_310 * US),
             api("cudaStreamCreateWithFlags", 1_320 * US, 1_920 * US), api("cudaMalloc", 1_930 * US, 2_030 * US)]
    return rows


def test_library_handle_creation_in_the_first_cudnn_op_is_lazy_start_up_not_allocator_growth():
    row = gap(dur=2_000 * US, next_launch_start_ns=2_050 * US, next_launch_end_ns=2_060 * US)
    got = one(row, trace=make_events(_cudnn_first_call(first=True)))
    assert got["class"] == "one-time-cost" and got["evidence_kind"] == "lazy-init"
    assert "lazy start-up" in got["evidence"] and "allocator growth" not in got["evidence"]
    assert "lazy start-up" in advice.verdict("one-time-cost", 0.4, "lazy-init")
    # The same calls inside a later cuDNN op of the thread: the handle exists, so growth and setup.
    later = one(row, trace=make_events(_cudnn_first_call(first=False)))
    assert later["class"] == "one-time-cost" and later["evidence_kind"] == "allocator-growth"


def test_cuda_and_library_initialization_by_name_is_lazy_start_up():
    """host [cuInit 0.9 ms][cudaGetDeviceCount 0.5 ms] ... [cudnnCreate range 0.5 ms] over the gap."""
    trace = make_events([kernel(0, 100 * US), api("cuInit", 110 * US, 1_010 * US, category="driver"),
                         api("cudaGetDeviceCount", 1_020 * US, 1_520 * US),
                         annotation("cudnnCreate", 1_530 * US, 2_030 * US)])
    got = one(gap(dur=2_000 * US, next_launch_start_ns=2_050 * US, next_launch_end_ns=2_060 * US), trace=trace)
    assert got["class"] == "one-time-cost" and got["evidence_kind"] == "lazy-init"


def test_one_time_cost_is_the_verdict_only_when_large():
    shares = {c: 0.0 for c in GAP_CLASSES} | {"compute-bound": 0.5, "memory-bound": 0.1}
    big = dict(shares, **{"one-time-cost": 0.3, "launch-bound": 0.1})
    small = dict(shares, **{"one-time-cost": 0.2, "launch-bound": 0.1})
    assert dominant_idle(big, CFG)[0] == "one-time-cost"
    assert dominant_idle(small, CFG)[0] == "launch-bound"
    alone = dict(shares, **{"one-time-cost": 0.2})
    assert dominant_idle(alone, CFG)[0] == "one-time-cost"


def test_not_steady_state_verdict_says_how_to_reprofile():
    text = advice.verdict("one-time-cost", 0.9, "graph-capture")
    assert text.startswith("Not steady state") and "CUDA-graph capture" in text
    assert "capture-range" in text and "warmup" in text
    assert "CUDA graph" not in advice.verdict("one-time-cost", 0.9, "compile").split(";")[1]
