"""``traceread diff``: generated before/after pairs with known changes, a cross-tool pair, the real HTA pair."""

from __future__ import annotations

import copy
import gzip
import json
from collections import Counter
from pathlib import Path

import jsonschema
import pytest
from conftest import SHARED_TRACES, needs_shared
from test_analyze_golden import check_golden
from tracesynth.kineto_writer import write_kineto
from tracesynth.nsys_writer import write_nsys
from tracesynth.planted import CLASSES, PlantSpec, plant

from traceread.cli import main
from traceread.diff.render import schema

# One xdist worker runs this module's tests (tests/conftest.py ONE_WORKER_MODULES): its module-scoped ``traces`` is made once.

def _only(**w: float) -> dict[str, float]:
    return {c: w.get(c.replace("-", "_"), 0.0) for c in CLASSES}


STEPS = 12
SPECS = {
    # data-starved fixed by more loader workers: the same batches and GPU work, without the loader waits
    "starved": PlantSpec(seed=21, ranks=1, steps=STEPS, weights=_only(data_starved=2.0, launch_bound=0.5)),
    "starved_fixed": PlantSpec(seed=22, ranks=1, steps=STEPS, weights=_only(data_starved=2.0, launch_bound=0.5),
                               loader_fixed=True),
    # launch-bound fixed by fewer, larger kernels doing the same GPU work
    "launch": PlantSpec(seed=23, ranks=1, steps=STEPS, weights=_only(launch_bound=3.0)),
    "launch_fused": PlantSpec(seed=24, ranks=1, steps=STEPS, weights=_only(launch_bound=3.0), launch_fused=True),
    # a no-op: the same job with other random draws (step-time noise only)
    "noop_a": PlantSpec(seed=25, ranks=1, steps=STEPS, weights=_only(data_starved=1.0, unattributed=0.5)),
    "noop_b": PlantSpec(seed=26, ranks=1, steps=STEPS, weights=_only(data_starved=1.0, unattributed=0.5)),
    # batch size 8 -> 16 sequences of 512 tokens (recorded aten::mm shapes change)
    "batch8": PlantSpec(seed=29, ranks=1, steps=STEPS, weights=_only(launch_bound=1.0), batch=8),
    "batch16": PlantSpec(seed=30, ranks=1, steps=STEPS, weights=_only(launch_bound=1.0), batch=16),
    "batch8_again": PlantSpec(seed=31, ranks=1, steps=STEPS, weights=_only(launch_bound=1.0), batch=8),
}
# nsys's spelling of the generator's elementwise kernel (as nsys writes CUDAFunctor_add<float> and
# <c10::Half> in nsysai_h100_2gpu_window_2026.sqlite and nvfuser_h100_2024.sqlite)
NSYS_SPELLING = {
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, "
    "3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)":
    "void at::native::vectorized_elementwise_kernel<(int)4, at::native::CUDAFunctor_add<c10::BFloat16>, "
    "std::array<char *, (unsigned long)3>>(int, T2, T3)",
}


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("diff")
    out = {}
    for name, spec in SPECS.items():
        p = d / f"{name}.pt.trace.json"
        write_kineto(plant(spec).scenario, str(p))
        out[name] = p
    sc = plant(SPECS["noop_a"]).scenario
    renamed = copy.deepcopy(sc)
    for rk in renamed.ranks:
        for k in rk.kernels:
            k.name = NSYS_SPELLING.get(k.name, k.name)
    write_nsys(renamed, str(d / "noop_a.sqlite"))
    out["noop_a_nsys"] = d / "noop_a.sqlite"
    for side, tokens in (("before", 8 * 512), ("after", 16 * 512)):
        (d / f"job_{side}.toml").write_text(f'params = 1e6\ntokens_per_step = {tokens}\ndtype = "bf16"\n')
        out[f"job_{side}"] = d / f"job_{side}.toml"
    return out


