"""One verdict per scope: the same files get the same verdict from every command that speaks for them.

A trace's verdict: ``analyze TRACE``, the scan row of that trace, a ``diff`` side that is that
file, and ``traceread.analyze(path)``. A job's: ``analyze`` of its files together (and of their
directory), the scan row of the job, a ``diff`` side that is the job's directory, and
``traceread.analyze(directory)``. Every output also says which scope it speaks for.

The job is generated with a straggler whose rank waits on data while the others wait on it in
collectives, so ranks' own verdicts differ from the job's (the case where outputs once disagreed);
the two ranks of the real sampled 128-rank job are checked too when ../shared is present.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import SHARED_TRACES, needs_shared
from tracesynth.stragglers import StragglerSpec, make_job, write_job

import traceread
from traceread.cli import main


def _analyze_json(capsys, *paths: str) -> dict:
    assert main(["analyze", *paths, "--json", "-"]) == 0
    return json.loads(capsys.readouterr().out)


def _diff_json(capsys, before: str, after: str) -> dict:
    assert main(["diff", before, after, "--json", "-"]) == 0
    return json.loads(capsys.readouterr().out)


def _key(cause: str, share: float) -> tuple[str, float]:
    return cause, round(float(share), 9)


def _check_scopes(job_dir: Path, tmp: Path, capsys) -> None:
    files = sorted(str(p) for p in job_dir.iterdir())
    assert len(files) >= 2
    # Per trace: analyze alone and the Python API.
    alone = {}
    for f in files:
        doc = _analyze_json(capsys, f)
        assert doc["verdict_scope"]["kind"] == "trace" and doc["verdict_scope"]["traces"] == 1
        alone[Path(f).name] = _key(doc["dominant_cause"], doc["dominant_cost_share"])
        rep = traceread.analyze(f)
        assert _key(rep.verdict.cause, rep.verdict.share) == alone[Path(f).name]
        assert rep.scope.kind == "trace"
    # The job: its files together, its directory, the API on the directory and on the list.
    together = _analyze_json(capsys, *files)
    assert together["verdict_scope"]["kind"] == "job" and together["verdict_scope"]["traces"] == len(files)
    job = _key(together["dominant_cause"], together["dominant_cost_share"])
    as_dir = _analyze_json(capsys, str(job_dir))
    assert _key(as_dir["dominant_cause"], as_dir["dominant_cost_share"]) == job
    of_list = traceread.analyze(files)
    for rep in (traceread.analyze(str(job_dir)), of_list, traceread.analyze(traceread.load(files))):
        assert _key(rep.verdict.cause, rep.verdict.share) == job and rep.scope.kind == "job"
    # Each rank's own verdict (the per-rank rows) is the verdict of its trace alone (the rows of the
    # list's report above, not of a second analysis of the same list).
    ranks = of_list.rank_verdicts()
    for _, r in ranks.iterrows():
        assert _key(r["cause"], r["share"]) == alone[Path(r["path"]).name]
    # Scan: trace rows and the job row.
    out = tmp / "scan"
    assert main(["scan", str(job_dir), "--out", str(out), "--workers", "1", "--no-cache"]) == 0
    capsys.readouterr()
    index = json.loads((out / "index.json").read_text())
    assert len(index["jobs"]) == 1
    (row,) = index["jobs"]
    assert _key(row["dominant_cause"], row["dominant_cost_share"]) == job
    for t in index["traces"]:
        assert _key(t["dominant_cause"], t["dominant_cost_share"]) == alone[Path(t["path"]).name]
    text = (out / "index.md").read_text()
    assert "Verdict of the job" in text and "Verdict of the trace" in text
    # Diff: a file against the job's directory.
    d = _diff_json(capsys, files[0], str(job_dir))
    assert _key(d["before"]["dominant_cause"], d["before"]["dominant_cost_share"]) == alone[Path(files[0]).name]
    assert _key(d["after"]["dominant_cause"], d["after"]["dominant_cost_share"]) == job
    assert d["before"]["verdict_scope"] == "trace" and d["after"]["verdict_scope"] == "job"
    # The Markdown says which scope it speaks for.
    assert main(["analyze", *files]) == 0
    md = capsys.readouterr().out
    verdict = md.split("## Verdict", 1)[1].split("\n## ", 1)[0]
    assert "This verdict is for the job" in verdict
    assert "Verdict of the rank/GPU" in md


def test_generated_job_one_verdict_per_scope(tmp_path: Path, capsys) -> None:
    job = make_job(StragglerSpec(ranks=3, steps=6, straggler=1, delay_ns=2_000_000, mechanism="data", seed=4))
    d = tmp_path / "job"
    d.mkdir()
    write_job(job, str(d), "kineto", stem="train")
    _check_scopes(d, tmp_path, capsys)


@needs_shared
def test_sampled_128_rank_job_one_verdict_per_scope(tmp_path: Path, capsys) -> None:
    d = tmp_path / "sampled"
    d.mkdir()
    for r in (0, 1):
        src = SHARED_TRACES / "kineto" / f"hta_sampled_rank{r}of128.json.gz"
        if not src.is_file():
            pytest.skip(f"{src.name} not in the reference set")
        shutil.copy(src, d / src.name)
    _check_scopes(d, tmp_path, capsys)
