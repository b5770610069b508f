"""``traceread scan --dask local`` (a 2-worker LocalCluster) gives the same outputs as the local pool."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from scan_tree import make_tree

from traceread.cli import main

pytest.importorskip("distributed")


def _outputs(out):
    files = {p.relative_to(out).as_posix(): p for p in out.rglob("*") if p.is_file()
             and ".traceread-cache" not in p.parts}
    docs = {}
    for rel, p in files.items():
        if rel.endswith(".parquet"):  # row groups come in the order directories finish: compare as sets
            docs[rel] = sorted(pq.read_table(p).to_pylist(), key=lambda r: json.dumps(r, sort_keys=True, default=str))
        elif rel == "index.json":
            d = json.loads(p.read_text())
            d["scan"].pop("seconds")
            docs[rel] = d
        else:
            docs[rel] = p.read_bytes()
    return docs


def test_dask_local_cluster_equals_local_pool(tmp_path):
    tree = make_tree(tmp_path / "runs", seed=5)
    assert main(["scan", str(tree), "--out", str(tmp_path / "pool"), "--workers", "2"]) == 0
    assert main(["scan", str(tree), "--out", str(tmp_path / "dask"), "--workers", "2", "--dask", "local"]) == 0
    pool, dask = _outputs(tmp_path / "pool"), _outputs(tmp_path / "dask")
    assert sorted(pool) == sorted(dask)
    assert any(k.startswith("traces/") for k in pool)
    for k in pool:
        assert pool[k] == dask[k], k


def test_existing_cluster_by_address_and_scheduler_file(tmp_path):
    from distributed import LocalCluster

    tree = make_tree(tmp_path / "runs", seed=6)
    assert main(["scan", str(tree / "jobK"), "--out", str(tmp_path / "pool"), "--workers", "1"]) == 0
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        address = cluster.scheduler_address
        assert address.startswith("tcp://")
        sched = tmp_path / "scheduler.json"
        sched.write_text(json.dumps({"type": "Scheduler", "address": address}))
        assert main(["scan", str(tree / "jobK"), "--out", str(tmp_path / "tcp"), "--dask", address]) == 0
        assert main(["scan", str(tree / "jobK"), "--out", str(tmp_path / "file"), "--dask", str(sched)]) == 0
    pool = _outputs(tmp_path / "pool")
    assert pool == _outputs(tmp_path / "tcp") == _outputs(tmp_path / "file")
