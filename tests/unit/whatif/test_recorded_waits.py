"""Cross-stream edges from the recorded event (issue 43): a stream wait whose event the trace identifies (Kineto's
``Stream Wait Event`` record names the recorded stream and the record call) makes the held op wait for the op the
event marks; where the trace holds no ids (an nsys export) the wait is inferred from timing, as before."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from conftest import SHARED_TRACES, needs_shared
from tracesynth.files import load_as
from tracesynth.kineto_writer import write_kineto
from tracesynth.model import HostCall, HostRange, Kernel, Rank, Scenario, Sync

import traceread
from traceread.engine.lanes import event_view
from traceread.runner import analyze
from traceread.whatif import Scale
from traceread.whatif import model as mdl
from traceread.whatif import replay as rp
from traceread.whatif.events import stream_waits
from traceread.whatif.fixes import Context, Edges, apply

MAIN, COMPUTE, OTHER, SIDE = 1001, 7, 13, 20
STEPS = 4


def _scenario() -> Scenario:
    """Each step: a long kernel on a third stream ("other_kernel") ends just after the compute stream's kernel; the
    side stream waits on an event recorded on the compute stream, and its kernel starts after both. Timing alone
    points at the third stream's kernel (it ended last); the event says the compute stream's."""
    rk = Rank(rank=0, pid=4000, devices=[0])
    corr, t = 1, 1_000_000
    for n in range(STEPS):
        start = t
        rk.host_calls.append(HostCall(MAIN, "cudaLaunchKernel", t, t + 5_000, corr))
        rk.kernels.append(Kernel(0, OTHER, "other_kernel", t + 8_000, t + 508_000, corr))
        rk.host_calls.append(HostCall(MAIN, "cudaLaunchKernel", t + 10_000, t + 15_000, corr + 1))
        rk.kernels.append(Kernel(0, COMPUTE, "gemm_kernel", t + 18_000, t + 505_000, corr + 1))
        record, wait = corr + 2, corr + 3
        rk.host_calls.append(HostCall(MAIN, "cudaEventRecord", t + 20_000, t + 22_000, record))
        rk.host_calls.append(HostCall(MAIN, "cudaStreamWaitEvent", t + 25_000, t + 27_000, wait))
        rk.syncs.append(Sync(0, SIDE, "wait_event", t + 26_000, t + 26_500, wait, wait_on_stream=COMPUTE,
                             record_correlation=record))
        rk.host_calls.append(HostCall(MAIN, "cudaLaunchKernel", t + 30_000, t + 35_000, corr + 4))
        rk.kernels.append(Kernel(0, SIDE, "side_kernel", t + 510_000, t + 560_000, corr + 4))
        rk.host_calls.append(HostCall(MAIN, "cudaDeviceSynchronize", t + 40_000, t + 565_000, corr + 5))
        corr, t = corr + 6, t + 600_000
        rk.host_ranges.append(HostRange(MAIN, f"ProfilerStep#{n}", start, t))
        t += 10_000
    return Scenario(ranks=[rk], world_size=1)


def _model(tmp_path: Path, fmt: str) -> tuple[traceread.Trace, mdl.RankModel, np.ndarray]:
    t = load_as(_scenario(), tmp_path, "waits", fmt)
    a = analyze([t])
    m = mdl.build(event_view(t), 0, mdl.steps_points(a.steps, 0), a.cfg, event_waits=t.side.get("event_waits"))
    v = event_view(t)
    names = np.array([str(v.names[v.name[r]]) for r in m.row[m.op_nodes]])
    return t, m, names


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_a_held_op_waits_for_the_op_its_recorded_event_marks(tmp_path: Path, fmt: str) -> None:
    t, m, names = _model(tmp_path, fmt)
    side, gemm, other = (m.op_nodes[names == n] for n in ("side_kernel", "gemm_kernel", "other_kernel"))
    assert len(side) == len(gemm) == len(other) == STEPS
    if fmt == "kineto":  # the ids: each side kernel waits for its step's gemm, as the event says
        assert m.recorded_waits == STEPS and m.inferred_waits == 0
        assert np.array_equal(m.src[side, 2], gemm)
    else:  # nsys keeps no record-side ids: the wait is inferred from timing (the kernel that ended last)
        assert m.recorded_waits == 0 and m.inferred_waits == STEPS
        assert np.array_equal(m.src[side, 2], other)


def test_the_recorded_wait_holds_when_a_fix_moves_the_other_stream(tmp_path: Path) -> None:
    """With the third stream's kernel 10x faster, the side kernel still starts after the gemm its event marks; the
    timing-inferred wait (the same trace without its ids) would let it start before the gemm ends."""
    t, m, names = _model(tmp_path, "kineto")
    a = analyze([t])
    v = event_view(t)
    timing = mdl.build(v, 0, mdl.steps_points(a.steps, 0), a.cfg)
    for model, holds in ((m, True), (timing, False)):
        e = Edges.of(model)
        apply(model, e, Scale("other_kernel", 10.0), Context(v, a.gaps, a.cfg))
        r = rp.replay(model, e)
        side, gemm = model.op_nodes[names == "side_kernel"], model.op_nodes[names == "gemm_kernel"]
        assert (r.start[side] >= r.start[gemm] + r.dur[gemm]).all() == holds


def test_the_event_waits_table_holds_what_the_trace_records(tmp_path: Path) -> None:
    """The loader's ``event_waits`` side table, both decoders, against the generated file read with ``json``."""
    from traceread.loaders.kineto import scan

    path = tmp_path / "waits.pt.trace.json"
    write_kineto(_scenario(), str(path))
    want = _args_of(path)
    got = _table(path)
    saved = scan.COMPILED
    scan.COMPILED = None  # the msgspec decoder
    try:
        slow = _table(path)
    finally:
        scan.COMPILED = saved
    assert got == want == slow and len(want) == STEPS


