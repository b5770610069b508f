"""Jobs and stragglers on generated multi-rank jobs with a planted straggler and clock offsets.

The generator (tests/tracesynth/stragglers.py) records each rank on its own clock (offsets of several
ms) and delays one rank before every collective (slower compute, a data stall, launch overhead or a
host sync); its truth
holds the exact offsets and the time the other ranks waited. Checked through the whole pipeline
(write files, load, analyze, summarize, group, align), in both formats.
"""

from __future__ import annotations

import dataclasses
import json
import pickle

import pytest
from tracesynth.stragglers import StragglerSpec, make_job, write_job

from traceread import load
from traceread.analysis import rank_summary
from traceread.cli import main
from traceread.ranks import analyze_job, group_jobs, identify
from traceread.runner import analyze


def _run(spec: StragglerSpec, tmp_path, fmt: str = "kineto"):
    job = make_job(spec)
    paths = write_job(job, str(tmp_path), fmt)
    traces = [load(p) for p in paths]
    analysis = analyze(traces)
    ids = [i for t in traces for i in identify(t)]
    groups = group_jobs(ids)
    summaries = [rank_summary(analysis, i) for i in ids]
    return job, groups, summaries, analyze_job(summaries, group=groups[0]), analysis


def _check_offsets(job, report, tol_ns: int = 50_000) -> None:
    got = {a.rank: a.offset_ns for a in report.alignment}
    for r, want in enumerate(job.truth["offsets_ns"]):
        assert abs(got[r] - want) <= tol_ns, (r, got[r], want)


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
@pytest.mark.parametrize("mechanism,cause", [("compute", "compute"), ("data", "data-starved"),
                                             ("launch", "launch-bound"), ("sync", "sync-stall")])
def test_planted_straggler_found_with_rank_wait_and_reason(tmp_path, fmt, mechanism, cause):
    spec = StragglerSpec(mechanism=mechanism, straggler=2, delay_ns=400_000, seed=3)
    job, groups, _, rep, _ = _run(spec, tmp_path, fmt)
    assert len(groups) == 1 and groups[0].ranks == (0, 1, 2, 3) and not groups[0].missing_ranks
    _check_offsets(job, rep)
    assert [s.rank for s in rep.stragglers] == [2]
    s = rep.stragglers[0]
    truth = job.truth["waited_on_ns"][2]
    assert abs(s.waited_on_ns - truth) <= 0.05 * truth
    assert s.last_arrivals == job.truth["last_arrivals"][2]
    assert s.cause == cause
    assert abs(s.median_lateness_ns - spec.delay_ns) <= 0.05 * spec.delay_ns
    # the others' comm-bound time inside their waits is named as waiting for the straggler
    assert s.others_comm_bound_waiting_ns > 0.9 * truth


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_balanced_job_names_no_straggler(tmp_path, fmt):
    job, _, _, rep, _ = _run(StragglerSpec(straggler=None, seed=5), tmp_path, fmt)
    _check_offsets(job, rep)
    assert rep.stragglers == ()
    assert rep.verdict.startswith("balanced")
    assert all(r.waits is not None for r in rep.ranks)
    assert sum(r.waits.last_arrivals for r in rep.ranks if r.waits) == rep.matched_collectives  # everyone is last sometimes


@pytest.mark.parametrize("seed,ranks,straggler,delay,offsets,jitter", [
    (11, 8, 5, 250_000, (0, -12_000_000, 25_000_000, 7_300_000, -31_000_000, 40_000, 18_000_000, -2_500_000), 0.05),
    (12, 2, 1, 150_000, (0, 21_000_000), 0.02),
    (13, 4, 0, 1_000_000, (0, 900_000, -600_000, 300_000), 0.10),
])
def test_straggler_under_variation(tmp_path, seed, ranks, straggler, delay, offsets, jitter):
    spec = StragglerSpec(ranks=ranks, straggler=straggler, delay_ns=delay, offsets_ns=offsets, jitter=jitter,
                         seed=seed, steps=6, collectives=3)
    job, _, _, rep, _ = _run(spec, tmp_path)
    _check_offsets(job, rep)
    assert [s.rank for s in rep.stragglers] == [straggler]
    truth = job.truth["waited_on_ns"][straggler]
    assert abs(rep.stragglers[0].waited_on_ns - truth) <= 0.05 * truth


def test_small_imbalance_is_not_named(tmp_path):
    """A delay of a few us per collective costs the others well under the threshold."""
    job, _, _, rep, _ = _run(StragglerSpec(straggler=1, delay_ns=4_000, jitter=0.0, seed=2), tmp_path)
    assert rep.stragglers == ()
    waited = {r.rank: r.waits.waited_on_ns for r in rep.ranks if r.waits}
    assert len(waited) == len(rep.ranks)
    assert waited[1] == max(waited.values())  # measured, just not significant


