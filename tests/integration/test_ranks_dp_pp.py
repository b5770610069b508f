"""Data-parallel x pipeline-parallel jobs: every rank aligned, the straggler's cause, the slow stage, moving imbalance.

The generator (tests/tracesynth/dp_pp.py) writes one Kineto file per rank of a DP x PP job (1F1B per
pipeline, a DP all-reduce per stage, p2p over two-rank groups of neighbouring stages, PyTorch's
record_param_comms args with ``Seq``), each rank on its own clock, with a planted slow worker, a slow
last stage, or imbalance that moves to a random rank every step. Its truth holds the offsets, stages and
the true job step. Checked through the whole pipeline (write, load, analyze, summarize, group, align).
"""

from __future__ import annotations

import dataclasses
import json
import os
from importlib import resources

import jsonschema
import numpy as np
import pytest
from tracesynth.dp_pp import DpPpSpec, make_job, write_job

from traceread import load
from traceread.analysis import rank_summary
from traceread.cli import main
from traceread.ranks import analyze_job, group_jobs, identify
from traceread.ranks.align import METHOD_SEQ
from traceread.runner import analyze

CASES = {
    "slow-4x4": DpPpSpec(dp=4, pp=4, slow_rank=6, slow_factor=1.5, seed=1),
    "slow-2x4": DpPpSpec(dp=2, pp=4, slow_rank=5, slow_factor=1.5, seed=4, offsets_ns=(0,)),
    "slow-2x4-no-seq": DpPpSpec(dp=2, pp=4, slow_rank=2, slow_factor=1.4, seed=5, record_seq=False),
    "stage-2x4": DpPpSpec(dp=2, pp=4, slow_stage=3, stage_factor=1.4, seed=2),
    "stage-4x4": DpPpSpec(dp=4, pp=4, slow_stage=3, stage_factor=1.3, seed=6, steps=5),
    "moving-4x4": DpPpSpec(dp=4, pp=4, random_imbalance=0.6, seed=3, steps=8),
    # the host runs ahead of the GPU (tracesynth host_lead), so a replay can move the run; "<name>-after"
    # is the same job simulated afresh by the generator without the slowness (AFTER), same seed and workload
    "lead-slow-4x4": DpPpSpec(dp=4, pp=4, slow_rank=6, slow_factor=1.5, seed=1, host_lead=True),
    "lead-slow-2x4": DpPpSpec(dp=2, pp=4, slow_rank=5, slow_factor=1.5, seed=4, offsets_ns=(0,), host_lead=True),
    "lead-stage-2x4": DpPpSpec(dp=2, pp=4, slow_stage=3, stage_factor=1.4, seed=2, host_lead=True),
    "lead-stage-4x4": DpPpSpec(dp=4, pp=4, slow_stage=3, stage_factor=1.3, seed=6, steps=5, host_lead=True),
    # data-parallel jobs (one stage) of 4 and 8 ranks with one slow rank, at jitter 0.1 (issue 25's pairs)
    "lead-dp4": DpPpSpec(dp=4, pp=1, slow_rank=2, slow_factor=1.5, seed=7, jitter=0.1, host_lead=True),
    "lead-dp8": DpPpSpec(dp=8, pp=1, slow_rank=5, slow_factor=1.5, seed=8, jitter=0.1, host_lead=True),
}
AFTER = {"lead-slow-4x4": {"slow_factor": 1.0}, "lead-slow-2x4": {"slow_factor": 1.0},
         "lead-stage-2x4": {"stage_factor": 1.0}, "lead-stage-4x4": {"stage_factor": 1.0},
         "lead-dp4": {"slow_factor": 1.0}, "lead-dp8": {"slow_factor": 1.0}}
CASES.update({f"{k}-after": dataclasses.replace(CASES[k], **v) for k, v in AFTER.items()})


# Every case's job is generated, written, loaded and analysed once per test process (the module's cache);
# under -n the module's tests run on one worker (tests/conftest.py ONE_WORKER_MODULES), so once in the run.


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    cache: dict[str, tuple] = {}

    def get(name: str, fmt: str = "kineto"):
        if (name, fmt) not in cache:
            job = make_job(CASES[name])
            paths = write_job(job, str(tmp_path_factory.mktemp(name)), fmt=fmt)
            analysis = analyze([load(p) for p in paths])
            # the job report analyze() made (its job section: the analysis' own rank summaries, grouped and
            # aligned), not a second rank_summary + analyze_job pass over the same tables; that the public
            # rank_summary/analyze_job path gives the same report is test_public_rank_path_gives_the_same_report
            assert analysis.job is not None and len(analysis.job.groups) == 1
            cache[(name, fmt)] = (job, analysis.job.reports[0], paths, analysis)
        return cache[(name, fmt)]
    return get