def _table(path: Path) -> list[tuple[int, int, int]]:
    t = traceread.load(str(path))
    ew = t.side.get("event_waits")
    corr = t.events["correlation"].to_numpy()
    return sorted((int(corr[r]), int(s), int(c)) for r, s, c in
                  ew[["row", "wait_on_stream", "record_correlation"]].itertuples(index=False))


def _args_of(path: Path) -> list[tuple[int, int, int]]:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        doc = json.load(fh)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    return sorted((int(e["args"]["correlation"]), int(e["args"]["wait_on_stream"]),
                   int(e["args"]["wait_on_cuda_event_record_corr_id"])) for e in events
                  if e.get("cat") == "cuda_sync" and "wait_on_stream" in e.get("args", {})
                  and (e["args"]["wait_on_stream"], e["args"]["wait_on_cuda_event_record_corr_id"]) != (-1, -1))


@needs_shared
@pytest.mark.parametrize("name", ["hta_alexnet_a100.json.gz", "hta_event_sync_multistream_a100.json.gz"])
def test_recorded_waits_on_real_traces_pair_the_streams_the_trace_names(name: str) -> None:
    """Every sync record's ids reach the table (a record of -1 and -1 names no event); every edge made of them joins the stream Kineto says waited to
    the stream it says the event was recorded on."""
    path = SHARED_TRACES / "kineto" / name
    assert _table(path) == _args_of(path)
    t = traceread.load(str(path))
    a = analyze([t])
    v = event_view(t)
    calls, ops = v.rows(*mdl.rank_calls(0)), v.rows(*mdl.rank_ops(0))
    ops = ops[v.device[ops] >= 0]
    launch = v.launch_of(ops)
    linked = launch >= 0
    ls = np.where(linked, v.start[np.maximum(launch, 0)], v.start[ops]).astype(np.int64)
    sw = stream_waits(v, 0, calls, ops, ls, linked, t.side.get("event_waits"))
    recorded = {c: (s, r) for c, s, r in _args_of(path)}
    gpu_stream = {int(e["args"]["correlation"]): int(e["args"]["stream"]) for e in _events(path)
                  if e.get("cat") == "cuda_sync" and e.get("name") == "Stream Wait Event"}
    assert len(sw.waited) >= 1
    for held, source, row in zip(sw.waited, sw.source, sw.wait_rows, strict=True):
        c = int(v.corr[row])
        assert int(v.tid[ops[source]]) == recorded[c][0]
        assert int(v.tid[ops[held]]) == gpu_stream[c]
    assert a.whatif is not None and a.whatif.dependency_error is not None and abs(a.whatif.dependency_error) < 0.03


def _events(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        doc = json.load(fh)
    return doc["traceEvents"] if isinstance(doc, dict) else doc
