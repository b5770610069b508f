"""Jobs in ``traceread scan``: traces grouped by traceread.ranks, stragglers and clock offsets found.

The tree holds a 4-rank Kineto job with a planted straggler (a data stall before each collective,
clock offsets of several ms between ranks), a balanced 2-rank nsys job (one export per rank), and
the same kind of job name in two directories (they stay two jobs).
"""

from __future__ import annotations

import json
from importlib import resources

import jsonschema
import pyarrow.parquet as pq
import pytest
from tracesynth.stragglers import StragglerSpec, make_job, write_job

from traceread.cli import main

# One xdist worker runs this module's tests (tests/conftest.py ONE_WORKER_MODULES): its module-scoped ``scanned`` is made once.

@pytest.fixture(scope="module")
def scanned(tmp_path_factory):
    root = tmp_path_factory.mktemp("jobs") / "runs"
    slow = make_job(StragglerSpec(ranks=4, steps=6, straggler=1, delay_ns=500_000, mechanism="data", seed=2))
    (root / "team-a" / "llm").mkdir(parents=True)
    write_job(slow, str(root / "team-a" / "llm"), "kineto", stem="train")
    balanced = make_job(StragglerSpec(ranks=2, steps=6, straggler=None, delay_ns=0, seed=3))
    (root / "team-b" / "vision").mkdir(parents=True)
    write_job(balanced, str(root / "team-b" / "vision"), "nsys", stem="train")
    out = tmp_path_factory.mktemp("out") / "scan"
    assert main(["scan", str(root), "--out", str(out), "--workers", "2"]) == 0
    index = json.loads((out / "index.json").read_text())
    jobs = {j["job"]: json.loads((out / j["link_json"]).read_text()) for j in index["jobs"]}
    return out, index, jobs, slow.truth, balanced.truth


def _job(jobs, directory):
    (j,) = [j for name, j in jobs.items() if name.startswith(directory + "/")]
    return j


def test_ranks_of_one_job_are_grouped(scanned):
    _, index, jobs, _, _ = scanned
    assert len(jobs) == 2
    schema = json.loads(resources.files("traceread").joinpath("data/job.schema.json").read_text("utf-8"))
    for j in jobs.values():
        jsonschema.validate(j, schema)
    jsonschema.validate(index, json.loads(resources.files("traceread").joinpath("data/index.schema.json")
                                          .read_text("utf-8")))
    slow = _job(jobs, "team-a/llm")
    assert sorted(t["ranks"][0] for t in slow["traces"]) == [0, 1, 2, 3]
    assert slow["world_size"] == 4 and slow["group"]["missing_ranks"] == []
    vision = _job(jobs, "team-b/vision")  # nsys exports name no world size: grouped by file name
    assert sorted(t["ranks"][0] for t in vision["traces"]) == [0, 1] and vision["group"]["rule"]
    by_trace = {t["trace_id"]: t["job"] for t in index["traces"]}
    assert set(by_trace.values()) == set(jobs)
    traces = pq.read_table(scanned[0] / "traces.parquet").to_pandas()
    assert dict(zip(traces["trace_id"], traces["job"], strict=True)) == by_trace


def test_planted_straggler_found_with_its_wait_and_reason(scanned):
    out, index, jobs, truth, _ = scanned
    slow = _job(jobs, "team-a/llm")
    assert slow["stragglers"], slow["verdict"]
    top = slow["stragglers"][0]
    r = truth["straggler"]
    assert top["rank"] == r
    assert top["waited_on_ns"] == pytest.approx(truth["waited_on_ns"][r], rel=0.05)
    assert "data" in (top["cause"] + top["reason"]).lower()
    offsets = {a["rank"]: a["offset_ns"] for a in slow["alignment"]}
    for rank, want in enumerate(truth["offsets_ns"]):
        assert abs(offsets[rank] - want) <= 50_000, (rank, offsets[rank], want)
    row = next(j for j in index["jobs"] if j["job"] == slow["job"])
    assert row["stragglers"][0]["rank"] == r
    md = (out / row["link_md"]).read_text()
    assert "Stragglers" in md and f"Rank {r}" in md


def test_balanced_job_names_no_straggler(scanned):
    _, _, jobs, _, _ = scanned
    assert _job(jobs, "team-b/vision")["stragglers"] == []
