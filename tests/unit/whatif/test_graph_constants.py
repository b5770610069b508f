"""The CUDA-graph model's per-generation constants: the generation read from the device names as the peak table
matches them, the trace's own graph launches first, then the generation's sourced figure, then the generic
thresholds, and a figure the user set before the table."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from conftest import SHARED_TRACES, needs_shared
from tracesynth.files import load_as
from tracesynth.planted import PlantSpec, plant

import traceread
from traceread.config import Thresholds
from traceread.engine.lanes import event_view
from traceread.metrics.peaks import PEAK_TABLE
from traceread.runner import analyze
from traceread.vocabulary import GAP_CLASSES
from traceread.whatif import Fix, predict
from traceread.whatif import model as mdl
from traceread.whatif.fixes import Context
from traceread.whatif.graph_constants import (
    GENERATIONS,
    GRAPH_CONSTANTS,
    device_names,
    gap_constant,
    generation_of,
    launch_constant,
)
from traceread.whatif.graphs import graph_kernel_gap, graph_launch_cost

CFG = Thresholds()
GENERIC_LAUNCH, GENERIC_GAP = CFG.whatif_graph_launch_ns, CFG.whatif_graph_kernel_gap_ns
H100, A100, V100, MI300X = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "Tesla V100-DGXS-32GB", "AMD Instinct MI300X"


@pytest.mark.parametrize(("name", "generation"), [
    (H100, "Hopper"), (A100, "Ampere"), ("NVIDIA A100-PG509-200", "Ampere"), ("NVIDIA A100 80GB PCIe", "Ampere"),
    (V100, "Volta"), (MI300X, "CDNA3"),
    # the Kineto loader's name for a ROCm device whose properties give no model name
    ("AMD Instinct MI300X (gfx942, 304 compute units, 192 GB; deviceProperties gives no model name)", "CDNA3"),
    ("AMD Radeon Graphics", None), ("", None), ("Some Future Accelerator", None),
])
def test_the_generation_is_read_from_the_device_name(name: str, generation: str | None) -> None:
    assert generation_of((name,)) == generation


def test_names_of_two_generations_give_none_and_unknown_names_do_not_count() -> None:
    assert generation_of((A100, H100)) is None
    assert generation_of((A100, "NVIDIA A100-PG509-200", "")) == "Ampere"
    assert generation_of(()) is None


def test_every_peak_table_row_has_a_generation_and_every_sourced_row_a_known_one() -> None:
    assert {row.key for row in PEAK_TABLE} <= set(GENERATIONS)
    assert set(GRAPH_CONSTANTS) <= set(GENERATIONS.values())
    for gen, row in GRAPH_CONSTANTS.items():
        assert row.generation == gen
        assert row.launch_ns is not None or row.kernel_gap_ns is not None  # a row holds at least one figure
        assert (row.launch_ns is None) == (not row.launch_source) and (row.kernel_gap_ns is None) == (not row.gap_source)


@pytest.mark.parametrize(("name", "launch", "gap"), [
    (A100, (2_500, "Ampere"), (GENERIC_GAP, None)),  # Ampere: the launch has a source, the gap not
    (MI300X, (GENERIC_LAUNCH, None), (1, "CDNA3")),  # CDNA3: the gap has a source, the launch not
    (H100, (GENERIC_LAUNCH, None), (GENERIC_GAP, None)),  # no sourced figure for Hopper yet
    (V100, (GENERIC_LAUNCH, None), (500, "Volta")),  # Volta: an upper bound on the gap, no launch figure
    ("AMD Radeon Graphics", (GENERIC_LAUNCH, None), (GENERIC_GAP, None)),
])
def test_constants_per_device_name(name: str, launch: tuple[int, str | None], gap: tuple[int, str | None]) -> None:
    for (value, source), (want, gen) in ((launch_constant(CFG, (name,)), launch), (gap_constant(CFG, (name,)), gap)):
        assert value == want
        assert source == "constant" if gen is None else source.startswith(f"{gen} constant: ")


def test_a_figure_the_user_set_wins_over_the_table() -> None:
    cfg = CFG.with_overrides({"whatif_graph_launch_ns": 7_000, "whatif_graph_kernel_gap_ns": 200})
    assert launch_constant(cfg, (A100,)) == (7_000, "constant")
    assert gap_constant(cfg, (MI300X,)) == (200, "constant")
    # setting one leaves the other to the table
    only_gap = CFG.with_overrides({"whatif_graph_kernel_gap_ns": 200})
    assert launch_constant(only_gap, (A100,))[0] == 2_500


def _planted(tmp_path: Path, device: str, captured: bool = False, fmt: str = "kineto") -> traceread.Trace:
    weights = {c: 3.0 if c == "launch-bound" else 0.0 for c in GAP_CLASSES}
    spec = PlantSpec(seed=1, ranks=1, steps=8, jitter=0.1, weights=weights, paired=True, graphs_captured=captured)
    scenario = plant(spec).scenario
    for rk in scenario.ranks:
        rk.device_name = device
    stem = f"{device.split()[-1]}_{int(captured)}"
    return load_as(scenario, tmp_path, stem, fmt)


def test_device_names_reach_the_rank_and_a_trace_with_graph_launches_still_reads_its_own(tmp_path: Path) -> None:
    trace = _planted(tmp_path, A100, captured=True)
    assert device_names(trace, 0) == (A100,)
    a = analyze([trace])
    v = event_view(trace)
    m = mdl.build(v, 0, mdl.steps_points(a.steps, 0), a.cfg)
    ctx = Context(v, a.gaps, a.cfg, devices=device_names(trace, 0))
    ev = trace.events
    launches = ev[ev["name"].astype(str) == "cudaGraphLaunch"]
    assert len(launches)
    assert graph_launch_cost(m, ctx) == (int((launches["end_ns"] - launches["start_ns"]).median()), "trace")
    gap, gap_from = graph_kernel_gap(m, ctx)
    assert gap_from == "trace" and gap != GRAPH_CONSTANTS["CDNA3"].kernel_gap_ns
    # The same rank with no graph launch read: the table's figure (the ctx's devices decide, not the file)
    bare = _planted(tmp_path, A100)
    b = analyze([bare])
    vb = event_view(bare)
    mb = mdl.build(vb, 0, mdl.steps_points(b.steps, 0), b.cfg)
    cost, source = graph_launch_cost(mb, Context(vb, b.gaps, b.cfg, devices=(A100,)))
    assert cost == 2_500 and source.startswith("Ampere constant: ")
    assert graph_launch_cost(mb, Context(vb, b.gaps, b.cfg, devices=(H100,))) == (GENERIC_LAUNCH, "constant")


@pytest.mark.parametrize(("device", "setting", "moves"), [(A100, {"whatif_graph_launch_ns": 2_500}, False),
                                                          (MI300X, {"whatif_graph_kernel_gap_ns": 1}, True)])
def test_the_launch_bound_prediction_follows_the_generation(tmp_path: Path, device: str, setting: dict,
                                                            moves: bool) -> None:
    """The same generated launch-bound run written as an H100 and as another GPU: the prediction takes the other
    generation's figure, exactly as the H100 run does with that figure set by hand. The in-graph gap moves the
    median step (MI300X: 1 ns against the generic 340 ns); the graph launch does not here: the generated run's
    dispatch is one stretch (one graph), whose first kernel queues behind other GPU work longer than any launch."""
    def predicted(trace: traceread.Trace, cfg: Thresholds) -> int:
        a = analyze([trace], cfg=cfg)
        w = predict([trace], a.steps, a.gaps, cfg, [Fix("launch-bound")])
        assert w is not None and w.fixes[0].step_ns is not None
        return w.fixes[0].step_ns

    other, hopper = _planted(tmp_path, device), _planted(tmp_path, H100)
    as_other = predicted(other, CFG)
    by_hand = predicted(hopper, CFG.with_overrides(setting))
    generic = predicted(hopper, CFG)
    assert as_other == by_hand
    assert as_other < generic if moves else as_other == generic


def test_the_thresholds_defaults_are_the_generic_figures() -> None:
    """The table's fallback is the thresholds' defaults: a changed default must move docs/whatif.md's table too."""
    defaults = {f.name: f.default for f in dataclasses.fields(Thresholds)}
    assert (defaults["whatif_graph_launch_ns"], defaults["whatif_graph_kernel_gap_ns"]) == (10_000, 340)