def _diff(tmp_path: Path, before: Path, after: Path, *extra: str) -> tuple[int, dict, str]:
    js, md = tmp_path / "diff.json", tmp_path / "diff.md"
    rc = main(["diff", str(before), str(after), "--json", str(js), "-o", str(md), *extra])
    doc = json.loads(js.read_text()) if js.exists() else {}
    if doc:
        jsonschema.validate(doc, schema())
    return rc, doc, md.read_text() if md.exists() else ""


def test_data_starved_fixed_by_loader_workers(traces: dict[str, Path], tmp_path: Path) -> None:
    rc, d, md = _diff(tmp_path, traces["starved"], traces["starved_fixed"], "--fail-on-regression", "5")
    assert rc == 0
    assert d["verdict"] == "improved", d["reason"]
    assert d["before"]["dominant_cause"] == "data-starved"
    assert d["after"]["dominant_cause"] != "data-starved"
    assert d["shift"].startswith("The dominant gap shifted from data-starved")
    assert d["step_time_ratio"] < 1 and d["test"]["p_value"] < 0.05 and d["test"]["interval"][1] < 1
    starved = next(r for r in d["attribution"] if r["part"] == "data-starved")
    assert starved["ns_per_step_after"] < 0.05 * starved["ns_per_step_before"]
    busy = [r for r in d["attribution"] if r["kind"] == "busy"]  # the same GPU work on both sides
    assert abs(sum(r["delta_ns_per_step"] for r in busy)) < 0.1 * sum(r["ns_per_step_before"] for r in busy)
    assert "## Verdict: improved" in md


def test_launch_bound_fixed_by_fewer_larger_kernels(traces: dict[str, Path], tmp_path: Path) -> None:
    rc, d, md = _diff(tmp_path, traces["launch"], traces["launch_fused"])
    assert rc == 0 and d["verdict"] == "improved", d["reason"]
    assert d["before"]["dominant_cause"] == "launch-bound"
    assert d["after"]["dominant_cause"] in ("healthy", "memory-bound")
    assert "to compute" in d["shift"]
    launch = next(r for r in d["attribution"] if r["part"] == "launch-bound")
    assert launch["ns_per_step_after"] < 0.2 * launch["ns_per_step_before"]
    # The small kernels are launched far less often: the change is in calls, not in their duration.
    small = [k for k in d["kernels"] if "direct_copy" in k["name"] or "GeluCUDAKernelImpl" in k["name"]]
    assert small and all(k["count_after"] < 0.2 * k["count_before"] for k in small)
    assert all(k["mean_ns_after"] > 5 * k["mean_ns_before"] for k in small)
    check_golden("diff_launch_bound_fused", md)


def test_noop_change_is_no_significant_change(traces: dict[str, Path], tmp_path: Path) -> None:
    rc, d, _ = _diff(tmp_path, traces["noop_a"], traces["noop_b"], "--fail-on-regression", "5")
    assert d["verdict"] == "no significant change", d["reason"]
    assert d["test"]["p_value"] >= 0.05 and d["test"]["interval"][0] <= 1 <= d["test"]["interval"][1]
    assert rc == 0


def test_trace_against_itself(traces: dict[str, Path], tmp_path: Path) -> None:
    rc, d, _ = _diff(tmp_path, traces["noop_a"], traces["noop_a"], "--fail-on-regression", "1")
    assert rc == 0 and d["verdict"] == "no significant change"
    assert d["step_time_ratio"] == 1.0 and d["test"]["p_value"] == 1.0
    assert all(k["delta_ns_per_step"] == 0 for k in d["kernels"])
    assert all(h["status"] == "same count" for h in d["host_ops"])


def test_regression_trips_the_gate(traces: dict[str, Path], tmp_path: Path) -> None:
    # The reverse of the launch fix (a change broke the fused/graph path): slower, same work.
    rc, d, _ = _diff(tmp_path, traces["launch_fused"], traces["launch"], "--fail-on-regression", "5")
    assert d["verdict"] == "regressed", d["reason"]
    assert d["change_pct"] >= 5 and rc == 1
    rc_high, _, _ = _diff(tmp_path, traces["launch_fused"], traces["launch"], "--fail-on-regression", "10000")
    assert rc_high == 0  # worse, but by less than the gate's percentage
    rc_none, _, _ = _diff(tmp_path, traces["launch_fused"], traces["launch"])
    assert rc_none == 0  # no gate asked