@pytest.mark.parametrize("name", ["slow-2x4-no-seq", "stage-2x4"])
def test_public_rank_path_gives_the_same_report(runs, name):
    """identify -> group_jobs -> rank_summary -> analyze_job over the analysis gives the report analyze() made."""
    _, rep, _, analysis = runs(name)
    ids = [i for t in analysis.inputs for i in identify(t)]
    groups = group_jobs(ids)
    assert len(groups) == 1
    again = analyze_job([rank_summary(analysis, i) for i in ids], group=groups[0])
    assert again.to_dict() == rep.to_dict()


def _others_time_in_collectives(rep) -> dict[int, int]:
    """Per rank, the time the other ranks spent in matched collectives (from the report's own table)."""
    ranks = [r.rank for r in rep.ranks if r.alignment is not None and r.alignment.offset_ns is not None]
    own = np.zeros(len(ranks))
    for rec in rep.collectives:
        own += np.array([w or 0 for w in rec["wait_ns"]], dtype=np.float64)
    return {r: int(own.sum() - own[i]) for i, r in enumerate(ranks)}


@pytest.mark.parametrize("name", ["slow-4x4", "slow-2x4", "slow-2x4-no-seq"])
def test_slow_worker_named_with_its_own_compute(runs, name):
    job, rep, _, analysis = runs(name)
    slow = job.truth["slow_rank"]
    assert [s.rank for s in rep.stragglers] == [slow]
    s = rep.stragglers[0]
    assert s.cause == "compute"  # compared with its own stage's median rank, not "earlier-delay"
    assert s.stage == job.truth["stage"][slow]
    assert "pipeline stage" in s.evidence[2] or "pipeline stage" in s.evidence[1]
    # at least half of the other ranks' waiting is attributed to it
    assert s.attributed_share >= 0.5
    assert rep.stage_imbalance is None
    assert rep.waiting_for is not None and rep.waiting_for.kind == "rank" and rep.waiting_for.rank == slow
    assert rep.verdict.startswith(f"rank {slow} ")
    assert f"is {rep.waiting_for.class_share:.0%} waiting for it" in rep.verdict
    # the run's headline: its dominant class is mostly waiting for that rank, so fix the rank first
    assert analysis.dominant_cause == rep.waiting_for.cls == "pipeline-bubble"
    assert analysis.dominant_evidence == "straggler"


@pytest.mark.parametrize("name", ["slow-4x4", "stage-2x4", "moving-4x4"])
def test_no_share_of_others_waiting_exceeds_their_time(runs, name):
    _, rep, _, _ = runs(name)
    bound = _others_time_in_collectives(rep)
    for r in rep.ranks:
        w = r.waits
        assert w is not None and 0.0 <= w.share_of_others_time <= 1.0
        # the waits for a rank never exceed the time the others spent in those collectives
        assert w.waited_on_ns <= bound[r.rank] and w.attributed_wait_ns <= bound[r.rank]
    for s in rep.stragglers:
        assert 0.0 <= s.share_of_others_time <= 1.0 and 0.0 <= s.attributed_share <= 1.0


@pytest.mark.parametrize("name", ["slow-4x4", "slow-2x4-no-seq", "stage-4x4"])
def test_every_rank_aligned_through_the_group_graph(runs, name):
    job, rep, _, _ = runs(name)
    spec = job.spec
    got = {a.rank: a for a in rep.alignment}
    assert len(got) == spec.dp * spec.pp
    for r, want in enumerate(job.truth["offsets_ns"]):
        assert got[r].offset_ns is not None and abs(got[r].offset_ns - want) <= 20_000, (r, got[r], want)
    # rank 0 shares groups only with its stage and its pipeline neighbour; the others are reached through them
    far = [r for r in got if job.truth["stage"][r] >= 2 and job.truth["pipeline"][r] != 0]
    assert far and all("through the process-group graph via rank" in got[r].method for r in far)
    for r in far:  # errors add up along the path: never below the first hop's
        hop = int(got[r].method.split("via rank ")[1].split(" ")[0])
        assert got[r].uncertainty_ns >= got[hop].uncertainty_ns
    direct = [got[r] for r in got if r and "via rank" not in got[r].method]
    if spec.record_seq:
        assert direct and all(a.method == METHOD_SEQ for a in direct)
    else:
        assert direct and not any(a.method == METHOD_SEQ for a in direct)


