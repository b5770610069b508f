"""Scan edge cases a first day meets: a worker's slow start-up is not a file's time (local pool and
Dask alike), and a damaged file of a known format is a failure that --strict catches."""

from __future__ import annotations

import json
import shutil

import pytest
from scan_tree import make_tree

from traceread.cli import main
from traceread.loaders import load
from traceread.scan.work import SLOW_START_ENV

# The start-up sleeps past the limit (counted, every file would fail); the files are tiny (two ranks of
# a few kernels: analysed in well under a second even on a loaded machine), far inside the limit.
# Three scans wait out the start-up: 6 s/4 s (was 12/8) keeps both margins and saves ~18 s of sleeping.
START_S, LIMIT_S = "6", "4"


def _tiny_tree(tmp_path):
    from tracesynth.stragglers import StragglerSpec, make_job, write_job

    tree = tmp_path / "tiny"
    (tree / "job").mkdir(parents=True)
    write_job(make_job(StragglerSpec(ranks=2, steps=3, collectives=1, kernels=2)), str(tree / "job"))
    return tree


def _small_tree(tmp_path):
    full = make_tree(tmp_path / "full", seed=9)
    tree = tmp_path / "runs"
    for d in ("jobK", "nsys"):
        shutil.copytree(full / d, tree / d)
    return tree


def _index(out) -> dict:
    return json.loads((out / "index.json").read_text())


def test_slow_worker_start_up_does_not_count_against_trace_timeout(tmp_path, monkeypatch):
    tree = _tiny_tree(tmp_path)
    monkeypatch.setenv(SLOW_START_ENV, START_S)  # forked workers inherit it
    assert main(["scan", str(tree), "--out", str(tmp_path / "pool"), "--workers", "2",
                 "--trace-timeout", LIMIT_S, "--strict"]) == 0
    doc = _index(tmp_path / "pool")
    assert doc["failures"] == [] and len(doc["traces"]) == 2


def test_dask_and_pool_agree_at_a_short_timeout_with_a_slow_start_up(tmp_path, monkeypatch):
    pytest.importorskip("distributed")
    from test_scan_dask import _outputs

    tree = _tiny_tree(tmp_path)
    monkeypatch.setenv(SLOW_START_ENV, START_S)  # the LocalCluster's worker processes inherit it
    assert main(["scan", str(tree), "--out", str(tmp_path / "pool"), "--workers", "2",
                 "--trace-timeout", LIMIT_S]) == 0
    assert main(["scan", str(tree), "--out", str(tmp_path / "dask"), "--workers", "2", "--dask", "local",
                 "--trace-timeout", LIMIT_S]) == 0
    pool, dask = _outputs(tmp_path / "pool"), _outputs(tmp_path / "dask")
    assert pool["index.json"]["failures"] == [] and len(pool["index.json"]["traces"]) == 2
    assert sorted(pool) == sorted(dask)
    for k in pool:
        assert pool[k] == dask[k], k


def test_damaged_files_of_known_formats_are_failures_and_strict_fails(tmp_path, capsys):
    tree = _small_tree(tmp_path)
    k0 = (tree / "jobK" / "train.rank0.pt.trace.json").read_bytes()
    export = (tree / "nsys" / "run.sqlite").read_bytes()
    (tree / "cut").mkdir()
    (tree / "cut" / "early.pt.trace.json").write_bytes(k0[: len(k0) // 3])
    (tree / "cut" / "half.sqlite").write_bytes(export[: len(export) // 2])
    assert main(["scan", str(tree), "--out", str(tmp_path / "o"), "--workers", "1", "--strict"]) == 1
    doc = _index(tmp_path / "o")
    failed = {f["path"]: f["problem"] for f in doc["failures"]}
    assert set(failed) == {"cut/early.pt.trace.json", "cut/half.sqlite"}
    assert failed["cut/early.pt.trace.json"].startswith("truncated")
    assert doc["not_traces"] == []
    assert all(t["dominant_cause"] != "no-gpu-activity" for t in doc["traces"])


def test_truncated_kineto_verdict_names_the_truncation(tmp_path):
    from traceread.runner import analyze

    tree = _small_tree(tmp_path)
    k0 = (tree / "jobK" / "train.rank0.pt.trace.json").read_bytes()
    cut = tmp_path / "cut.json"
    # keep only the host events' part: the GPU records come after them in a Kineto file
    cut.write_bytes(k0[: k0.index(b'"cat": "kernel"') if b'"cat": "kernel"' in k0 else len(k0) // 10])
    trace = load(str(cut))
    assert trace.meta.truncated
    a = analyze([trace])
    assert a.dominant_cause == "no-gpu-activity"
    assert "truncated" in a.refusal and "CPU-only" not in a.refusal
