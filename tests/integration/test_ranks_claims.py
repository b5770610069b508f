"""Straggler and stage claims only with enough evidence (traceread.ranks.evidence, the job's verdict).

Each rule on a generated job (tests/tracesynth/dp_pp.py) through the whole pipeline, with a control that
the same kind of job with enough evidence is still judged: a one-collective job, a job whose one rank
started late (start skew), and partial jobs (a few ranks of a larger world).
"""

from __future__ import annotations

import json
import re

import pytest
from tracesynth.dp_pp import DpPpSpec, make_job, write_job

from traceread import load
from traceread.cli import main
from traceread.config import Thresholds
from traceread.runner import analyze

CFG = Thresholds()


def _report(spec: DpPpSpec, tmp_path, keep: list[int] | None = None, fmt: str = "kineto"):
    job = make_job(spec)
    paths = write_job(job, str(tmp_path), fmt=fmt)
    if keep is not None:
        paths = [p for p in paths if int(re.search(r"rank(\d+)", p).group(1)) in keep]
    analysis = analyze([load(p) for p in paths])
    assert analysis.job is not None and len(analysis.job.groups) == 1
    return job, analysis.job.reports[0], paths


def test_one_collective_job_is_insufficient_evidence(tmp_path):
    """Two ranks, one all-reduce: the late rank is not called the straggler; the numbers are given."""
    _, rep, paths = _report(DpPpSpec(dp=2, pp=1, steps=1, slow_rank=1, slow_factor=1.5), tmp_path)
    assert rep.stragglers == () and rep.stage_imbalance is None and rep.prediction is None
    ev = rep.evidence
    assert ev is not None and not ev.sufficient and ev.collectives == 1 and ev.steps == 1
    assert rep.verdict.startswith("not judged: insufficient evidence: 1 collective matched across ranks over 1 step")
    assert f"needs {CFG.straggler_min_collectives} collectives over {CFG.straggler_min_steps} steps" in rep.verdict
    assert "rank 1 arrived last at 1 of 1" in rep.verdict
    out = tmp_path / "r.json"
    assert main(["analyze", *paths, "--json", str(out)]) == 0
    doc = json.loads(out.read_text())["job"]["groups"][0]["report"]
    assert doc["evidence"]["sufficient"] is False and doc["evidence"]["collectives"] == 1
    assert doc["stragglers"] == []


def test_start_skew_is_not_a_straggler(tmp_path):
    """Rank 2's process starts 9 ms late: the others wait for it at the first all-reduce only."""
    _, rep, _ = _report(DpPpSpec(dp=4, pp=1, steps=10, late_start=(2, 9_000_000), jitter=0.05), tmp_path)
    assert rep.evidence is not None and rep.evidence.sufficient
    assert rep.stragglers == ()
    assert rep.verdict.startswith("no straggler: rank 2 ") and "start skew" in rep.verdict
    # the lateness stated is the late start (9 ms, within the other ranks' spread at that collective)
    ms = float(re.search(r"it arrived ([0-9.]+) ms after", rep.verdict).group(1))
    assert 8.0 <= ms <= 10.5


@pytest.mark.parametrize("peer", [False, True])
def test_start_skew_in_a_pipeline_is_not_a_straggler(tmp_path, peer):
    """A balanced 2x4 pipeline (Megatron-style) whose rank 5 starts 9 ms late: the later stages wait in every
    fill and drain, and for rank 5 in the first step, but no rank computes longer than its stage."""
    spec = DpPpSpec(dp=2, pp=4, steps=6, late_start=(5, 9_000_000), jitter=0.05, pp_groups="pipeline",
                    host_lead=True, peer_start=peer)
    _, rep, _ = _report(spec, tmp_path)
    assert rep.evidence is not None and rep.evidence.sufficient and rep.stages is not None
    assert rep.stragglers == () and rep.stage_imbalance is None
    m = re.match(r"no straggler: rank \d+ \(pipeline stage \d\) would cost the others [0-9.]+% of their time, but "
                 r"it is slower than its stage's other ranks in only (\d+) of the (\d+) steps", rep.verdict)
    assert m is not None and int(m.group(1)) < 0.5 * int(m.group(2)), rep.verdict


