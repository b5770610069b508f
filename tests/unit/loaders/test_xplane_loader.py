"""The XSpace loader on XSpaces written here (``xplane_synth``), counted by an independent reader.

GPU: kernels, a communication kernel, copies, launch calls linked by correlation id, JAX
``StepTraceAnnotation`` steps, a derived ``XLA Ops`` line kept off the compute lane, exact ns times.
TPU: ``XLA Ops`` as the device's work with the all-reduce on the communication lane, steps from the
repeated module, the file's peak, no launch-bound. The trace-viewer JSON derived from the same
XSpace reads the same. Damaged files are refused naming the format.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
from xplane_synth import PlaneWriter, space, viewer_json, walk

import traceread
from traceread import schema
from traceread.engine.lanes import event_view
from traceread.errors import TraceReadError
from traceread.loaders import load, sniff
from traceread.loaders.xplane import looks_like_trace_viewer, looks_like_xplane
from traceread.render.notes import text as words  # notes are data; the reports word them

START = 1_760_000_000_123_456_789  # profile_start_time, Unix-epoch ns
KERNELS = ["gemm_bf16_128x128", "elementwise_add", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"]


def _task_env() -> PlaneWriter:
    p = PlaneWriter("Task Environment")
    p.plane_stat("profile_start_time", ("u", START))
    p.plane_stat("profile_stop_time", ("u", START + 50_000_000))
    return p


def gpu_space() -> bytes:
    """One GPU: 3 steps of 3 kernels (one NCCL) launched by cuLaunchKernel, 2 H2D copies, a derived
    XLA Ops line; StepTraceAnnotation 'train' with step_num on the host."""
    gpu = PlaneWriter("/device:GPU:0", 1)
    for k, v in (("device_vendor", "Nvidia"), ("gpu_device_name", "NVIDIA H100 80GB HBM3"), ("core_count", 132),
                 ("memory_size", ("u", 80 * 2**30)), ("compute_cap_major", 9), ("compute_cap_minor", 0)):
        gpu.plane_stat(k, v)
    host = PlaneWriter("/host:CPU", 2)
    kern, launches, steps, ops, copies, copy_calls = [], [], [], [], [], []
    corr = 100
    for step in range(3):
        base = step * 10_000_000_000  # ps: 10 ms apart
        steps.append(("train", base, 9_000_000_000, {"step_num": step, "_r": 1}))
        for i, name in enumerate(KERNELS):
            corr += 1
            t = base + 1_000_000_000 + i * 2_000_000_123  # odd ps: the floor to ns is checked
            launches.append(("cuLaunchKernel", t - 500_000_000, 20_000_000, {"correlation_id": corr}))
            kern.append((name, t, 1_500_000_777, {"correlation_id": corr,
                                                  "kernel_details": "regs:32 static_shared:0 grid:8,1,1 block:128,1,1"}))
            ops.append((f"fusion.{i}", t, 1_500_000_777, {}))
        corr += 1
        copy_calls.append(("cuMemcpyHtoDAsync_v2", base + 100_000_000, 5_000_000, {"correlation_id": corr}))
        copies.append(("MemcpyH2D", base + 200_000_000, 300_000_000,
                       {"correlation_id": corr, "memcpy_details": "kind_src:pinned kind_dst:device size:4096"}))
    gpu.line(7, "Stream #7(Kernel)", 1_000, kern)
    gpu.line(13, "Stream #13(MemcpyH2D)", 1_000, copies)
    gpu.line(2, "XLA Ops", 1_000, ops)
    host.line(4242, "Host Threads/4242", 1_000, launches + copy_calls, display="Host Threads/4242")
    host.line(4243, "Host Threads/4242/NVTX", 1_000, [("forward", 0, 5_000_000_000, {})])
    host.line(77, "python", 1_000, [*steps, ("$train.py:10 step", 0, 9_500_000_000, {}),
                                    ("MemoryAllocation", 3_000_000, 0, {"bytes_allocated": 4096})])
    return space([PlaneWriter("/host:metadata"), gpu, host, _task_env()], hostnames=("secret-host-name",))


def tpu_space() -> bytes:
    """Two TPU v6e chips: 3 runs of jit_step (3 ops each: 2 fusions, 1 all-reduce) and one jit__psum run."""
    planes = []
    for dev in range(2):
        p = PlaneWriter(f"/device:TPU:{dev}", 10 + dev)
        p.plane_stat("device_type_string", "TPU v6 Lite")
        p.plane_stat("peak_teraflops_per_second", 918.0)
        p.plane_stat("peak_hbm_bw_gigabytes_per_second", 1640.0)
        modules, ops = [], []
        for run in range(3):
            base = 1_000_000_000 + run * 50_000_000_000
            modules.append(("jit_step(1234)", base, 30_000_000_000, {"run_id": run}))
            ops.append(("%fusion.1 = bf16[8,128] fusion(...)", base, 10_000_000_000, {}, {"hlo_category": "convolution"},
                        "fusion.1"))
            ops.append(("%fusion.2 = bf16[8,128] fusion(...)", base + 10_000_000_000, 10_000_000_000, {},
                        {"hlo_category": "loop fusion"}, "fusion.2"))
            ops.append(("%all-reduce = bf16[8,128] all-reduce(...)", base + 20_000_000_000, 9_000_000_000, {},
                        {"hlo_category": "all-reduce"}, "all-reduce"))
        modules.append(("jit__psum(99)", 200_000_000_000, 1_000_000_000, {"run_id": 9}))
        p.line(2, "XLA Modules", 0, modules)
        p.line(3, "XLA Ops", 0, ops)
        p.line(6, "XLA TraceMe", 0, [("dependency-wait", 900_000_000, 1_000, {})])
        planes.append(p)
    host = PlaneWriter("/host:CPU")
    host.line(5, "main/5", 0, [("PjitFunction(step)", 900_000_000, 100_000_000, {})])
    return space([*planes, host, _task_env()])


def _write(tmp_path, name: str, data: bytes):
    path = tmp_path / name
    path.write_bytes(data)
    return path


def _count(planes, plane: str, line_part: str) -> int:
    return sum(len(ln.events) for p in planes if p.name == plane for ln in p.lines if line_part in ln.name)


def test_gpu_space_rows_lanes_and_counts(tmp_path) -> None:
    data = gpu_space()
    path = _write(tmp_path, "run.xplane.pb", data)
    assert sniff(str(path)) == "xplane"
    trace = load(path)
    ev = trace.events
    schema.validate(ev)
    planes = walk(data)
    n_kernels = _count(planes, "/device:GPU:0", "(Kernel)")
    assert n_kernels == 9
    kern = ev[ev["category"] == schema.CAT_KERNEL]
    assert len(kern) == n_kernels and set(kern["device"]) == {0} and set(kern["stream"]) == {7}
    comm = ev[ev["lane"] == schema.LANE_GPU_COMM]
    assert len(comm) == 3 and set(comm["name"].astype(str)) == {KERNELS[2]}
    copies = ev[ev["lane"] == schema.LANE_MEMCPY]
    assert len(copies) == _count(planes, "/device:GPU:0", "Memcpy") == 3
    args = trace.side_table("copy_args")
    assert list(args["bytes"]) == [4096] * 3 and set(args["copy_kind"].astype(str)) == {"HtoD"}
    assert set(args["src_kind"].astype(str)) == {"Pinned"} and set(args["dst_kind"].astype(str)) == {"Device"}
    ka = trace.side_table("kernel_args")
    assert list(ka["row"]) == sorted(kern.index) and set(ka["grid_x"]) == {8} and set(ka["block_x"]) == {128}
    assert set(ka["registers"]) == {32}
    # the derived XLA Ops line describes the kernels: an annotation, never compute time again
    ops = ev[ev["raw_category"] == "XLA Ops"]
    assert len(ops) == 9 and set(ops["lane"]) == {schema.LANE_GPU_ANNOTATION}
    assert len(ev) == sum(len(ln.events) for p in planes for ln in p.lines)


def test_gpu_space_times_are_exact_ns_in_the_epoch_base(tmp_path) -> None:
    data = gpu_space()
    trace = load(_write(tmp_path, "run.xplane.pb", data))
    assert trace.meta.time_base == schema.TIME_EPOCH and trace.meta.epoch_offset_ns == START
    want = sorted((e.start_ps // 1000, (e.start_ps + e.dur_ps) // 1000) for p in walk(data)
                  if p.name == "/device:GPU:0" for ln in p.lines if "(Kernel)" in ln.name for e in ln.events)
    kern = trace.events[trace.events["category"] == schema.CAT_KERNEL]
    got = sorted(zip(kern["start_ns"].tolist(), kern["end_ns"].tolist(), strict=True))
    assert got == want


def test_launch_calls_link_to_their_kernels_and_steps_come_from_the_annotation(tmp_path) -> None:
    trace = load(_write(tmp_path, "run.xplane.pb", gpu_space()))
    ev = trace.events
    api = ev[ev["category"].isin([schema.CAT_DRIVER, schema.CAT_RUNTIME])]
    assert len(api) == 12 and set(api["category"]) == {schema.CAT_DRIVER}
    view = event_view(trace)
    linked = {int(g): int(h) for g, h in zip(view.link_gpu, view.link_host, strict=True)}
    gpu_ops = ev[ev["lane"].isin([schema.LANE_GPU_COMPUTE, schema.LANE_GPU_COMM, schema.LANE_MEMCPY])]
    assert set(linked) == set(gpu_ops.index)  # every kernel and copy found its launch
    for g, h in linked.items():
        assert ev.at[g, "correlation"] == ev.at[h, "correlation"] and ev.at[h, "start_ns"] < ev.at[g, "start_ns"]
    steps = trace.meta.steps
    assert list(steps["step"]) == [0, 1, 2] and set(steps["name"]) == {"train"}
    assert trace.meta.extra["step_source"] == "StepTraceAnnotation"


def test_gpu_steps_from_module_runs_on_the_device_threads(tmp_path) -> None:
    """No step marker: run k of the most repeated module is its k-th range on each device's thread."""
    host = PlaneWriter("/host:CPU")
    for thread, lag in ((11, 0), (12, 3_000_000_000)):  # the second device's thread runs 3 ms later
        runs = [("jit_step:XLA GPU module", k * 20_000_000_000 + lag, 5_000_000_000, {}) for k in range(4)]
        runs.append(("jit_init:XLA GPU module", 90_000_000_000 + lag, 1_000_000_000, {}))
        host.line(thread, f"py_xla_execute/{thread}", 1_000, runs)
    gpu = PlaneWriter("/device:GPU:0")
    gpu.line(7, "Stream #7(Kernel)", 1_000, [("k", k * 20_000_000_000 + 1_000_000, 1_000_000, {}) for k in range(4)])
    trace = load(_write(tmp_path, "m.xplane.pb", space([gpu, host, _task_env()])))
    steps = trace.meta.steps
    assert trace.meta.extra["step_source"] == "inferred:xla-module:jit_step"
    assert list(steps["start_ns"]) == [1_000 + k * 20_000_000 for k in range(4)]
    assert list(steps["end_ns"]) == [1_000 + k * 20_000_000 for k in range(1, 4)] + [1_000 + 68_000_000]