def test_batch_size_change_without_job_inputs_is_not_comparable(traces: dict[str, Path], tmp_path: Path) -> None:
    rc, d, _ = _diff(tmp_path, traces["batch8"], traces["batch16"], "--fail-on-regression", "5")
    assert d["verdict"] == "not comparable"
    assert "aten::mm" in d["reason"] and "[[4096, 1024], [1024, 1024]]" in d["reason"]
    assert d["comparability"]["work_per_step"]["shapes"] == "differs"
    fb, fa = (d[s]["recorded_flops_per_step"] for s in ("before", "after"))
    assert fb > 0 and fa > 0
    assert rc == 1
    # The same batch size in another run: the same shapes, so the step times are compared.
    _, same, _ = _diff(tmp_path, traces["batch8"], traces["batch8_again"])
    assert same["comparability"]["work_per_step"]["shapes"] == "same"
    assert same["verdict"] == "no significant change", same["reason"]
    assert same["before"]["recorded_flops_per_step"] == pytest.approx(same["after"]["recorded_flops_per_step"],
                                                                      rel=0.25)


def test_batch_size_change_with_job_inputs_compares_throughput(traces: dict[str, Path], tmp_path: Path) -> None:
    rc, d, _ = _diff(tmp_path, traces["batch8"], traces["batch16"], "--job-before", str(traces["job_before"]),
                     "--job-after", str(traces["job_after"]), "--fail-on-regression", "5")
    assert d["metric"] == "tokens/s"
    assert d["verdict"] == "improved", d["reason"]  # twice the tokens in less than twice the time
    assert d["step_time_ratio"] > 1 and d["throughput_ratio"] > 1
    assert d["before"]["mfu"] is not None and d["after"]["mfu"] is not None
    assert d["after"]["mfu"] / d["before"]["mfu"] == pytest.approx(d["after"]["tokens_per_s"] /
                                                                   d["before"]["tokens_per_s"], rel=0.05)
    # tokens per profiler step: the job's tokens per optimizer step x the Optimizer.step# markers per step
    assert d["after"]["tokens_per_step"] == pytest.approx(2 * d["before"]["tokens_per_step"], rel=0.1)
    assert rc == 0


def test_kineto_against_nsys_export_of_the_same_run(traces: dict[str, Path], tmp_path: Path) -> None:
    rc, d, _ = _diff(tmp_path, traces["noop_a"], traces["noop_a_nsys"], "--fail-on-regression", "5")
    assert rc == 0 and d["verdict"] == "no significant change", d["reason"]
    assert d["step_time_ratio"] == pytest.approx(1.0, abs=1e-6)
    assert any("different tools" in w for w in d["warnings"])
    assert not [k for k in d["kernels"] if k["status"] != "changed"]  # nothing new, nothing vanished
    keyed = [k for k in d["kernels"] if k["matched_by"] == "key"]
    assert len(keyed) == 1 and keyed[0]["name_after"] in NSYS_SPELLING.values()
    assert keyed[0]["count_before"] == keyed[0]["count_after"]