@needs_shared
@pytest.mark.parametrize("name", ["tracelens_sglang_decode_mi300x.json.gz", "tracelens_vllm_graph_replay_rocm.json.gz",
                                  "tracelens_vllm_piecewise_exec_mi300x.json.gz"])
def test_the_cdna3_gap_is_what_the_mi300x_traces_with_graph_launches_measure(name: str) -> None:
    """The CDNA3 row's in-graph gap is the median these traces give themselves (their own hipGraphLaunch kernels),
    and their GPU is a CDNA3 one."""
    trace = traceread.load(str(SHARED_TRACES / "kineto" / name))
    a = analyze([trace])
    v = event_view(trace)
    rank = int(a.steps["rank"].iloc[0])
    m = mdl.build(v, rank, mdl.steps_points(a.steps, rank), a.cfg)
    devices = device_names(trace, rank)
    assert generation_of(devices) == "CDNA3"
    assert graph_kernel_gap(m, Context(v, a.gaps, a.cfg, devices=devices)) == (GRAPH_CONSTANTS["CDNA3"].kernel_gap_ns,
                                                                                "trace")


@needs_shared
def test_a_graph_launch_costs_its_first_kernels_latency_not_the_call() -> None:
    """sglang's decode on MI300X: each ``hipGraphLaunch`` holds the host while it enqueues every node (over a
    millisecond), but the graph's first kernel starts microseconds after the call begins. The launch cost is that
    latency, the median over the launches whose first kernel did not queue behind its stream, counted here from
    the events by correlation."""
    import numpy as np

    from traceread import schema

    trace = traceread.load(str(SHARED_TRACES / "kineto" / "tracelens_sglang_decode_mi300x.json.gz"))
    a = analyze([trace])
    v = event_view(trace)
    m = mdl.build(v, 0, mdl.steps_points(a.steps, 0), a.cfg)
    cost, source = graph_launch_cost(m, Context(v, a.gaps, a.cfg, devices=device_names(trace, 0)))
    ev = trace.events
    calls = ev[ev["name"].astype(str) == "hipGraphLaunch"]
    k = ev[ev["lane"] == schema.LANE_GPU_COMPUTE].sort_values("start_ns")
    first = k[k["correlation"].isin(set(calls["correlation"]))].groupby("correlation").head(1)
    lat = []
    for _, c in calls.iterrows():  # a few hundred launches
        f = first[first["correlation"] == c["correlation"]]
        if f.empty:
            continue
        f = f.iloc[0]
        same = k[(k["stream"] == f["stream"]) & (k["device"] == f["device"]) & (k["start_ns"] < f["start_ns"])]
        if same.empty or int(same["end_ns"].iloc[-1]) <= int(c["start_ns"]):  # the stream was ready for it
            lat.append(int(f["start_ns"]) - int(c["start_ns"]))
    assert source == "trace" and len(lat) >= 1
    assert cost == int(np.median(np.maximum(lat, 0)))
    assert cost * 20 < float((calls["end_ns"] - calls["start_ns"]).median())