def test_recurring_lateness_is_still_named(tmp_path):
    """The control: the same job with rank 2 slower every step names it."""
    _, rep, _ = _report(DpPpSpec(dp=4, pp=1, steps=10, slow_rank=2, slow_factor=1.3, jitter=0.05), tmp_path)
    assert [s.rank for s in rep.stragglers] == [2]
    assert rep.verdict.startswith("rank 2 holds the job back")


def test_two_ranks_of_a_larger_job_claim_no_stage(tmp_path):
    """Two neighbouring ranks of a 16-rank job whose stage 1 is slow: no stage and no straggler named."""
    _, rep, _ = _report(DpPpSpec(dp=4, pp=4, slow_stage=1, stage_factor=1.4, seed=2), tmp_path, keep=[4, 8])
    ev = rep.evidence
    assert ev is not None and ev.partial and ev.present_ranks == 2 and ev.world_size == 16
    assert not ev.stage_claims and not ev.straggler_claims
    assert rep.stage_imbalance is None and rep.stragglers == ()
    assert rep.verdict.startswith("2 of 16 ranks present: not judged: insufficient evidence")
    assert "holds the job back" not in rep.verdict and "rebalance" not in rep.verdict
    assert rep.prediction is None
    # the two neighbours read as a two-stage pipeline, said to be of the present ranks only
    assert rep.stages is not None and rep.stages.count == 2
    assert "read from the 2 of 16 ranks present only" in rep.stages.evidence


@pytest.mark.parametrize("keep,named", [(list(range(16)), True), ([r for r in range(16) if r % 4 != 3], True)])
def test_most_of_a_job_still_names_its_straggler(tmp_path, keep, named):
    """12 of 16 ranks (pipeline 3 missing) still name the slow worker; the verdict says what is present."""
    _, rep, _ = _report(DpPpSpec(dp=4, pp=4, slow_rank=6, slow_factor=1.5, seed=1), tmp_path, keep=keep)
    assert [s.rank for s in rep.stragglers] == ([6] if named else [])
    prefix = "" if len(keep) == 16 else f"{len(keep)} of 16 ranks present: "
    assert rep.verdict.startswith(prefix + "rank 6 ")


def test_an_nsys_export_of_two_ranks_claims_no_stage(tmp_path):
    """nsys exports record no world size: ranks 4 and 8 (numbered by their file names) still show that ranks
    are missing, at least 0-3 and 5-7, so neither stage nor straggler is claimed from them."""
    _, rep, _ = _report(DpPpSpec(dp=4, pp=4, slow_stage=1, stage_factor=1.4, seed=2), tmp_path, keep=[4, 8],
                        fmt="nsys")
    ev = rep.evidence
    assert ev is not None and ev.world_size is None and ev.world_at_least == 9 and ev.partial
    assert not ev.stage_claims and not ev.straggler_claims
    assert rep.stage_imbalance is None and rep.stragglers == () and rep.prediction is None
    assert rep.verdict.startswith("2 of at least 9 ranks present: not judged: insufficient evidence")
    assert "holds the job back" not in rep.verdict and "rebalance" not in rep.verdict


@pytest.mark.parametrize("keep,partial", [(list(range(16)), False), ([r for r in range(16) if r % 4 != 3], True)])
def test_an_nsys_export_of_most_of_a_job_names_its_straggler(tmp_path, keep, partial):
    """Every rank, or 12 (pipeline 3 missing: ranks 3, 7, 11 and 15, so at least 15 ranks): the slow worker is
    named; with ranks missing the verdict says so."""
    _, rep, _ = _report(DpPpSpec(dp=4, pp=4, slow_rank=6, slow_factor=1.5, seed=1), tmp_path, keep=keep, fmt="nsys")
    assert rep.evidence is not None and rep.evidence.partial is partial
    assert [s.rank for s in rep.stragglers] == [6]
    assert rep.verdict.startswith(("12 of at least 15 ranks present: " if partial else "") + "rank 6 ")
