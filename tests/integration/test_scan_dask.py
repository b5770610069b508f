"""``traceread scan --dask local`` (a 2-worker LocalCluster) gives the same outputs as the local pool."""

from __future__ import annotations

import json
import sys
import time

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


def _slow_down(rel: str, seconds: float) -> None:
    """Make the analysis of ``rel`` sleep first (in this process, hence in forked pool workers)."""
    from traceread.scan import work

    original = work._analyse

    def slow(task, settings, out, *rest):
        if task.rel == rel:
            time.sleep(seconds)
        return original(task, settings, out, *rest)

    work._analyse = slow


def test_trace_timeout_on_dask_fails_the_slow_file_and_the_rest_equal_the_pool(tmp_path, monkeypatch):
    import shutil

    import cloudpickle
    from distributed import Client, LocalCluster

    full = make_tree(tmp_path / "full", seed=8)
    tree = tmp_path / "runs"
    for d in ("jobK", "nsys"):
        shutil.copytree(full / d, tree / d)
    # The limit is waited out twice (pool, then Dask); the other two files analyse in well under a second
    # (~0.3-0.6 s CPU each), so 5 s keeps a wide margin against a loaded machine, and the 300 s sleep far past it.
    slow_rel, limit = "jobK/train.rank1.pt.trace.json.gz", "5"
    from traceread.scan import work

    monkeypatch.setattr(work, "_analyse", work._analyse)  # undone after the test
    _slow_down(slow_rel, 300)
    assert main(["scan", str(tree), "--out", str(tmp_path / "pool"), "--workers", "2", "--trace-timeout", limit]) == 0
    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import this test module
    try:
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
                Client(cluster) as client:
            client.run(_warm_and_slow_down, slow_rel, 300)
            t0 = time.monotonic()
            assert main(["scan", str(tree), "--out", str(tmp_path / "dask"), "--dask", cluster.scheduler_address,
                         "--trace-timeout", limit]) == 0
            took = time.monotonic() - t0
            assert len(client.scheduler_info()["workers"]) == 2  # the stopped worker was replaced
    finally:
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    assert took < 120, "the slow file's 300 s sleep was not stopped"
    pool, dask = _outputs(tmp_path / "pool"), _outputs(tmp_path / "dask")
    (failure,) = pool["index.json"]["failures"]
    assert failure == {"path": slow_rel, "kind": "failed",
                       "problem": f"took longer than --trace-timeout {limit} s; its worker was stopped and replaced"}
    assert sorted(t["path"] for t in pool["index.json"]["traces"]) == ["jobK/train.rank0.pt.trace.json",
                                                                       "nsys/run.sqlite"]
    assert sorted(pool) == sorted(dask)
    for k in pool:
        assert pool[k] == dask[k], k


def _warm_and_slow_down(rel: str, seconds: float) -> None:
    """On a Dask worker: import the analysis (a first task's import is not the file's time), then slow ``rel``."""
    import traceread.analysis  # noqa: F401
    import traceread.loaders  # noqa: F401
    import traceread.render.markdown  # noqa: F401

    _slow_down(rel, seconds)
