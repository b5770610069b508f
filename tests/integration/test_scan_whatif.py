"""``scan`` ranks a fleet by what fixing would save: the index's and traces.parquet's what-if figures are
the analyze report's own predictions, and a re-scan from the cache gives the same."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import jsonschema
import pyarrow.parquet as pq
from tracesynth.kineto_writer import write_kineto
from tracesynth.planted import PlantSpec, plant

from traceread.cli import main
from traceread.scan.whatifcols import column
from traceread.vocabulary import GAP_CLASSES


def _weights(**w: float) -> dict[str, float]:
    return {c: w.get(c.replace("-", "_"), 0.0) for c in GAP_CLASSES}


def _tree(root: Path) -> dict[str, Path]:
    """Two jobs: one data-starved, one launch-bound (one directory each)."""
    out = {}
    for name, weights in (("starved", _weights(data_starved=2.0)), ("launchy", _weights(launch_bound=3.0))):
        (root / name).mkdir(parents=True)
        path = root / name / "rank0.pt.trace.json"
        write_kineto(plant(PlantSpec(seed=3, ranks=1, steps=10, jitter=0.1, weights=weights, paired=True)).scenario,
                     str(path))
        out[name] = path
    return out


def _schema(name: str) -> dict:
    return json.loads(resources.files("traceread").joinpath(f"data/{name}").read_text("utf-8"))


def test_index_and_parquet_carry_each_fix_saving_as_analyze_predicts_it(tmp_path) -> None:
    paths = _tree(tmp_path / "runs")
    out = tmp_path / "scan"
    assert main(["scan", str(tmp_path / "runs"), "--out", str(out), "--workers", "1"]) == 0
    doc = json.loads((out / "index.json").read_text())
    jsonschema.validate(doc, _schema("index.schema.json"))
    rows = {Path(t["path"]).parent.name: t for t in doc["traces"]}
    table = pq.read_table(out / "traces.parquet").to_pandas()
    best = {}
    for name, path in paths.items():
        single = tmp_path / f"{name}.json"
        assert main(["analyze", str(path), "--json", str(single), "-o", str(tmp_path / f"{name}.md")]) == 0
        report = json.loads(single.read_text())
        w, row = report["whatif"], rows[name]
        assert row["whatif"] is not None
        preds = {p["fix"]: p for p in w["fixes"] + ([w["all_fixed"]] if w["all_fixed"] else [])}
        assert set(row["whatif"]["saving_ns"]) == set(preds)
        for fix, p in preds.items():  # the same prediction as the report, per fix
            assert row["whatif"]["saving_ns"][fix] == p["saving_ns"], fix
            if p["saving_share"] is not None:
                assert row["whatif"]["recoverable_ns"][fix] == max(0, round(p["saving_share"] * row["gpu_ns"]))
        assert row["whatif"]["dependency_error"] == w["dependency_error"]
        mine = table[table["trace_id"] == row["trace_id"]]
        for fix, ns in row["whatif"]["recoverable_ns"].items():  # the rows of a trace sum to its figure
            assert abs(int(mine[column(fix)].sum()) - ns) <= len(mine), fix
        best[name] = row["whatif"]["best_fix"]
        job = next(j for j in doc["jobs"] if row["trace_id"] in j["trace_ids"])
        assert job["whatif"]["recoverable_ns"] == row["whatif"]["recoverable_ns"]  # one trace per job
        job_doc = json.loads((out / job["link_json"]).read_text())
        jsonschema.validate(job_doc, _schema("job.schema.json"))
    assert best == {"starved": "data-starved", "launchy": "launch-bound"}  # each job's planted lever
    assert "Best fix (GPU-s saved)" in (out / "index.md").read_text()

    # a re-scan reads every trace from the cache: the same figures
    assert main(["scan", str(tmp_path / "runs"), "--out", str(out), "--workers", "1"]) == 0
    again = json.loads((out / "index.json").read_text())
    assert [t["whatif"] for t in again["traces"]] == [t["whatif"] for t in doc["traces"]]
    assert [j["whatif"] for j in again["jobs"]] == [j["whatif"] for j in doc["jobs"]]