def test_aligned_job_step_agrees_with_raw_when_clocks_agree(runs):
    job, rep, _, _ = runs("slow-2x4")  # every rank on one clock
    st = rep.step
    assert st.median_job_step_ns is not None and st.median_unaligned_job_step_ns is not None
    assert abs(st.median_job_step_ns - st.median_unaligned_job_step_ns) <= 0.05 * st.median_unaligned_job_step_ns
    truth = float(np.median(job.truth["job_step_ns"][1:]))
    assert abs(st.median_job_step_ns - truth) <= 0.05 * truth


@pytest.mark.parametrize("name", ["stage-2x4", "stage-4x4"])
def test_slow_stage_named_not_one_rank_nor_a_schedule(runs, name):
    job, rep, _, _ = runs(name)
    stage = job.truth["slow_stage"]
    imb = rep.stage_imbalance
    assert imb is not None and imb.stage == stage
    assert list(imb.ranks) == [r for r, s in enumerate(job.truth["stage"]) if s == stage]
    assert abs(imb.excess - (job.spec.stage_factor - 1)) <= 0.1
    assert rep.stragglers == ()
    assert rep.verdict.startswith(f"pipeline stage {stage} ")
    assert "rebalance layers across stages" in rep.verdict and "does not remove" in rep.verdict
    assert "interleaved" not in rep.verdict and "zero-bubble" not in rep.verdict
    assert rep.waiting_for is not None and rep.waiting_for.kind == "stage" and rep.waiting_for.cls == "pipeline-bubble"
    assert (rep.waiting_for.class_share or 0.0) >= 0.5 and imb.attributed_share >= 0.5


def test_moving_imbalance_names_no_single_straggler(runs):
    job, rep, _, analysis = runs("moving-4x4")
    assert analysis.dominant_evidence not in ("straggler", "stage-imbalance")
    assert rep.stragglers == () and rep.stage_imbalance is None
    assert rep.verdict.startswith("no single straggler")
    assert rep.waiting_for is not None and rep.waiting_for.kind == "moving"
    # most of each step's waiting is for the rank slowed that step (the generator's movers)
    culprits = rep.waiting_for.step_culprits or {}
    hits = sum(1 for s, r in culprits.items() if job.truth["movers"][s] == r)
    assert hits >= 0.75 * len(culprits)


def test_stages_read_from_the_transfers(runs):
    job, rep, _, _ = runs("slow-4x4")
    assert rep.stages is not None and rep.stages.count == 4
    assert [list(r) for r in rep.stages.ranks] == [[r for r, s in enumerate(job.truth["stage"]) if s == k]
                                                   for k in range(4)]
    assert {r.rank: r.stage for r in rep.ranks} == dict(enumerate(job.truth["stage"]))


def test_kineto_seq_reaches_the_collective_args(runs):
    _, _, paths, _ = runs("slow-2x4")
    args = load(paths[0]).side_table("collective_args")
    comms = json.loads(open(paths[0]).read())["traceEvents"]
    want = sorted(e["args"]["Seq"] for e in comms if e.get("name") == "record_param_comms")
    assert sorted(args["seq"][args["seq"] >= 0].tolist()) == want