def test_usage_errors(traces: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("not a trace")
    assert main(["diff", str(bad), str(traces["noop_a"])]) == 2
    assert "bad.json" in capsys.readouterr().err
    assert main(["diff", str(traces["noop_a"]), str(traces["noop_a"]), "--job", str(traces["job_before"]),
                 "--job-after", str(traces["job_after"])]) == 2


def _hta_pair() -> tuple[Path, Path]:
    base = SHARED_TRACES / "kineto" / "hta_compare_base.json.gz"
    test = SHARED_TRACES / "kineto" / "hta_compare_test.json.gz"
    if not (base.exists() and test.exists()):
        pytest.skip("HTA compare traces not present")
    return base, test


def _counts(path: Path, cats: tuple[str, ...]) -> Counter:
    """Event counts by name for the given categories, read straight from the JSON (independent of traceread)."""
    with gzip.open(path, "rt") as fh:
        ev = json.load(fh)["traceEvents"]
    return Counter(e["name"] for e in ev if e.get("cat") in cats and e.get("ph") == "X"
                   and not e["name"].startswith("ProfilerStep#"))


@needs_shared
def test_real_hta_compare_pair(tmp_path: Path) -> None:
    base, test = _hta_pair()
    rc, d, md = _diff(tmp_path, base, test, "--fail-on-regression", "5")
    assert d["verdict"] == "inconclusive" and rc == 1
    assert d["before"]["steady_steps"] == 2 and d["after"]["steady_steps"] == 2
    host_b, host_a = _counts(base, ("cpu_op", "user_annotation")), _counts(test, ("cpu_op", "user_annotation"))
    ops = {h["name"]: h for h in d["host_ops"]}
    added = {n for n in host_a if n not in host_b}
    assert added == {"All2All_Pooled_Req", "CatBackward0", "AddmmBackward0"}
    assert {n for n, h in ops.items() if h["status"] == "added"} == added
    assert not {n for n in host_b if n not in host_a}
    assert host_b["nccl:all_reduce"] - host_a["nccl:all_reduce"] == 1
    assert (ops["nccl:all_reduce"]["count_before"], ops["nccl:all_reduce"]["count_after"]) == \
        (host_b["nccl:all_reduce"], host_a["nccl:all_reduce"])
    for name, h in ops.items():
        assert (h["count_before"], h["count_after"]) == (host_b[name], host_a[name])
    kb, ka = _counts(base, ("kernel",)), _counts(test, ("kernel",))
    add_int = next(n for n in kb if "CUDAFunctor_add<int>" in n)
    assert (kb[add_int], ka[add_int]) == (3, 2)
    row = next(k for k in d["kernels"] if k["name"] == add_int)
    steps = 2
    assert (row["count_before"] * steps, row["count_after"] * steps) == (3, 2)
    assert row["delta_from_duration_ns"] == 0  # fewer calls, not slower ones
    check_golden("diff_real_hta_compare", md)


def _write_runs(directory: Path, spec: PlantSpec, runs: int, seed0: int) -> None:
    """``runs`` captures of one 2-rank job in ``directory``, 1000 s apart (repeated runs)."""
    directory.mkdir(parents=True, exist_ok=True)
    for r in range(runs):
        sc = plant(PlantSpec(**{**spec.__dict__, "seed": seed0 + r})).scenario
        sc.origin_epoch_ns += r * 1_000_000_000_000
        write_kineto(sc, str(directory / f"run{r}.rank{{rank}}.pt.trace.json"), generation="int-us")


def test_directory_sides_pool_repeated_runs_of_a_job(tmp_path: Path) -> None:
    base = PlantSpec(ranks=2, steps=6, weights=_only(launch_bound=3.0))
    _write_runs(tmp_path / "before", base, 2, 40)
    _write_runs(tmp_path / "after", PlantSpec(**{**base.__dict__, "launch_fused": True}), 2, 50)
    rc, d, md = _diff(tmp_path, tmp_path / "before", tmp_path / "after", "--fail-on-regression", "5")
    assert rc == 0 and d["verdict"] == "improved", d["reason"]
    for side in ("before", "after"):
        assert d[side]["captures"] == 2 and len(d[side]["paths"]) == 4 and d[side]["world_size"] == 2
        steps = d[side]["all_steps"]
        assert {s["capture"] for s in steps} == {0, 1}
        assert d[side]["steady_steps"] == sum(s["steady"] for s in steps)
    assert {r["rank"] for r in d["ranks"]} == {0, 1}
    assert "## Ranks" in md


def test_directory_with_two_jobs_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mixed = tmp_path / "mixed"
    _write_runs(mixed, PlantSpec(ranks=2, steps=4, weights=_only(launch_bound=1.0)), 1, 60)
    one = plant(PlantSpec(seed=61, ranks=1, steps=4, weights=_only(launch_bound=1.0))).scenario
    write_kineto(one, str(mixed / "other_job.pt.trace.json"))
    assert main(["diff", str(mixed), str(mixed)]) == 2
    assert "different jobs" in capsys.readouterr().err


@pytest.fixture(scope="module")
def noop_side(traces: dict[str, Path]):
    from traceread.config import Thresholds
    from traceread.diff import capture_from_analysis, summarize_side
    from traceread.loaders import load
    from traceread.runner import analyze

    cfg = Thresholds()
    cap = capture_from_analysis(analyze([load(str(traces["noop_a"]))], cfg=cfg), cfg, [])
    return summarize_side("before", [cap], None, cfg), cfg


def test_offsetting_changes_are_said(noop_side) -> None:
    import dataclasses

    from traceread.diff import compare

    b, cfg = noop_side
    moved = 0.2 * b.step_ns_per_step
    parts = dict(b.parts_per_step)
    parts["data-starved"] -= moved
    parts["launch-bound"] += moved
    a = dataclasses.replace(b, label="after", parts_per_step=parts)
    d = compare(b, a, cfg)
    assert d.verdict == "no significant change"
    assert "offset" in d.reason and "launch-bound rose" in d.offsetting and "data-starved fell" in d.offsetting


def test_other_gpu_model_or_world_size_is_not_comparable(noop_side) -> None:
    import dataclasses

    from traceread.diff import compare, gate

    b, cfg = noop_side
    d = compare(b, dataclasses.replace(b, label="after", gpu_models=("NVIDIA A100-SXM4-80GB",)), cfg)
    assert d.verdict == "not comparable" and "GPU models" in d.reason and gate(d, 5)[0]
    d = compare(b, dataclasses.replace(b, label="after", world_size=8), cfg)
    assert d.verdict == "not comparable" and "world sizes" in d.reason


def test_straggler_that_went_away(tmp_path: Path) -> None:
    from tracesynth.stragglers import StragglerSpec, make_job, write_job

    for side in ("before", "after"):
        (tmp_path / side).mkdir()
    write_job(make_job(StragglerSpec(straggler=2, mechanism="data", seed=1)), str(tmp_path / "before"))
    write_job(make_job(StragglerSpec(straggler=None, seed=2)), str(tmp_path / "after"))
    rc, d, md = _diff(tmp_path, tmp_path / "before", tmp_path / "after")
    assert rc == 0 and d["verdict"] == "improved", d["reason"]
    ranks = {r["rank"]: r for r in d["ranks"]}
    assert set(ranks) == {0, 1, 2, 3}
    assert ranks[2]["straggler_before"] and not ranks[2]["straggler_after"]
    assert ranks[2]["straggler_cause_before"] == "data-starved"
    assert not any(r["straggler_before"] or r["straggler_after"] for k, r in ranks.items() if k != 2)
    assert "straggler gone" in md


def _scan(tmp_path: Path, name: str, jobs: dict[str, Path]) -> Path:
    """Run `traceread scan` on a tree holding one directory per job (rank0.pt.trace.json each)."""
    import shutil

    tree, out = tmp_path / f"tree_{name}", tmp_path / f"scan_{name}"
    for job, trace in jobs.items():
        (tree / job).mkdir(parents=True)
        shutil.copyfile(trace, tree / job / "rank0.pt.trace.json")
    assert main(["scan", str(tree), "--out", str(out)]) == 0
    return out


def test_scan_outputs_are_diffed_job_by_job(traces: dict[str, Path], tmp_path: Path) -> None:
    before = _scan(tmp_path, "before", {"train": traces["launch"], "eval": traces["noop_a"], "old": traces["noop_b"]})
    after = _scan(tmp_path, "after", {"train": traces["launch_fused"], "eval": traces["noop_b"]})
    js = tmp_path / "scan_diff.json"
    rc = main(["diff", str(before), str(after), "--json", str(js), "-o", str(tmp_path / "scan_diff.md"),
               "--fail-on-regression", "5"])
    doc = json.loads(js.read_text())
    jsonschema.validate(doc, schema())
    jobs = {j["job"]: j for j in doc["jobs"]}  # scan names a job by its directory and the ranks' file stem
    assert set(jobs) == {"train/rank*", "eval/rank*"} and doc["only_before"] == ["old/rank*"]
    assert doc["only_after"] == []
    jobs = {k.split("/")[0]: v for k, v in jobs.items()}
    # The same verdicts and step-time ratios as diffing the traces themselves.
    _, direct, _ = _diff(tmp_path, traces["launch"], traces["launch_fused"])
    assert jobs["train"]["verdict"] == direct["verdict"] == "improved"
    assert jobs["train"]["step_time_ratio"] == pytest.approx(direct["step_time_ratio"])
    assert {k["name"]: k["delta_ns_per_step"] for k in jobs["train"]["kernels"]} == \
        pytest.approx({k["name"]: k["delta_ns_per_step"] for k in direct["kernels"]})
    assert jobs["train"]["host_ops"] == []  # not in scan reports: said in the notes
    assert any("host ops are not in the scan reports" in n for n in jobs["train"]["notes"])
    assert jobs["eval"]["verdict"] == "no significant change"
    assert doc["verdict"] == "no significant change" and rc == 0
    md = (tmp_path / "scan_diff.md").read_text()
    assert "# Job train/rank\\*" in md and "Only in the before scan: old/rank\\*." in md
    assert main(["diff", str(before), str(traces["noop_a"])]) == 2


@pytest.mark.parametrize("generation,jitter", [("int-us", 0.05), ("2024", 0.10)])
def test_loader_fix_under_variation(tmp_path: Path, generation: str, jitter: float) -> None:
    """The loader fix and a no-op, in the integer-microsecond Kineto generation and with doubled jitter."""
    paths = {}
    w = _only(data_starved=2.0, launch_bound=0.5)
    for name, seed, fixed in (("starved", 70, False), ("fixed", 71, True), ("fixed_again", 72, True)):
        paths[name] = tmp_path / f"{name}.pt.trace.json"
        spec = PlantSpec(seed=seed, ranks=1, steps=STEPS, jitter=jitter, weights=w, loader_fixed=fixed)
        write_kineto(plant(spec).scenario, str(paths[name]), generation=generation)
    _, d, _ = _diff(tmp_path, paths["starved"], paths["fixed"])
    assert d["verdict"] == "improved" and d["before"]["dominant_cause"] == "data-starved", d["reason"]
    _, d, _ = _diff(tmp_path, paths["fixed"], paths["fixed_again"])
    assert d["verdict"] == "no significant change", d["reason"]


def test_capture_without_step_markers(tmp_path: Path) -> None:
    """No ProfilerStep#: the whole capture is one step (inconclusive) unless steps are inferred."""
    sc = plant(PlantSpec(seed=80, ranks=1, steps=8, weights=_only(launch_bound=1.0))).scenario
    for rk in sc.ranks:
        rk.host_ranges = [r for r in rk.host_ranges if not r.name.startswith("ProfilerStep#")]
    p = tmp_path / "nomarkers.pt.trace.json"
    write_kineto(sc, str(p))
    rc, d, _ = _diff(tmp_path, p, p, "--fail-on-regression", "5")
    sources = d["before"]["step_source"]
    if sources == ["gpu-span"]:
        assert d["verdict"] == "inconclusive" and rc == 1
        assert any("no step markers" in w for w in d["warnings"])
    else:  # step inference (issue 12) found the steps
        assert all(s.startswith("inferred") for s in sources), sources
        assert d["verdict"] == "no significant change" and rc == 0
