"""The shared XSpace samples (JAX on MI300X and on TPU v6e): every count re-derived by the independent
reader of ``xplane_synth`` (a field-by-field protobuf walk), and the commands a user runs on them."""

from __future__ import annotations

import gzip
from functools import cache

import numpy as np
import pytest
from conftest import SHARED_TRACES, needs_shared
from xplane_synth import WPlane, viewer_json, walk

from traceread import schema
from traceread.engine.lanes import event_view
from traceread.loaders import load, sniff

pytestmark = needs_shared
FORMATS = SHARED_TRACES / "formats"
GEMM = FORMATS / "tracelens_jax08_gemm_mi300x.xplane.pb"
CONV8 = FORMATS / "tracelens_jax08_conv_8xmi300x.xplane.pb"
LEGACY = FORMATS / "tracelens_jax_conv_legacy_mi300x.xplane.pb"
TPU = FORMATS / "xprof_tpu_v6e_inference.xplane.pb"
SAMPLES = [GEMM, CONV8, LEGACY, TPU]


@cache
def _walk(path) -> list[WPlane]:
    return walk(path.read_bytes())


def _lines(path, plane: str, part: str) -> dict[str, int]:
    """Events per line of ``plane`` whose name holds ``part``, by the independent reader."""
    return {ln.name: len(ln.events) for p in _walk(path) if p.name == plane for ln in p.lines if part in ln.name}


def _gpu(trace, device: int, lane: str):
    ev = trace.events
    return ev[(ev["device"] == device) & (ev["lane"] == lane)]


def test_gemm_54_kernels_on_two_streams_of_gpu0() -> None:
    want = _lines(GEMM, "/device:GPU:0", "(Kernel)")
    assert sum(want.values()) == 54 and len(want) == 2
    trace = load(GEMM)
    kern = _gpu(trace, 0, schema.LANE_GPU_COMPUTE)
    assert len(kern) == 54 and kern["stream"].nunique() == 2
    assert sorted(kern.groupby("stream").size().tolist()) == sorted(want.values())
    assert not (trace.events["device"] > 0).any()
    # every kernel has its host launch (hipModuleLaunchKernel, hipExtModuleLaunchKernel, a copy call)
    host_corr = {e.stats.get("correlation_id") for p in _walk(GEMM) if p.name == "/host:CPU" for ln in p.lines
                 for e in ln.events}
    assert set(kern["correlation"]) <= host_corr
    linked = set(event_view(trace).link_gpu.tolist())
    assert set(kern.index) <= linked


def test_conv_8_gpus() -> None:
    trace = load(CONV8)
    for dev in range(8):
        want = sum(_lines(CONV8, f"/device:GPU:{dev}", "(Kernel)").values())
        assert want == (60 if dev == 0 else 25)
        assert len(_gpu(trace, dev, schema.LANE_GPU_COMPUTE)) == want
    assert all(d.used for d in trace.meta.devices) and len(trace.meta.devices) == 8
    # steps: the runs of the module, counted per device thread by the independent reader
    runs = [len([e for e in ln.events if e.name == "jit_forward_3d_conv:XLA GPU module"])
            for p in _walk(CONV8) if p.name == "/host:CPU" for ln in p.lines]
    assert max(runs) == 5 and len(trace.meta.steps) == 5
    assert all(d.name.startswith("AMD Instinct MI300X") for d in trace.meta.devices)


def test_legacy_gpu7_kernels_and_gpu0_device_to_device_copies() -> None:
    trace = load(LEGACY)
    assert sum(_lines(LEGACY, "/device:GPU:7", "(Kernel)").values()) == 25
    assert len(_gpu(trace, 7, schema.LANE_GPU_COMPUTE)) == 25
    d2d = sum(1 for p in _walk(LEGACY) if p.name == "/device:GPU:0" for ln in p.lines for e in ln.events
              if e.name == "CopyDeviceToDevice")
    assert d2d == 53
    copies = _gpu(trace, 0, schema.LANE_MEMCPY)
    assert len(copies) == 53
    args = trace.side_table("copy_args").set_index("row").loc[copies.index]
    assert set(args["copy_kind"].astype(str)) == {"DtoD"} and (args["bytes"] > 0).all()


