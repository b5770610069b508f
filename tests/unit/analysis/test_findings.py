"""The analysis' findings (``Analysis.findings``), the job report's typed results and the notes as data:
what the renderers format, checked against independent counts and the paths they replaced."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import FIXTURES

import traceread
from traceread.note import STRAGGLER_COMM_BOUND, WAITING_FOR, Note
from traceread.ranks.align import RankAlignment
from traceread.ranks.results import (
    JobRank,
    JobStep,
    JobStepRow,
    RankWaits,
    StageImbalance,
    Straggler,
    WaitingFor,
)
from traceread.render import notes
from traceread.rules.evidence import evidence_text
from traceread.runner import analyze

ALEXNET = FIXTURES / "hta_alexnet_a100.json.gz"
RESNET = FIXTURES / "kineto2021_resnet50_bare_list.pt.trace.json.gz"


@pytest.fixture(scope="module")
def one():
    return analyze([traceread.load(str(ALEXNET))])


def test_largest_gaps_are_the_longest_judged_ones_with_their_sentences(one) -> None:
    found = one.findings.largest_gaps()
    dur = one.gaps["dur_ns"].to_numpy()
    judged = np.sort(dur[dur >= one.cfg.min_judged_gap_ns])[::-1]
    assert found.total == len(one.gaps)
    assert found.rows["dur_ns"].tolist() == judged[:one.top_gaps].tolist()  # longest first, counted apart
    assert found.unlisted == (len(dur) - len(judged) if len(judged) < one.top_gaps else 0)
    # each row's sentence is the one the rules make for that gap
    at = np.flatnonzero(one.gaps.index.isin(found.rows.index))
    want = dict(zip(one.gaps.index[at], evidence_text(one.gaps, at, one.cfg), strict=True))
    assert [want[i] for i in found.rows.index] == found.rows["evidence"].tolist()
    assert all(found.rows["evidence"]) and not any(c.startswith("evidence.") for c in found.rows.columns)


def test_evidence_chunks_give_the_sentences_of_every_gap(one) -> None:
    chunks = one.findings.evidence_chunks()
    n = len(one.gaps)
    assert len(chunks) == n and chunks(0, n).tolist() == evidence_text(one.gaps, None, one.cfg).tolist()


def test_each_units_verdict_is_the_one_its_trace_gets_alone(one) -> None:
    """Two inputs analysed together: each unit's own verdict is the verdict of its trace analysed alone
    (one unit: the run's verdict, by ``attribution.table_verdict``)."""
    both = analyze([traceread.load(str(ALEXNET)), traceread.load(str(RESNET))])
    resnet = analyze([traceread.load(str(RESNET))])
    verdicts = both.findings.unit_verdicts()
    assert len(verdicts) == len(both.attribution) == 2
    for v, alone in zip(verdicts, (one, resnet), strict=True):
        assert (v.cause, v.share) == (alone.dominant_cause, pytest.approx(alone.dominant_cost_share))


def test_findings_follow_a_replaced_analysis(one) -> None:
    fewer = dataclasses.replace(one, top_gaps=3)
    assert len(fewer.findings.largest_gaps().rows) == 3


def test_notes_are_worded_by_the_renderers() -> None:
    comm = Note.of(STRAGGLER_COMM_BOUND, job="job", rank=2, cause="data-starved", waiting_ns=1_234_567)
    assert notes.text(comm) == ("comm-bound: 1.235 ms of the comm-bound time on the other ranks of job is waiting "
                                "for straggler rank 2 (data-starved), not slow interconnect (see the job section)")
    stage = Note.of(WAITING_FOR, idle_class="pipeline-bubble", share=0.62, job="j", waits_on="stage", who=3)
    assert notes.text(stage).startswith("pipeline-bubble: 62% of the pipeline-bubble time on the other ranks of j "
                                        "is waiting for pipeline stage 3 (slower than the other stages")
    assert notes.text("as it is") == "as it is"
    assert len({comm, Note.of(STRAGGLER_COMM_BOUND, job="job", rank=2, cause="data-starved",
                              waiting_ns=1_234_567)}) == 1  # equal notes listed once
    with pytest.raises(KeyError):
        notes.text(Note("no-such-kind"))


def test_typed_job_results_give_every_field_in_order() -> None:
    """``to_dict`` holds every field, in the declared order (the JSON report's key order)."""
    s = Straggler(1, 2, 3, 4, 5, 0.5, "compute", "why", "lead", None, {"compute": 1}, {}, 6, 7, 0.25, 8, 9, ("e",))
    names = [f.name for f in dataclasses.fields(Straggler)]
    assert list(s.to_dict()) == names and s.to_dict()["evidence"] == ["e"]
    imb = StageImbalance(3, (6, 7), 10, 8, 0.25, 5, 9, 0.5, "fix")
    assert list(imb.to_dict()) == [f.name for f in dataclasses.fields(StageImbalance)]
    assert imb.to_dict()["ranks"] == [6, 7]
    rank = WaitingFor("rank", rank=2, ranks=(2,))
    assert rank.to_dict() == {"kind": "rank", "rank": 2, "ranks": [2], "class": None, "class_share": None,
                              "class_time_share": None}
    measured = dataclasses.replace(WaitingFor("stage", stage=1, ranks=(2, 3)), cls="pipeline-bubble",
                                   class_time_share=0.4, class_share=0.7, class_waiting_ns=5)
    assert list(measured.to_dict()) == ["kind", "stage", "ranks", "class", "class_share", "class_time_share",
                                        "class_waiting_ns"] and measured.who == 1
    assert WaitingFor("moving", step_culprits={0: 3}).to_dict() == {"kind": "moving", "step_culprits": {0: 3}}
    # a job step without any rank's steps lists no max-rank or spread median (the report's shape since 1.0)
    assert JobStep(0, None, None, ranked=False).to_dict() == {"steps": 0, "median_job_step_ns": None,
                                                             "median_unaligned_job_step_ns": None, "per_step": []}
    row = JobStepRow(3, 10, 11, 9, 1, 2)
    step = JobStep(1, 10, 11, 9, 2, (row,))
    assert list(step.to_dict()) == ["steps", "median_job_step_ns", "median_unaligned_job_step_ns",
                                    "median_max_rank_step_ns", "median_end_spread_ns", "per_step"]
    assert step.to_dict()["per_step"] == [{"step": 3, "job_step_ns": 10, "unaligned_job_step_ns": 11,
                                           "max_rank_step_ns": 9, "slowest_rank": 1, "end_spread_ns": 2}]
    # a rank: its own facts, then its waits and alignment when the job was judged (the merged JSON object)
    bare = JobRank(1, "r1.json", "/x/r1.json", 0, 12)
    assert list(bare.to_dict()) == ["rank", "trace", "path", "device", "collectives"] and bare.stage is None
    judged = dataclasses.replace(bare, waits=RankWaits(2, 30, 40, 1, 0.1, 5, 12),
                                 alignment=RankAlignment(1, 100, 10, "graph", 12, 0, 3))
    got = judged.to_dict()
    assert list(got) == ["rank", "trace", "path", "device", "collectives", *RankWaits.__dataclass_fields__,
                         *[k for k in judged.alignment.to_dict() if k != "rank"]]
    assert got["rank"] == 1 and got["offset_ns"] == 100 and judged.stage == 1
