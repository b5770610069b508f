"""A scan's parent grows by index rows, not per-trace objects, and its parquet row groups are sized by
rows, not one per trace (a row group per tiny trace made the footer most of traces.parquet)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import msgspec
import pyarrow.parquet as pq
import pytest
from tracesynth.kineto_writer import write_kineto
from tracesynth.planted import PlantSpec, plant

from traceread.scan import ScanOptions, scan
from traceread.scan import outputs as scan_outputs
from traceread.scan import tables as scan_tables
from traceread.scan.index import worst_first
from traceread.scan.jobs import job_row
from traceread.scan.outputs import IndexRow

JOBS = 3


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tiny") / "tree"
    for i in range(JOBS):  # a 2-rank job of 3 steps per folder, ~30 KB a trace
        (root / f"job{i}").mkdir(parents=True)
        write_kineto(plant(PlantSpec(seed=11 + i, ranks=2, steps=3)).scenario,
                     str(root / f"job{i}" / "train.rank{rank}.pt.trace.json"))
    return root


def _groups(path: Path) -> list[int]:
    meta = pq.ParquetFile(path).metadata
    return [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]


def test_row_groups_are_sized_by_rows_not_one_per_trace(tree, tmp_path, monkeypatch):
    out = tmp_path / "o"
    scan(ScanOptions(roots=[str(tree)], out=str(out), workers=1, progress=False))
    index = json.loads((out / "index.json").read_text())
    assert len(index["traces"]) == 2 * JOBS
    for name in ("gaps", "steps", "traces"):  # every table of the scan: one row group, whatever the traces
        assert _groups(out / f"{name}.parquet") == [index["scan"]["tables"][name]], name
    monkeypatch.setattr(scan_tables, "ROW_GROUP_ROWS", 4)
    small = tmp_path / "small"
    scan(ScanOptions(roots=[str(tree)], out=str(small), workers=1, progress=False, use_cache=False))
    for name in ("gaps", "steps", "traces"):
        rows = json.loads((small / "index.json").read_text())["scan"]["tables"][name]
        groups = _groups(small / f"{name}.parquet")
        assert sum(groups) == rows and len(groups) == math.ceil(rows / 4), (name, groups)
        assert all(g == 4 for g in groups[:-1]), (name, groups)
        # the same rows as written in one group
        assert pq.read_table(small / f"{name}.parquet").to_pylist() == pq.read_table(out / f"{name}.parquet").to_pylist()


def test_the_parent_keeps_index_rows_not_outcomes_or_job_reports(tree, tmp_path, monkeypatch):
    kept = {}
    real = scan_outputs.ScanOutputs.finish

    def finish(self):
        kept["done"], kept["jobs"], kept["cache_jobs"] = dict(self.done), list(self.jobs), dict(self.cache._jobs())
        return real(self)

    monkeypatch.setattr(scan_outputs.ScanOutputs, "finish", finish)
    out = tmp_path / "o"
    res = scan(ScanOptions(roots=[str(tree)], out=str(out), workers=1, progress=False))
    # every analysed trace is an encoded index row once its folder's jobs and table rows are written
    assert len(kept["done"]) == 2 * JOBS and all(isinstance(o, IndexRow) for o in kept["done"].values())
    assert all(isinstance(o.data, bytes) and len(o.data) < 4096 for o in kept["done"].values())
    # jobs: their index rows (the whole reports are in jobs/), and the cache holds them encoded until it
    # writes them
    reports = {j["file"]: json.loads((out / "jobs" / f"{j['file']}.json").read_text()) for j in res.jobs}
    assert len(reports) == JOBS and "traces" in next(iter(reports.values()))
    assert all(set(j) == set(job_row(reports[j["file"]])) and "traces" not in j for j in kept["jobs"])
    assert all(isinstance(v, bytes) for v in kept["cache_jobs"].values())  # encoded, compressed
    assert len(msgspec.msgpack.decode((out / ".traceread-cache" / "jobs.msgpack").read_bytes())["dirs"]) == JOBS
    # index.json, written row by row, is the worst-first list of exactly those rows
    index = json.loads((out / "index.json").read_text())
    rows = [o.row() for o in kept["done"].values()]
    assert index["traces"] == worst_first(rows, "trace_id")
    md = (out / "index.md").read_text()
    assert all(f"]({r['link_md']})" in md for r in rows)