def test_devices_named_from_the_plane_and_no_host_names(tmp_path) -> None:
    trace = load(_write(tmp_path, "run.xplane.pb", gpu_space()))
    (dev,) = trace.meta.devices
    assert dev.used and dev.sm_count == 132 and dev.memory_bytes == 80 * 2**30 and dev.compute_capability == "9.0"
    assert dev.name == "NVIDIA H100 80GB HBM3"  # the peak table knows it: MFU needs no --gpu
    nvtx = trace.events[trace.events["raw_category"] == "Host Threads/NVTX"]
    assert len(nvtx) == 1 and set(nvtx["lane"]) == {schema.LANE_CPU_ANNOTATION}
    assert "secret-host-name" not in repr(trace.meta)


def test_tpu_ops_are_the_work_and_collectives_the_communication(tmp_path) -> None:
    data = tpu_space()
    trace = load(_write(tmp_path, "tpu.xplane.pb", data))
    ev = trace.events
    planes = walk(data)
    for dev in (0, 1):
        ops = ev[(ev["device"] == dev) & (ev["raw_category"] == "XLA Ops")]
        assert len(ops) == _count(planes, f"/device:TPU:{dev}", "XLA Ops") == 9
        comm = ops[ops["lane"] == schema.LANE_GPU_COMM]
        want = sum(1 for p in planes if p.name == f"/device:TPU:{dev}" for ln in p.lines if ln.name == "XLA Ops"
                   for e in ln.events if e.category == "all-reduce")
        assert len(comm) == want == 3 and set(comm["name"].astype(str)) == {"all-reduce"}
        assert (ops["lane"] == schema.LANE_GPU_COMPUTE).sum() == 6
    assert [d.name for d in trace.meta.devices] == ["TPU v6 Lite"] * 2
    assert trace.meta.extra["device_peaks"][0]["peak_tflops"] == 918.0
    steps = trace.meta.steps
    assert len(steps) == 3 and trace.meta.extra["step_source"] == "inferred:xla-module:jit_step"
    assert np.all(steps["end_ns"].to_numpy()[:-1] == steps["start_ns"].to_numpy()[1:])
    assert any("launch-bound is not judged" in w for w in map(words, trace.meta.warnings))


