"""The what-if replay: the model replays the trace as recorded, the compiled sweep equals its Python
twin, and predictions match generated before/after pairs simulated afresh by tracesynth."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tracesynth.files import load_as
from tracesynth.kineto_writer import write_kineto
from tracesynth.planted import PlantSpec, plant

import traceread
from traceread.engine.lanes import event_view
from traceread.runner import analyze
from traceread.vocabulary import GAP_CLASSES
from traceread.whatif import FIX_CAUSES, Fix, Scale, predict
from traceread.whatif import model as mdl
from traceread.whatif import sweep as sw
from traceread.whatif.fixes import Context, Edges, apply


def _only(**w: float) -> dict[str, float]:
    return {c: w.get(c.replace("-", "_"), 0.0) for c in GAP_CLASSES}


def _load(tmp_path: Path, spec: PlantSpec, fmt: str) -> traceread.Trace:
    tmp_path.mkdir(exist_ok=True)
    return load_as(plant(spec).scenario, tmp_path, f"s{spec.seed}_{spec.loader_fixed}", fmt)


def _rank_files(tmp_path: Path, spec: PlantSpec) -> list[traceread.Trace]:
    """The planted job written one Kineto file per rank, as a job is captured, and loaded."""
    scenario = plant(spec).scenario
    out = []
    for rk in scenario.ranks:
        p = tmp_path / f"rank{rk.rank}.pt.trace.json"
        write_kineto(type(scenario)(ranks=[rk], world_size=spec.ranks), str(p))
        out.append(traceread.load(str(p)))
    return out


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> traceread.Trace:
    spec = PlantSpec(seed=5, ranks=1, steps=8, jitter=0.1)  # every class planted
    return _load(tmp_path_factory.mktemp("whatif"), spec, "kineto")


def test_unfixed_replay_reproduces_every_recorded_time(mixed) -> None:
    a = analyze([mixed])
    m = mdl.build(event_view(mixed), 0, mdl.steps_points(a.steps, 0), a.cfg)
    out = sw.sweep(m.time, m.src, m.delay, m.dur)
    assert m.dropped_edges == 0
    assert np.array_equal(out, m.time)  # every host point and op start where the trace has it
    w = predict([mixed], a.steps, a.gaps, a.cfg)
    assert w is not None and w.replayed_step_ns == w.measured_step_ns and w.replay_error == 0.0


def test_compiled_sweep_equals_its_python_twin_under_every_fix(mixed) -> None:
    if sw.COMPILED is None:
        pytest.skip("the compiled sweep is not built here")
    a = analyze([mixed])
    v = event_view(mixed)
    m = mdl.build(v, 0, mdl.steps_points(a.steps, 0), a.cfg)
    ctx = Context(v, a.gaps, a.cfg, mixed.side.get("copy_args"))
    for fix in [Fix(c) for c in FIX_CAUSES] + [Fix("comm-bound", 2.0), Scale("gemm", 3.0)]:
        e = Edges.of(m)
        apply(m, e, fix, ctx)
        compiled = np.zeros(len(m.time), np.int64)
        sw.COMPILED.sweep(m.time, e.src, e.delay, e.dur, compiled)
        assert np.array_equal(compiled, sw.sweep_python(m.time, e.src, e.delay, e.dur)), fix
    # random causal graphs, negative delays included
    rng = np.random.default_rng(0)
    n = 5000
    src = np.where(rng.random((n, 3)) < 0.7, (rng.random((n, 3)) * np.arange(n)[:, None]).astype(np.int64), -1)
    src[0] = -1
    delay = rng.integers(-50, 1000, (n, 3))
    dur, time = rng.integers(0, 500, n), np.cumsum(rng.integers(0, 100, n))
    compiled = np.zeros(n, np.int64)
    sw.COMPILED.sweep(time, src.astype(sw.SRC), delay, dur, compiled)
    assert np.array_equal(compiled, sw.sweep_python(time, src, delay, dur))


def test_compiled_host_cut_and_extent_equal_their_python_twins(mixed) -> None:
    if sw.COMPILED is None:
        pytest.skip("the compiled sweep is not built here")
    from traceread import intervals

    a = analyze([mixed])
    m = mdl.build(event_view(mixed), 0, mdl.steps_points(a.steps, 0), a.cfg)
    rng = np.random.default_rng(3)
    cases = [(m.time, m.src, m.delay, m.clock_edges())]
    for n in (0, 1, 7, 3000):  # random causal graphs: negative delays, times before and after the union
        src = np.where(rng.random((n, 3)) < 0.7, (rng.random((n, 3)) * np.arange(n)[:, None]).astype(np.int64), -1)
        src[:1] = -1
        cases.append((np.sort(rng.integers(-1000, 100_000, n)), src, rng.integers(-50, 1000, (n, 3)),
                      np.flatnonzero(src[:, 0] >= 0)))
    for time, src, delay, nodes in cases:
        t0, t1 = (int(time[0]), int(time[-1])) if len(time) else (0, 1)
        for k in (0, 1, 40):
            lo = np.sort(rng.integers(t0 - 100, t1 + 100, k))
            us, ue = intervals.union(lo, lo + rng.integers(0, max((t1 - t0) // 20, 2), k))
            for frac in (1.0, 0.5, 1 / 3):
                got = sw.host_cut(time, src, delay, nodes, us, ue, frac)
                want = sw.host_cut_python(time, src, delay, nodes, us, ue, frac)
                assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
        dur = rng.integers(0, 500, len(time))
        out = np.empty(len(time), np.int64)
        extent = sw.COMPILED.sweep(time, src.astype(sw.SRC), delay, dur, out)
        if len(time):  # the replay's first start and last end, read in the sweep's pass
            assert extent == (np.min(out), np.max(out + dur))


def test_fixes_never_write_the_model_every_replay_shares(mixed) -> None:
    a = analyze([mixed])
    v = event_view(mixed)
    m = mdl.build(v, 0, mdl.steps_points(a.steps, 0), a.cfg)
    built = [x.copy() for x in (m.time, m.src, m.delay, m.dur)]
    ctx = Context(v, a.gaps, a.cfg, mixed.side.get("copy_args"))
    every = [Fix(c) for c in FIX_CAUSES] + [Fix("comm-bound", 2.0), Scale("gemm", 3.0)]
    changed = 0
    for fix in every:
        e = Edges.of(m)
        apply(m, e, fix, ctx)
        changed += any(not np.array_equal(x, y) for x, y in ((e.src, m.src), (e.delay, m.delay), (e.dur, m.dur)))
    e = Edges.of(m)
    for fix in every:  # one after another, as the "all" replay makes them
        apply(m, e, fix, ctx)
    assert changed >= 3  # the planted levers change the replay's edges...
    assert all(np.array_equal(x, y) for x, y in zip(built, (m.time, m.src, m.delay, m.dur), strict=True))  # ...not the model


def test_replayed_step_bounds_follow_the_engines_formula(mixed) -> None:
    from traceread.whatif import replay as rp

    a = analyze([mixed])
    m = mdl.build(event_view(mixed), 0, mdl.steps_points(a.steps, 0), a.cfg)
    e = Edges.of(m)
    e.writable("dur")[m.op_nodes] //= 2  # any replay: here every GPU op twice as fast
    r = rp.replay(m, e)
    rs = a.steps[a.steps["rank"] == 0]
    got_s, got_e = rp.step_bounds(m, r, rs)
    launched = m.time[np.where(m.launch_point >= 0, m.launch_point, m.op_nodes)]
    at = {int(t): int(r.start[k]) for t, k in zip(m.step_time, m.step_node, strict=True)}
    for device in rs["device"].unique():
        prev_end = None
        for i in np.flatnonzero(rs["device"].to_numpy() == device)[np.argsort(rs["cpu_start_ns"][rs["device"] == device]
                                                                               .to_numpy(), kind="stable")]:
            row = rs.iloc[i]
            mine = (m.device == device) & (launched >= row["cpu_start_ns"]) & (launched < row["cpu_end_ns"])
            ends = r.start[m.op_nodes[mine]] + r.dur[m.op_nodes[mine]]
            end = max([at[int(row["cpu_end_ns"])], *ends.tolist()])
            start = at[int(row["cpu_start_ns"])] if prev_end is None else max(at[int(row["cpu_start_ns"])], prev_end)
            assert (got_s[i], got_e[i]) == (start, end)
            prev_end = end
    assert len(rs) >= 8


def test_a_fix_never_slows_the_whole_capture_and_only_its_lever_moves(mixed) -> None:
    a = analyze([mixed])
    w = predict([mixed], a.steps, a.gaps, a.cfg)
    assert w is not None and w.all_fixed is not None
    assert all(p.once_ns >= 0 for p in w.fixes)
    assert w.all_fixed.step_ns is not None and w.all_fixed.step_ns < w.measured_step_ns
    starved = w.prediction("data-starved")
    assert starved is not None and starved.saving_ns is not None and starved.saving_ns > 0
    one_time = w.prediction("one-time-cost")
    assert one_time is not None and one_time.step_ns is None  # one-time work buys no steady-state figure
    table = w.per_fix()
    assert list(table["fix"])[-1] == "all" and len(table) == len(FIX_CAUSES) + 1


PAIRS = {  # lever -> (what is planted, the generator's after-run flag)
    "data-starved": (_only(data_starved=2.0), "loader_fixed"),
    "launch-bound": (_only(launch_bound=3.0), "graphs_captured"),
    "sync-stall": (_only(sync_stall=3.0), "syncs_removed"),
    "comm-bound": (_only(comm_bound=3.0), "comm_overlapped"),
}


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
@pytest.mark.parametrize("jitter", [0.1, 0.2])
@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("lever", list(PAIRS))
def test_fix_predicted_within_5_percent_of_the_generated_after_run(tmp_path, fmt, jitter, seed, lever) -> None:
    """tracesynth simulates the after run afresh from the same workload with the fix made (more
    loader workers, CUDA graphs, syncs taken out, collectives overlapped: ``PlantSpec.paired``); the
    replay only transforms the before run. Measured (jitter 0.1 / 0.2): data-starved +0.1% / -1.0..+0.1%,
    launch-bound +0.6..+0.8% (a graph runs its kernels 0.26-0.42 us apart, the model one whatif_graph_kernel_gap_ns
    apart plus a graph launch per stretch), sync-stall 0.0%, comm-bound +0.0..+0.4% (an exposed collective keeps its length
    from its trigger, whatever the communication stream's queue: the generator ends it at the other ranks'
    arrival)."""
    weights, flag = PAIRS[lever]
    before = PlantSpec(seed=seed, ranks=1, steps=12, jitter=jitter, weights=weights, paired=True)
    after = PlantSpec(**{**before.__dict__, flag: True})
    tb, ta = _load(tmp_path, before, fmt), _load(tmp_path / "after", after, fmt)
    ab, aa = analyze([tb]), analyze([ta])
    w = predict([tb], ab.steps, ab.gaps, ab.cfg, [Fix(lever)])
    measured_after = predict([ta], aa.steps, aa.gaps, aa.cfg, [])
    assert w is not None and measured_after is not None
    predicted, target = w.fixes[0].step_ns, measured_after.measured_step_ns
    assert predicted is not None
    assert abs(predicted / target - 1) <= 0.05, (predicted, target)
    assert target < w.measured_step_ns  # the after run is faster: the pair tests a real fix


def test_overlapped_communication_holds_neither_the_host_nor_another_stream(tmp_path) -> None:
    """The comm-bound fix: after it, no host sync returns on a collective and no op of another stream waits for one
    (a collective cut to nothing but still waited for held the host until the collective's start)."""
    from traceread import schema
    from traceread.whatif.fixes import Edges, apply_plan, plan

    weights, _ = PAIRS["comm-bound"]
    t = _load(tmp_path, PlantSpec(seed=1, ranks=1, steps=8, jitter=0.1, weights=weights, paired=True), "kineto")
    a = analyze([t])
    v = event_view(t)
    m = mdl.build(v, 0, mdl.steps_points(a.steps, 0), a.cfg)
    comm = np.zeros(len(m.time), bool)
    comm[m.op_nodes[m.lane == v.lane_codes[schema.LANE_GPU_COMM]]] = True
    waited = comm[np.maximum(m.src[m.sync_end, 1], 0)] & (m.src[m.sync_end, 1] >= 0)
    crossed = comm[np.maximum(m.src[:, 2], 0)] & (m.src[:, 2] >= 0) & ~comm
    assert waited.sum() >= 3 and crossed.sum() >= 3  # the planted trace has both: the test covers something
    e = Edges.of(m)
    apply_plan(e, plan(m, Fix("comm-bound"), Context(v, a.gaps, a.cfg)))
    assert not (comm[np.maximum(e.src[m.sync_end, 1], 0)] & (e.src[m.sync_end, 1] >= 0)).any()
    assert not (comm[np.maximum(e.src[:, 2], 0)] & (e.src[:, 2] >= 0) & ~comm).any()


def test_overlapped_collectives_keep_their_length_and_an_exposed_one_its_trigger(tmp_path) -> None:
    """The comm-bound fix keeps every collective's length (the transfer still runs); an exposed collective that
    started on its trigger (an op of another stream) no longer queues behind the one before it, while one queued
    in the trace still does. The own steps' lever (CommFree) cuts the exposed part instead."""
    from traceread import schema
    from traceread.whatif.fixes import CommFree, Edges, apply_plan, plan

    weights, _ = PAIRS["comm-bound"]
    t = _load(tmp_path, PlantSpec(seed=1, ranks=1, steps=8, jitter=0.2, weights=weights, paired=True), "kineto")
    a = analyze([t])
    v = event_view(t)
    m = mdl.build(v, 0, mdl.steps_points(a.steps, 0), a.cfg)
    ctx = Context(v, a.gaps, a.cfg)
    comm = m.op_nodes[m.lane == v.lane_codes[schema.LANE_GPU_COMM]]
    e = Edges.of(m)
    apply_plan(e, plan(m, Fix("comm-bound"), ctx))
    assert np.array_equal(e.dur[comm], m.dur[comm])
    prev = m.src[comm, 1]
    queued = (prev >= 0) & (m.time[np.maximum(prev, 0)] + m.dur[np.maximum(prev, 0)] + m.delay[comm, 1] >= m.time[comm])
    unlinked = (prev >= 0) & (e.src[comm, 1] < 0)
    assert unlinked.sum() >= 3 and not (unlinked & queued).any()  # planted triggered collectives, none queued
    assert (m.src[comm, 2][unlinked] >= 0).all() and (e.src[comm, 2][unlinked] == m.src[comm, 2][unlinked]).all()
    free = Edges.of(m)
    apply_plan(free, plan(m, CommFree(), ctx))
    assert (free.dur[comm] <= m.dur[comm]).all() and free.dur[comm].sum() < m.dur[comm].sum()
    assert np.array_equal(free.src[comm, 1], m.src[comm, 1])


def test_replay_beats_the_naive_subtraction_where_the_fix_exposes_hidden_work(tmp_path) -> None:
    """Taking the syncs out lets the host run ahead, but the stalled copies stay on the GPU: the naive
    subtraction promises the whole stall, the replay (and the generated after run) far less."""
    weights, flag = PAIRS["sync-stall"]
    before = PlantSpec(seed=1, ranks=1, steps=12, jitter=0.1, weights=weights, paired=True)
    tb = _load(tmp_path, before, "kineto")
    ta = _load(tmp_path / "after", PlantSpec(**{**before.__dict__, flag: True}), "kineto")
    ab, aa = analyze([tb]), analyze([ta])
    p = predict([tb], ab.steps, ab.gaps, ab.cfg, [Fix("sync-stall")]).fixes[0]  # type: ignore[union-attr]
    target = aa.steady_steps()["end_ns"].sub(aa.steady_steps()["start_ns"]).median()
    assert p.step_ns is not None and p.naive_step_ns is not None
    assert abs(p.step_ns - target) < 0.5 * abs(p.naive_step_ns - target)


def test_scale_and_factor_fixes_move_only_what_they_name(mixed) -> None:
    a = analyze([mixed])
    w = predict([mixed], a.steps, a.gaps, a.cfg, [Scale("no kernel is called this", 10.0), Fix("comm-bound", 1.0)])
    assert w is not None
    assert all(p.saving_ns == 0 for p in w.fixes)


def test_whatif_command_writes_table_and_json_and_refuses_unknown_fixes(tmp_path, mixed) -> None:
    import json

    from traceread.cli import main

    out, js = tmp_path / "w.md", tmp_path / "w.json"
    rc = main(["whatif", mixed.meta.path, "--fix", "data-starved", "--fix", "comm-bound=2", "--scale", "gemm=2",
               "-o", str(out), "--json", str(js)])
    assert rc == 0
    doc = json.loads(js.read_text())
    assert [p["fix"] for p in doc["fixes"]][:3] != [] and {p["fix"] for p in doc["fixes"]} == {
        "data-starved", "comm-bound=2", "gemm=2"}
    assert doc["all_fixed"]["step_ns"] < doc["measured_step_ns"]
    assert "data-starved" in out.read_text()
    assert main(["whatif", mixed.meta.path, "--fix", "faster"]) == 2
    assert main(["whatif", mixed.meta.path, "--scale", "gemm=0"]) == 2
    assert main(["whatif", mixed.meta.path, "--scale", "(=2"]) == 2


def test_own_steps_read_off_the_replay_equal_a_rank_replayed_on_its_own(tmp_path) -> None:
    from traceread.analysis import rank_summary
    from traceread.ranks.section import identities
    from traceread.whatif.straggler import free_comm_lengths

    spec = PlantSpec(seed=3, ranks=2, steps=6, jitter=0.1, weights=_only(comm_bound=2.0, launch_bound=1.0))
    paths = _rank_files(tmp_path, spec)
    a = analyze(paths)
    assert a.whatif is not None and len(a.whatif.own_steps) == 2
    for ident in identities(paths, None):  # what the job section reads: the rank summary's own steps
        i = next(j for j, t in enumerate(paths) if t.meta.path == ident.path)
        st = a.steps[a.steps["trace"] == i]
        alone = free_comm_lengths(paths[i], st, a.cfg, ident.frame_rank)  # its own model and replay
        assert len(alone) == int((st["rank"] == ident.frame_rank).sum()) > 0
        assert np.array_equal(rank_summary(a, ident).steps["own_ns"], alone)
        assert np.array_equal(a.whatif.own_steps[(i, ident.frame_rank)], alone)


def test_straggler_lever_is_the_identity_at_factor_one_and_never_slows_the_job(tmp_path) -> None:
    from traceread.whatif import rank_at_speed

    spec = PlantSpec(seed=7, ranks=2, steps=8, jitter=0.1, weights=_only(comm_bound=2.0, launch_bound=1.0))
    paths = _rank_files(tmp_path, spec)
    a = analyze(paths)
    same = rank_at_speed(paths, a.steps, a.gaps, a.cfg, 1, 1, 1.0)
    faster = [rank_at_speed(paths, a.steps, a.gaps, a.cfg, i, i, 2.0) for i in (0, 1)]
    assert same is not None and all(f is not None and f.step_ns is not None for f in faster)
    measured = predict(paths, a.steps, a.gaps, a.cfg, []).measured_step_ns  # type: ignore[union-attr]
    assert same.step_ns == measured
    # a rank running faster never slows the job; the slower one running faster speeds it up
    steps = [f.step_ns for f in faster]  # type: ignore[union-attr]
    assert max(steps) <= measured and min(steps) < measured  # type: ignore[operator]
    assert rank_at_speed(paths, a.steps, a.gaps, a.cfg, 0, 5, 2.0) is None  # no rank 5 in the first input


def test_one_rank_at_a_time_predicts_what_every_rank_held_together_does(tmp_path) -> None:
    """predict replays each rank while its model is built and then drops the model: its figures are the
    ones of every rank's model held at once and each replay run across them, and a dropped model
    refuses a replay it did not run."""
    from traceread.whatif import _run, _units

    spec = PlantSpec(seed=4, ranks=2, steps=6, jitter=0.1, weights=_only(comm_bound=2.0, launch_bound=1.0,
                                                                       sync_stall=1.0))
    paths = _rank_files(tmp_path, spec)
    a = analyze(paths)
    w = predict(paths, a.steps, a.gaps, a.cfg)
    assert w is not None
    held = _units(paths, a.steps, a.gaps, a.cfg)
    assert len(held) == 2 and all(len(u.model.time) for u in held)
    assert (w.replayed_step_ns, w.dependency_step_ns) == (_run(held, [])[0], _run(held, [], nominal=True)[0])
    for p in w.fixes:
        if p.step_ns is not None:
            assert p.step_ns == _run(held, [Fix(p.cause)])[0], p.fix
    steady = [Fix(c) for c in FIX_CAUSES if c != "one-time-cost"]
    assert w.all_fixed is not None and w.all_fixed.step_ns == _run(held, steady)[0]
    u = held[0]
    u.release()
    assert len(u.model.time) == 0 and u.outcome([]) is not None  # a replay it ran stays
    with pytest.raises(RuntimeError):
        u.outcome([Fix("comm-bound", 3.0)])


def test_dependencies_alone_sets_every_stream_edge_to_the_nominal_turnaround(mixed) -> None:
    # The mask of ops with a stream edge once became integers (`& ~False`) and set only ops 0 and 1.
    from traceread.whatif.nominal import nominal_edges

    a = analyze([mixed])
    v = event_view(mixed)
    m = mdl.build(v, 0, mdl.steps_points(a.steps, 0), a.cfg)
    e = nominal_edges(m, v.name[m.row[m.sync_end]])
    turnaround = int(m.nominal.get("stream_turnaround_ns", 0))
    external = np.isin(m.op_nodes, m.external_ops)  # waits on events recorded before the capture: kept as measured
    for slot in (1, 2):
        # an op recorded overlapping the op ahead of it on its stream keeps that overlap (slot 1)
        kept = external | ((m.delay[m.op_nodes, 1] < 0) if slot == 1 else False)
        with_edge = m.op_nodes[(m.src[m.op_nodes, slot] >= 0) & ~kept]
        assert len(with_edge) > 2
        assert (e.delay[with_edge, slot] == turnaround).all()
        held = m.op_nodes[(m.src[m.op_nodes, slot] >= 0) & kept]
        assert (e.delay[held, slot] == m.delay[held, slot]).all()


def test_model_keeps_delays_durations_and_indices_at_int32_and_the_sweep_reads_every_width(mixed) -> None:
    """The model's largest arrays are int32 while their values fit (half the bytes on a 5M-kernel rank); the
    compiled sweep reads int32 and int64 delays and durations alike, as its Python twin does."""
    a = analyze([mixed])
    m = mdl.build(event_view(mixed), 0, mdl.steps_points(a.steps, 0), a.cfg)
    for name in ("delay", "dur", "row", "host_nodes", "op_nodes", "launch_point", "step_node"):
        assert getattr(m, name).dtype == np.int32, name
    want = sw.sweep_python(m.time, m.src, m.delay.astype(np.int64), m.dur.astype(np.int64))
    assert np.array_equal(want, m.time)
    for delay in (m.delay, m.delay.astype(np.int64)):
        for dur in (m.dur, m.dur.astype(np.int64)):
            assert np.array_equal(sw.sweep(m.time, m.src, delay, dur), want)
            assert np.array_equal(sw.sweep_python(m.time, m.src, delay, dur), want)


def test_int32_arrays_widen_when_a_value_does_not_fit() -> None:
    """A delay or duration past int32 (a 3 s host gap) widens the array to int64 first, in the build and in
    a fix's copy, so no value wraps."""
    big = 3_000_000_000
    a = mdl._put(np.zeros((4, 3), np.int32), (np.array([1, 2]), 0), np.array([5, big], np.int64))
    assert a.dtype == np.int64 and a[2, 0] == big and a[1, 0] == 5
    kept = mdl._put(np.zeros(4, np.int32), np.array([3]), np.array([-7], np.int64))
    assert kept.dtype == np.int32 and kept[3] == -7
    e = Edges(np.full((4, 3), -1, sw.SRC), np.zeros((4, 3), np.int32), np.zeros(4, np.int32))
    model_delay = e.delay
    e.store("delay", (np.array([2]), 1), np.array([big]))
    assert e.delay.dtype == np.int64 and e.delay[2, 1] == big and model_delay[2, 1] == 0  # the model's stays
    e.store("dur", np.array([0]), np.array([9]))
    assert e.dur.dtype == np.int32 and e.dur[0] == 9
    assert sw.fits(np.array([2**31 - 1, -2**31]), np.int32) and not sw.fits(2**31, np.int32)


def test_a_ranks_replays_copy_into_the_same_scratch_arrays_with_the_same_results(mixed) -> None:
    """Every replay of a rank writes its copies and its sweep into arrays made once for the rank (freed and
    made afresh per replay, they scattered the heap: +0.2 GB on a 5M-kernel rank); each replay's step
    lengths are those of a replay on fresh copies."""
    from traceread import whatif
    from traceread.whatif import replay as rp
    from traceread.whatif.fixes import apply_plan

    a = analyze([mixed])
    (u,) = list(whatif._each_unit([mixed], a.steps, a.gaps, a.cfg))
    seen: dict[str, int] = {}
    for fix in [Fix(c) for c in FIX_CAUSES] + [Fix("comm-bound", 2.0)]:
        got = u.outcome([fix])[0]
        e = Edges.of(u.model)
        apply_plan(e, u.plan(fix))
        assert np.array_equal(got, u.index.lengths(rp.replay(u.model, e), u.base)), fix
        for name, arr in u.scratch.items():
            assert seen.setdefault(name, id(arr)) == id(arr), (fix, name)
    assert {"delay", "dur", "start"} <= set(seen)
    u.release()
    assert not u.scratch


def test_plans_applied_a_slice_at_a_time_and_memory_bound_judged_by_name_change_nothing(mixed, monkeypatch) -> None:
    """A plan's steps are applied a slice of their nodes at a time (bounded temporaries: a 5M-kernel rank's
    launch-bound cut is millions of delays) and the memory-bound fix judges each distinct kernel name once:
    every prediction is the one from whole steps, and the fix's kernels those of a class per kernel."""
    from traceread import kernel_classes, schema
    from traceread.whatif import fixes as fx

    a = analyze([mixed])
    want = predict([mixed], a.steps, a.gaps, a.cfg)
    monkeypatch.setattr(fx, "_APPLY_SLICE", 3)
    assert predict([mixed], a.steps, a.gaps, a.cfg) == want
    v = event_view(mixed)
    m = mdl.build(v, 0, mdl.steps_points(a.steps, 0), a.cfg)
    nodes = m.op_nodes[m.lane == v.lane_codes.get(schema.LANE_GPU_COMPUTE, -99)]
    cls = np.asarray(kernel_classes.classify(np.asarray(v.names_of(m.row[nodes]), dtype=object)))
    graph = v.cat[m.row[nodes]] == v.cat_codes.get(schema.CAT_GRAPH, -99)
    per_kernel = nodes[~kernel_classes.is_compute_bound_class(cls) & (cls != kernel_classes.CLS_OTHER) & ~graph]
    got = fx.memory_bound_ops(m, v)
    assert len(got) and np.array_equal(got, per_kernel)
