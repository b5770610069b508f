"""One class per recurring gap across the ranks of a job (issue 42, ``rules.across``), planted, both formats.

The same per-step batch copy on two ranks: on rank 0 it holds 56-62% of the gap, on rank 1 42-47%, so
each rank alone is on one side of the 50% cover threshold in every step (data-starved on rank 0,
unattributed on rank 1). Kineto writes one file per rank, classified apart; the analysis of the job pools
them; an nsys export holds both ranks and pools them in ``rules.recurring``.
"""

from __future__ import annotations

import numpy as np
import pytest
from tracesynth.kineto_writer import write_kineto
from tracesynth.nsys_writer import write_nsys
from tracesynth.one_time import plant_scenario
from tracesynth.planted import classify_file, confusion, scores, truth_for

from traceread import load
from traceread.analysis import rank_summary
from traceread.config import Thresholds
from traceread.engine.gaps import find_gaps
from traceread.engine.steps import find_steps
from traceread.ranks.section import identities
from traceread.rules import classify
from traceread.rules.across import Classified, pool_traces
from traceread.rules.evidence import with_evidence
from traceread.runner import analyze

CFG = Thresholds()
LONG = 500_000  # the planted copy gaps are 1.2-3.6 ms; every other gap of these traces is under 0.1 ms


def _planted(seed: int, jitter: float = 0.2):
    return plant_scenario("ranks-copy", seed=seed, jitter=jitter, steps=6, ranks=2, uniform=True)


def _copy_gaps(gaps):
    return gaps[gaps["dur_ns"].to_numpy() >= LONG]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_kineto_files_of_a_job_get_one_class_for_the_same_gap(tmp_path, seed):
    planted = _planted(seed)
    paths = write_kineto(planted.scenario, str(tmp_path / "j.rank{rank}.pt.trace.json"))
    truth = planted.truth
    planted_gaps = truth[truth["class"] == "data-starved"].groupby("rank").size().to_dict()
    # each file alone: the threshold splits the ranks
    alone = [_copy_gaps(classify_file(p, CFG)) for p in paths]
    assert [len(a) for a in alone] == [planted_gaps[0], planted_gaps[1]]
    assert set(alone[0]["class"]) == {"data-starved"} and set(alone[1]["class"]) == {"unattributed"}
    assert (alone[1]["memcpy_htod_ns"] / alone[1]["dur_ns"]).between(0.4, 0.5).all()
    # the job: one class on both ranks, scored against the planted intervals
    traces = [load(p) for p in paths]
    a = analyze(traces, cfg=CFG)
    for i, t in enumerate(traces):
        g = a.gaps[a.gaps["trace"].to_numpy() == i].reset_index(drop=True)
        g.attrs["epoch_offset_ns"] = t.meta.epoch_offset_ns or 0
        mat, _ = confusion(g, truth_for(truth, g, planted.scenario.origin_epoch_ns))
        s = scores(mat)
        assert s.loc["data-starved", "recall"] == 1.0 and s.loc["data-starved", "precision"] == 1.0
    both = with_evidence(_copy_gaps(a.gaps), CFG)
    assert set(both["class"]) == {"data-starved"}
    pooled = both["evidence"].str.contains("the same gap on 2 ranks of the job", regex=False).to_numpy()
    # rank 1's gaps say they were classed with the other rank's; rank 0's keep their own evidence alone
    assert pooled.tolist() == (both["trace"].to_numpy() == 1).tolist()
    assert both["evidence"].str.contains("host-to-device copies", regex=False).all()  # each its own facts
    # the per-rank tables read by the job section (a straggler's stated cause) hold the pooled class
    copies1 = int(both.loc[both["trace"] == 1, "dur_ns"].sum())
    assert int(a.steps.loc[a.steps["trace"] == 1, "data_starved_ns"].sum()) >= copies1
    attr = a.attribution[a.attribution["trace"] == 1]  # (steady steps only: the first is left out)
    idle = attr[["data_starved_ns", "unattributed_ns", "launch_bound_ns"]].sum()
    assert idle.idxmax() == "data_starved_ns" and idle["data_starved_ns"] >= 0.5 * copies1
    # the rank digest a straggler's stated cause is read from (its leads' idle by class) has the pooled class
    ident = next(i for i in identities(traces, None) if i.path == traces[1].meta.path)
    digest = rank_summary(a, ident).table("gaps")
    held = digest[(digest["end_ns"] - digest["start_ns"]).to_numpy() >= LONG]
    assert len(held) == len(both[both["trace"] == 1]) and set(held["class"].astype(str)) == {"data-starved"}


def test_an_nsys_export_of_two_ranks_pools_them_in_the_file(tmp_path):
    planted = _planted(0)
    path = write_nsys(planted.scenario, str(tmp_path / "j.sqlite"))
    gaps = _copy_gaps(with_evidence(classify_file(path, CFG), CFG))
    assert sorted(gaps["rank"].unique().tolist()) == [0, 1]
    assert set(gaps["class"]) == {"data-starved"}
    pooled = gaps["evidence"].str.contains("one recurring gap: classed with the", regex=False)
    assert pooled.to_numpy().tolist() == (gaps["rank"].to_numpy() == 1).tolist()


def test_pool_traces_leaves_files_apart_alone_and_clear_evidence_its_own(tmp_path):
    planted = _planted(1, jitter=0.1)
    paths = write_kineto(planted.scenario, str(tmp_path / "j.rank{rank}.pt.trace.json"))
    items = []
    for p in paths:
        t = load(p)
        steps = find_steps(t, CFG).steps
        items.append(Classified(classify(find_gaps(t, steps, CFG), steps, t, CFG, text=False), steps, t))
    # one file: nothing to pool with
    assert pool_traces(items[:1], CFG) == [None]
    out = pool_traces(items, CFG)
    assert out[0] is None  # rank 0's evidence is clear: it keeps its class and its frame
    assert out[1] is not None and len(out[1]) == len(items[1].gaps)
    changed = np.flatnonzero(out[1]["class"].astype(str).to_numpy() != items[1].gaps["class"].astype(str).to_numpy())
    assert len(changed) == len(_copy_gaps(items[1].gaps)) and set(out[1]["class"].iloc[changed]) == {"data-starved"}
    # a band of 0 admits no member near the threshold: nothing moves
    import dataclasses

    assert pool_traces(items, dataclasses.replace(CFG, recurring_near_band=0.0)) == [None, None]