def test_tpu_peak_is_in_the_peak_table(tmp_path) -> None:
    from traceread.metrics.peaks import resolve_peak

    trace = load(_write(tmp_path, "tpu.xplane.pb", tpu_space()))
    peak = resolve_peak([d.name for d in trace.meta.devices], "bf16")
    file_peak = trace.meta.extra["device_peaks"][0]
    assert peak.peak_flops == pytest.approx(file_peak["peak_tflops"] * 1e12, rel=0.01)


def test_tpu_analysis_claims_no_launch_bound_and_no_cpu_only(tmp_path) -> None:
    import traceread

    res = traceread.analyze(str(_write(tmp_path, "tpu.xplane.pb", tpu_space())))
    gaps = res.gaps
    assert not (gaps["class"].astype(str) == "launch-bound").any()
    assert res.steps["step"].nunique() == 3


@pytest.mark.parametrize("python_dump", [False, True], ids=["trace.json.gz", "perfetto_trace.json.gz"])
def test_trace_viewer_json_reads_like_its_xplane(tmp_path, python_dump) -> None:
    data = gpu_space()
    ref = load(_write(tmp_path, "run.xplane.pb", data))
    name = "perfetto_trace.json.gz" if python_dump else "host.trace.json.gz"
    path = _write(tmp_path, name, gzip.compress(viewer_json(walk(data), python_dump=python_dump)))
    assert sniff(str(path)) == "xplane-json"
    got = load(path)
    assert got.meta.format == "xplane-json" and not got.meta.truncated
    for lane in (schema.LANE_GPU_COMPUTE, schema.LANE_GPU_COMM, schema.LANE_MEMCPY, schema.LANE_CPU_ANNOTATION):
        a = ref.events[ref.events["lane"] == lane]
        b = got.events[got.events["lane"] == lane]
        assert len(a) == len(b) > 0, lane
        # the viewer writes microsecond floats: the nearest ns of the exact ps time
        assert np.abs(np.sort(a["start_ns"].to_numpy()) - np.sort(b["start_ns"].to_numpy())).max() <= 1
    assert len(event_view(got).link_gpu) == 12
    assert list(got.meta.steps["step"]) == [0, 1, 2]