def test_tpu_ops_collectives_and_device_name() -> None:
    trace = load(TPU)
    planes = {p.name: p for p in _walk(TPU)}
    for dev in range(4):
        plane = planes[f"/device:TPU:{dev}"]
        assert plane.stats["device_type_string"] == "TPU v6 Lite"
        (ops_line,) = [ln for ln in plane.lines if ln.name == "XLA Ops"]
        psums = [e for e in ops_line.events if e.category == "all-reduce"]
        assert 1503 <= len(ops_line.events) <= 1504 and len(psums) == 3
        ev = trace.events
        ops = ev[(ev["device"] == dev) & (ev["raw_category"] == "XLA Ops")]
        assert len(ops) == len(ops_line.events)
        # the ops: compute, the psums on the communication lane, and the host-offload copies (copy-start and
        # copy-done start a DMA and wait for it) on the copy lane, half each way
        assert set(ops["lane"].astype(str)) == {schema.LANE_GPU_COMPUTE, schema.LANE_GPU_COMM, schema.LANE_MEMCPY}
        copies = ops[ops["lane"] == schema.LANE_MEMCPY]
        want = [e for e in ops_line.events if e.category in ("copy-start", "copy-done")]
        assert len(copies) == len(want) > 0
        kinds = trace.side_table("copy_args").set_index("row").loc[copies.index, "copy_kind"].astype(str)
        assert kinds.value_counts().to_dict() == {"HtoD": len(want) // 2, "DtoH": len(want) // 2}
        comm = _gpu(trace, dev, schema.LANE_GPU_COMM)
        assert len(comm) == 3 and set(comm["name"].astype(str)) == {"all-reduce"}
        assert sorted(comm["start_ns"].tolist()) == sorted(e.start_ps // 1000 for e in psums)
    assert [d.name for d in trace.meta.devices] == ["TPU v6 Lite"] * 4
    peak = trace.meta.extra["device_peaks"][0]
    assert peak["peak_tflops"] == pytest.approx(918.0) and peak["peak_bandwidth_gbs"] == pytest.approx(1638, rel=0.01)
    assert trace.meta.extra["step_source"].startswith("inferred:xla-module:jit_f")
    assert len(trace.meta.steps) == 100


def test_times_are_the_profile_start_plus_line_and_offset() -> None:
    planes = _walk(GEMM)
    env = next(p for p in planes if p.name == "Task Environment")
    trace = load(GEMM)
    assert trace.meta.time_base == schema.TIME_EPOCH
    assert trace.meta.epoch_offset_ns == env.stats["profile_start_time"]
    want = sorted(e.start_ps // 1000 for p in planes if p.name == "/device:GPU:0" for ln in p.lines for e in ln.events)
    got = sorted(_gpu(trace, 0, schema.LANE_GPU_COMPUTE)["start_ns"].tolist())
    assert got == want


def test_hostnames_never_reach_the_meta() -> None:
    trace = load(LEGACY)
    assert "amd.com" not in repr(trace.meta) and "vultr" not in repr(trace.meta)


def test_trace_viewer_json_of_a_real_xplane(tmp_path) -> None:
    path = tmp_path / "gemm.trace.json.gz"
    path.write_bytes(gzip.compress(viewer_json(_walk(GEMM))))
    assert sniff(str(path)) == "xplane-json"
    got, ref = load(path), load(GEMM)
    a, b = _gpu(ref, 0, schema.LANE_GPU_COMPUTE), _gpu(got, 0, schema.LANE_GPU_COMPUTE)
    assert len(b) == 54 and b["stream"].nunique() == 2
    assert np.abs(np.sort(a["start_ns"].to_numpy()) - np.sort(b["start_ns"].to_numpy())).max() <= 1
    assert len(event_view(got).link_gpu) == len(event_view(ref).link_gpu)


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_info_and_analyze_say_something_true(path, capsys) -> None:
    from traceread.cli import main

    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "xplane" in out and "CPU-only" not in out
    assert main(["analyze", str(path)]) == 0
    out = capsys.readouterr().out
    assert "CPU-only" not in out and "No GPU activity" not in out
    if path == TPU:
        assert "Launch-bound" not in out and "launch-bound** |" not in out


def test_no_other_shared_trace_is_taken_for_an_xplane() -> None:
    from traceread.loaders.xplane import is_trace_viewer, looks_like_xplane

    others = [p for p in SHARED_TRACES.rglob("*") if p.is_file() and not p.name.endswith(".xplane.pb")]
    assert len(others) > 10
    for p in others:
        assert not looks_like_xplane(p.read_bytes()[:64]), p.name
        assert not is_trace_viewer(str(p)), p.name
    for p in SAMPLES:
        assert sniff(str(p)) == "xplane"
