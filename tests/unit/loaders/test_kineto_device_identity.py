"""Which GPU a Kineto trace ran on: the device the kernels carry, named from its own properties entry."""

from __future__ import annotations

import json

import pytest
from conftest import SHARED_TRACES, needs_shared

from traceread.loaders import load
from traceread.metrics.peaks import match_gpu
from traceread.render.notes import text as words  # notes are data; the reports word them

MI300X = {"totalGlobalMem": 206141652992, "computeMajor": 9, "computeMinor": 4, "numSms": 304, "warpSize": 64}
MI2X0 = {"totalGlobalMem": 68702699520, "computeMajor": 9, "computeMinor": 0, "numSms": 104, "warpSize": 64}


def _trace(tmp_path, props: list[dict], device: int):
    ev = [{"ph": "X", "cat": "cuda_runtime", "name": "hipLaunchKernel", "pid": 1, "tid": 1, "ts": 10.0, "dur": 5.0,
           "args": {"correlation": 1}},
          {"ph": "X", "cat": "kernel", "name": "Cijk_Alik_Bljk_HHS_BH_MT128x128", "pid": device, "tid": 7,
           "ts": 20.0, "dur": 50.0, "args": {"device": device, "stream": 7, "correlation": 1}}]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"schemaVersion": 1, "deviceProperties": props, "traceEvents": ev}))
    return load(path)


def _used(trace):
    (dev,) = [d for d in trace.meta.devices if d.used]
    return dev


def test_nameless_entries_name_the_kernels_device_from_its_properties(tmp_path) -> None:
    props = [{"id": i, "name": "", **MI300X} for i in range(8)]
    dev = _used(_trace(tmp_path, props, device=2))
    assert dev.id == 2 and dev.name.startswith("AMD Instinct MI300X (gfx942, 304 compute units, 192 GB")
    row = match_gpu(dev.name)
    assert row is not None and row.key == "MI300X"


def test_gcn_arch_name_is_the_architecture(tmp_path) -> None:
    props = [{"id": 0, "name": "", "gcnArchName": "gfx942:sramecc+:xnack-", **MI300X, "computeMajor": 0}]
    assert _used(_trace(tmp_path, props, device=0)).name.startswith("AMD Instinct MI300X")


def test_the_single_listed_entry_describes_the_device_the_kernels_ran_on(tmp_path) -> None:
    props = [{"id": 0, "name": "AMD Instinct MI300X", **MI300X}]
    dev = _used(_trace(tmp_path, props, device=9))
    assert dev.id == 9 and dev.name == "AMD Instinct MI300X" and dev.sm_count == 304


def test_properties_that_fit_two_parts_are_not_guessed_and_the_report_says_why(tmp_path) -> None:
    trace = _trace(tmp_path, [{"id": i, "name": "AMD Radeon Graphics", **MI2X0} for i in range(4)], device=2)
    assert _used(trace).name == "AMD Radeon Graphics"
    assert any("MI210 or one MI250 GCD" in w and "--gpu" in w for w in map(words, trace.meta.warnings))


def test_a_device_no_entry_describes_is_named_unknown_with_the_reason(tmp_path) -> None:
    trace = _trace(tmp_path, [{"id": 0, "name": "AMD Instinct MI300X", **MI300X},
                              {"id": 1, "name": "AMD Instinct MI300X", **MI300X}], device=5)
    assert _used(trace).name == ""
    assert any("GPU 5 ran the kernels but deviceProperties does not describe it" in w for w in map(words, trace.meta.warnings))


def test_nvidia_properties_without_a_name_are_not_taken_for_amd(tmp_path) -> None:
    props = [{"id": 0, "name": "", "totalGlobalMem": 85899345920, "computeMajor": 9, "computeMinor": 0,
              "numSms": 132, "warpSize": 32}]
    trace = _trace(tmp_path, props, device=0)
    assert _used(trace).name == "" and any("match no known GPU" in w for w in map(words, trace.meta.warnings))


@needs_shared
@pytest.mark.parametrize(("name", "device", "key"), [
    ("kineto/tracelens_vllm_piecewise_exec_mi300x.json.gz", 2, "MI300X"),
    ("kineto/tracelens_vllm_graph_replay_rocm.json.gz", 2, "MI300X"),
    ("kineto/tracelens_sglang_decode_mi300x.json.gz", 9, "MI300X"),
    ("kineto/tracelens_gpu_only_mi210.json.gz", 1, "MI210"),
])
def test_real_rocm_traces_name_their_gpu(name: str, device: int, key: str) -> None:
    dev = _used(load(SHARED_TRACES / name))
    row = match_gpu(dev.name)
    assert dev.id == device and row is not None and row.key == key