def test_trace_viewer_json_filtered_is_truncated_with_a_note(tmp_path) -> None:
    planes = walk(gpu_space())
    for p in planes:  # the viewer kept the first kernel of each stream only
        for ln in p.lines:
            ln.events = ln.events[:1]
    path = _write(tmp_path, "x.trace.json.gz", gzip.compress(viewer_json(planes, filtered=True)))
    trace = load(path)
    assert trace.meta.truncated
    assert any("filteredByVisibility" in w for w in map(words, trace.meta.warnings))


def test_tpu_trace_viewer_json(tmp_path) -> None:
    data = tpu_space()
    path = _write(tmp_path, "tpu.trace.json", viewer_json(walk(data)))
    trace = load(path)
    comm = trace.events[trace.events["lane"] == schema.LANE_GPU_COMM]
    assert len(comm) == 6 and sorted(set(comm["device"])) == [0, 1]
    # the JSON keeps no plane stats: the chips are TPUs of no known type, and the notes say so
    assert {d.name for d in trace.meta.devices} == {"TPU"}
    assert any("keeps no device stats" in w for w in map(words, trace.meta.warnings))


def test_sniff_heads() -> None:
    data = gpu_space()
    assert looks_like_xplane(data[:64]) and looks_like_xplane(tpu_space()[:64])
    assert not looks_like_xplane(b'{"traceEvents": []}') and not looks_like_xplane(b"SQLite format 3\x00")
    assert not looks_like_xplane(b"\x0a\x05hello world")  # field 1, but no plane inside
    assert not looks_like_xplane(b"\x0a\x05\x08\x01") and not looks_like_xplane(data[:8])  # no name seen
    assert looks_like_trace_viewer(viewer_json(walk(data))[:4096])
    assert looks_like_trace_viewer(viewer_json(walk(data), python_dump=True)[:4096])
    assert not looks_like_trace_viewer(b'{"schemaVersion": 1, "displayTimeUnit": "ms", "traceEvents": []}')