def test_summaries_are_small_and_picklable(tmp_path):
    _, groups, summaries, rep, _ = _run(StragglerSpec(seed=1), tmp_path)
    back = pickle.loads(pickle.dumps((summaries, groups)))
    again = analyze_job(back[0], group=back[1][0])
    assert again.to_dict() == rep.to_dict()
    json.dumps(rep.to_dict())  # plain data
    assert len(pickle.dumps(summaries[0])) < 200_000


def test_analyze_reports_the_job_section(tmp_path):
    job = make_job(StragglerSpec(mechanism="data", seed=4))
    paths = write_job(job, str(tmp_path), "kineto")
    out_json, out_md = tmp_path / "r.json", tmp_path / "r.md"
    assert main(["analyze", *paths, "--json", str(out_json), "-o", str(out_md)]) == 0
    doc = json.loads(out_json.read_text())
    assert doc["job"]["separate"] is False and len(doc["job"]["groups"]) == 1
    rep = doc["job"]["groups"][0]["report"]
    assert [s["rank"] for s in rep["stragglers"]] == [2] and rep["stragglers"][0]["cause"] == "data-starved"
    md = out_md.read_text()
    assert "## Job" in md and "#### Stragglers" in md and "data stall" in md
    assert "waiting for straggler rank 2" in md  # comm-bound named for what it is


def test_two_captures_80_minutes_apart_are_not_blended(tmp_path):
    first = StragglerSpec(ranks=2, straggler=None, offsets_ns=(0, 2_000_000), seed=6)
    second = dataclasses.replace(first, seed=7, origin_epoch_ns=first.origin_epoch_ns + 80 * 60 * 10**9)
    paths = write_job(make_job(first), str(tmp_path), "kineto", stem="morning")
    paths += write_job(make_job(second), str(tmp_path), "kineto", stem="later")
    out_json, out_md = tmp_path / "r.json", tmp_path / "r.md"
    assert main(["analyze", *paths, "--json", str(out_json), "-o", str(out_md)]) == 0
    doc = json.loads(out_json.read_text())
    job = doc["job"]
    assert job["separate"] is True
    groups = job["groups"]
    assert [len(g["members"]) for g in groups] == [2, 2] and all(g["world_size"] == 2 for g in groups)
    assert {tuple(g["ranks"]) for g in groups} == {(0, 1)} and not any(g["duplicate_ranks"] for g in groups)
    assert all(any("(80 min) apart" in e and "not blended" in e for e in g["evidence"]) for g in groups)
    assert all(g["report"]["stragglers"] == [] for g in groups)
    assert "separate jobs or captures" in out_md.read_text()


def test_rank_pattern_option_groups_files_named_otherwise(tmp_path):
    """nsys exports with one process each carry no rank: the file name must say it."""
    import os

    paths = write_job(make_job(StragglerSpec(ranks=2, straggler=1, seed=8)), str(tmp_path), "nsys")
    renamed = []
    for p in paths:
        r = p.rsplit(".rank", 1)[1].split(".")[0]
        new = os.path.join(str(tmp_path), f"node-gpu{r}.sqlite")
        os.rename(p, new)
        renamed.append(new)
    out = tmp_path / "r.json"
    assert main(["analyze", *renamed, "--json", str(out), "-o", str(tmp_path / "r.md")]) == 0
    job = json.loads(out.read_text())["job"]
    assert job["separate"] and all(g["rule"] == "single" and g["ranks"] == [] for g in job["groups"])
    assert main(["analyze", *renamed, "--json", str(out), "-o", str(tmp_path / "r.md"),
                 "--rank-pattern", r"gpu(?P<rank>\d+)"]) == 0
    job = json.loads(out.read_text())["job"]
    (g,) = job["groups"]
    assert g["rule"] == "filename" and g["ranks"] == [0, 1]
    assert [s["rank"] for s in g["report"]["stragglers"]] == [1]
    assert main(["analyze", *renamed, "--rank-pattern", r"gpu(\d+)"]) == 2


def test_one_nsys_export_holding_every_rank(tmp_path):
    """One export: its processes are the ranks, on one clock (offset 0 exactly, not estimated)."""
    job = make_job(StragglerSpec(mechanism="sync", straggler=1, offsets_ns=(0,), seed=9))
    (path,) = write_job(job, str(tmp_path), "nsys-one")
    trace = load(path)
    ids = identify(trace)
    assert [(i.rank, i.rank_source, i.member) for i in ids] == [(r, "nsys-process", r) for r in range(4)]
    analysis = analyze([trace])
    rep = analysis.job.reports[0]
    assert all(a.offset_ns == 0 for a in rep.alignment)
    assert all(a.method.startswith("shared clock") for a in rep.alignment[1:])
    (s,) = rep.stragglers
    truth = job.truth["waited_on_ns"][1]
    assert s.rank == 1 and s.cause == "sync-stall" and abs(s.waited_on_ns - truth) <= 0.05 * truth
    direct = rank_summary(analysis, ids[1])  # what a scan worker computes for one rank
    assert len(direct.collectives["end_ns"]) == 32 and direct.identity.rank == 1