def test_report_and_scan_carry_the_new_fields(runs, tmp_path):
    _, _, paths, _ = runs("stage-2x4")
    out_json, out_md = tmp_path / "r.json", tmp_path / "r.md"
    assert main(["analyze", *paths, "--json", str(out_json), "-o", str(out_md)]) == 0
    rep = json.loads(out_json.read_text())["job"]["groups"][0]["report"]
    assert rep["stage_imbalance"]["stage"] == 3 and rep["waiting_for"]["kind"] == "stage"
    assert rep["stages"]["count"] == 4
    pred = rep["prediction"]  # the host waits for the GPU here: little moves, but never slower than measured
    assert pred["straggler_free_step_ns"] is None and pred["stage"]["stage"] == 3
    assert 0 < pred["balanced_stages_step_ns"] <= rep["step"]["median_job_step_ns"]
    md = out_md.read_text()
    assert "#### Pipeline stages" in md and "rebalance layers across pipeline stages" in md
    assert "waiting for pipeline stage 3" in md  # the analysis note on the others' pipeline-bubble time
    assert "Predicted job step with balanced stages" in md
    # the headline's first fix follows the slow stage, not a schedule change
    doc = json.loads(out_json.read_text())
    assert doc["dominant_cause"] == "pipeline-bubble" and doc["dominant_evidence"] == "stage-imbalance"
    headline = next(line for line in md.splitlines() if line.startswith("Pipeline bubbles:"))
    assert "rebalance layers across pipeline stages" in headline and "interleaved" not in headline
    scan = tmp_path / "scan"
    assert main(["scan", os.path.dirname(paths[0]), "--out", str(scan), "--workers", "1"]) == 0
    index = json.loads((scan / "index.json").read_text())
    (row,) = index["jobs"]
    assert row["waiting_for"].startswith("pipeline stage 3") and row["stage_imbalance"]["stage"] == 3
    assert row["prediction"]["balanced_stages_step_ns"] == pred["balanced_stages_step_ns"]
    doc = json.loads((scan / row["link_json"]).read_text())
    assert doc["schema_version"] == "1.2" and doc["stage_imbalance"]["stage"] == 3
    jsonschema.validate(doc, json.loads(resources.files("traceread").joinpath("data/job.schema.json").read_text("utf-8")))
    jsonschema.validate(index, json.loads(resources.files("traceread").joinpath("data/index.schema.json")
                                          .read_text("utf-8")))


def _check_pair(runs, name: str, key: str, tolerance: float, fmt: str = "kineto") -> dict[str, float]:
    job, rep, _, analysis = runs(name, fmt)
    after_job, after, _, _ = runs(f"{name}-after", fmt)
    pred = rep.prediction
    assert pred is not None and getattr(pred, key) is not None
    measured_after = after.step.median_job_step_ns
    # the after run is the generator's, simulated afresh: it agrees with its own truth
    truth_after = float(np.median(after_job.truth["job_step_ns"][1:]))
    assert abs(measured_after / truth_after - 1) <= 0.01
    error = getattr(pred, key) / measured_after - 1
    assert abs(error) <= tolerance, (name, getattr(pred, key), measured_after, error)
    # and the job was much slower before: the prediction is not the measured step
    assert rep.step.median_job_step_ns >= 1.15 * measured_after
    return {"predicted": getattr(pred, key), "after": measured_after, "error": error}


@pytest.mark.parametrize("name", ["lead-slow-4x4", "lead-slow-2x4"])
def test_straggler_free_prediction_matches_the_run_without_the_slow_worker(runs, name):
    job, rep, _, _ = runs(name)
    slow = job.truth["slow_rank"]
    assert [s.rank for s in rep.stragglers] == [slow]
    assert rep.prediction is not None and rep.prediction.straggler is not None
    assert rep.prediction.straggler.rank == slow
    assert abs(rep.prediction.straggler.factor - job.spec.slow_factor) <= 0.05
    _check_pair(runs, name, "straggler_free_step_ns", 0.10)


@pytest.mark.parametrize("name", ["lead-stage-2x4", "lead-stage-4x4"])
def test_balanced_stages_prediction_matches_the_run_with_the_stage_at_normal_speed(runs, name):
    job, rep, _, _ = runs(name)
    assert rep.stage_imbalance is not None and rep.stage_imbalance.stage == job.truth["slow_stage"]
    assert rep.prediction is not None and rep.prediction.stage is not None
    assert rep.prediction.stage.stage == job.truth["slow_stage"]
    assert rep.prediction.straggler_free_step_ns is None
    _check_pair(runs, name, "balanced_stages_step_ns", 0.10)


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
@pytest.mark.parametrize("name", ["lead-dp4", "lead-dp8"])
def test_straggler_removed_in_a_data_parallel_job(runs, name, fmt):
    """Issue 25's pairs: a 4- and an 8-rank job, one slow rank, jitter 0.1; within 5% of the after run."""
    job, rep, _, _ = runs(name, fmt)
    assert [s.rank for s in rep.stragglers] == [job.truth["slow_rank"]]
    got = _check_pair(runs, name, "straggler_free_step_ns", 0.05, fmt)
    assert got["predicted"] < rep.step.median_job_step_ns