@pytest.mark.parametrize("cut", [0.3, 0.5, 0.9])
def test_truncated_xplane_is_refused_naming_the_format(tmp_path, cut) -> None:
    data = gpu_space()
    path = _write(tmp_path, "cut.xplane.pb", data[:int(len(data) * cut)])
    with pytest.raises(TraceReadError, match="a damaged XSpace protobuf"):
        load(path)


def test_garbage_after_a_plane_header_is_refused(tmp_path) -> None:
    data = gpu_space()
    rnd = np.random.default_rng(7)
    bad = data[:40] + rnd.integers(0, 256, 4000, dtype=np.uint8).tobytes()
    with pytest.raises(TraceReadError, match="XSpace"):
        load(_write(tmp_path, "bad.xplane.pb", bad))


@pytest.mark.parametrize("which", ["gpu", "tpu"])
def test_info_and_analyze_commands(tmp_path, capsys, which) -> None:
    import json

    import jsonschema

    from traceread.cli import main

    path = str(_write(tmp_path, "run.xplane.pb", gpu_space() if which == "gpu" else tpu_space()))
    assert main(["info", path]) == 0
    out = capsys.readouterr().out
    assert "xplane" in out and "CPU-only" not in out
    report = tmp_path / "report.json"
    assert main(["analyze", path, "--json", str(report)]) == 0
    out = capsys.readouterr().out
    assert "CPU-only" not in out and "No GPU activity" not in out
    doc = json.loads(report.read_text())
    schema_doc = json.loads((Path(traceread.__file__).parent / "data" / "report.schema.json").read_text())
    jsonschema.validate(doc, schema_doc)
    assert doc["traces"][0]["format"] == "xplane"


def test_device_only_capture_says_host_causes_cannot_be_named(tmp_path) -> None:
    gpu = PlaneWriter("/device:GPU:0")
    gpu.line(7, "Stream #7(Kernel)", 1_000, [("k", k * 1_000_000, 500_000, {}) for k in range(5)])
    trace = load(_write(tmp_path, "dev.xplane.pb", space([gpu])))
    assert len(trace.events) == 5 and trace.meta.time_base == schema.TIME_SESSION
    assert any("device-only capture" in w for w in map(words, trace.meta.warnings))


def test_a_device_line_not_named_stream_holds_work_when_its_events_are_activity_records(tmp_path) -> None:
    gpu = PlaneWriter("/device:GPU:1")
    gpu.line(40, "Memcpy D2D", 1_000, [("MemcpyD2D", k * 1_000_000, 500_000, {"correlation_id": k,
                                        "memcpy_details": "kind_src:device kind_dst:device size:64"})
                                       for k in range(4)])
    gpu.line(41, "TensorFlow Ops", 1_000, [("fusion", k * 1_000_000, 500_000, {}) for k in range(4)])
    # kernels whose names read like copies or memsets: their kernel_details say what they are
    gpu.line(42, "Stream #42(Kernel)", 1_000, [(name, k * 1_000_000, 500_000, {"kernel_details": "grid:1,1,1 block:64,1,1"})
                                               for k, name in enumerate(["memcpy_strided_kernel", "memset_zero_kernel"])])
    trace = load(_write(tmp_path, "l.xplane.pb", space([gpu])))
    ev = trace.events
    copies = ev[ev["lane"] == schema.LANE_MEMCPY]
    assert len(copies) == 4 and set(copies["stream"]) == {40} and set(copies["device"]) == {1}
    assert set(ev[ev["raw_category"] == "TensorFlow Ops"]["lane"]) == {schema.LANE_GPU_ANNOTATION}
    assert set(ev[ev["stream"] == 42]["lane"]) == {schema.LANE_GPU_COMPUTE}
    assert set(trace.side_table("copy_args")["copy_kind"].astype(str)) == {"DtoD"}


def test_tpu_host_offload_copies_are_copies_with_their_direction(tmp_path) -> None:
    """copy-start/copy-done ops start a DMA and wait for it: the copy lane, HtoD when the source is in host
    memory (layout S(5)), DtoH when the destination is."""
    tpu = PlaneWriter("/device:TPU:0")
    h2d = "%copy-start = (f32[8]{0}, f32[8]{0:S(5)}, u32[]) copy-start(f32[8]{0:S(5)} %p)"
    d2h = "%copy-start.1 = (f32[8]{0:S(5)}, f32[8]{0}, u32[]) copy-start(f32[8]{0} %q)"
    done = "%copy-done.1 = f32[8]{0:S(5)} copy-done((f32[8]{0:S(5)}, f32[8]{0}, u32[]) %copy-start.1)"
    ops = [(h2d, 0, 1_000, {}, {"hlo_category": "copy-start"}, "copy-start"),
           (d2h, 2_000, 1_000, {}, {"hlo_category": "copy-start"}, "copy-start.1"),
           ("%fusion = f32[8]{0} fusion(...)", 4_000, 10_000, {}, {"hlo_category": "loop fusion"}, "fusion"),
           (done, 20_000, 5_000_000, {}, {"hlo_category": "copy-done"}, "copy-done.1")]
    tpu.line(3, "XLA Ops", 0, ops)
    trace = load(_write(tmp_path, "t.xplane.pb", space([tpu])))
    ev = trace.events
    assert list(ev["lane"].astype(str)) == [schema.LANE_MEMCPY, schema.LANE_MEMCPY, schema.LANE_GPU_COMPUTE,
                                            schema.LANE_MEMCPY]
    args = trace.side_table("copy_args").sort_values("row")
    assert list(args["copy_kind"].astype(str)) == ["HtoD", "DtoH", "DtoH"]
    # the trace-viewer JSON keeps the HLO text in long_name: the same directions
    viewer = load(_write(tmp_path, "t.trace.json", viewer_json(walk(space([tpu])))))
    vargs = viewer.side_table("copy_args").sort_values("row")
    assert list(vargs["copy_kind"].astype(str)) == ["HtoD", "DtoH", "DtoH"]
