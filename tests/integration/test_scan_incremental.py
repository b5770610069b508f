"""``traceread scan`` writes jobs, the index and the table rows as each directory's results complete.

The scan's outcome stream is held back (a wrapper around the real worker pool's stream) just before
the last directory's result is handed over: at that moment the other directories' job reports must
already be on disk, and the index must list what is done with ``scan.complete`` false. Job names
and files depend only on their own directory.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from scan_tree import make_tree

from traceread.cli import main
from traceread.ranks import group_jobs
from traceread.scan import outputs as scan_outputs
from traceread.scan import run as scan_run
from traceread.scan.jobs import job_file


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    full = make_tree(tmp_path_factory.mktemp("tree") / "full", seed=7)
    root = tmp_path_factory.mktemp("two") / "runs"
    shutil.copytree(full / "jobK", root / "jobK")
    shutil.copytree(full / "nsys", root / "nsys")
    return root


def _json(p: Path) -> dict:
    return json.loads(p.read_text())


def test_finished_directory_has_its_jobs_while_another_is_pending(tree, tmp_path, monkeypatch):
    out = tmp_path / "out"
    real = scan_run._outcomes
    seen: dict[str, object] = {}

    def held_back(opt, tasks):
        results = sorted(real(opt, tasks), key=lambda o: o.rel.startswith("nsys/"))  # nsys last
        for o in results:
            if o.rel.startswith("nsys/"):  # jobK is complete, nsys still pending: look at OUT now
                seen["jobs"] = sorted(p.name for p in (out / "jobs").iterdir())
                seen["index"] = _json(out / "index.json")
                seen["tmp_tables"] = sorted(p.name for p in out.iterdir() if p.name.endswith(".tmp"))
                seen["tables"] = sorted(p.name for p in out.glob("*.parquet"))
            yield o

    monkeypatch.setattr(scan_run, "_outcomes", held_back)
    monkeypatch.setattr(scan_outputs, "INDEX_REFRESH_S", 0.0)
    assert main(["scan", str(tree), "--out", str(out), "--workers", "2"]) == 0
    assert seen, "the nsys result never came"
    final = _json(out / "index.json")
    jobk = [j for j in final["jobs"] if j["job"].startswith("jobK/")]
    assert len(jobk) == 1 and len(final["jobs"]) == 2
    # the jobK job was written before the nsys file's result was handed over, and not rewritten since
    assert seen["jobs"] == [jobk[0]["file"] + ".json", jobk[0]["file"] + ".md"]
    partial = seen["index"]
    assert partial["scan"]["complete"] is False and final["scan"]["complete"] is True
    assert sorted(t["path"] for t in partial["traces"]) == ["jobK/train.rank0.pt.trace.json",
                                                          "jobK/train.rank1.pt.trace.json.gz"]
    assert {t["job"] for t in partial["traces"]} == {jobk[0]["job"]}
    assert [j["job"] for j in partial["jobs"]] == [jobk[0]["job"]]
    # table rows go to hidden temporary files; the tables appear only complete, at the end
    assert len(seen["tmp_tables"]) == 3 and seen["tables"] == []
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]
    traces = pq.read_table(out / "traces.parquet").to_pandas()
    assert set(traces["job"]) == {j["job"] for j in final["jobs"]}


def test_job_names_and_files_do_not_depend_on_other_directories(tree, tmp_path):
    alone = tmp_path / "alone"
    shutil.copytree(tree / "jobK", alone / "jobK")
    more = tmp_path / "more"
    shutil.copytree(tree / "jobK", more / "jobK")
    shutil.copytree(tree / "jobK", more / "aaa")  # the same job stem in a directory sorting first
    shutil.copytree(tree / "nsys", more / "nsys")
    for src in (alone, more):
        assert main(["scan", str(src), "--out", str(tmp_path / f"out-{src.name}"), "--workers", "2"]) == 0
    a = {j["job"]: j["file"] for j in _json(tmp_path / "out-alone" / "index.json")["jobs"]}
    m = {j["job"]: j["file"] for j in _json(tmp_path / "out-more" / "index.json")["jobs"]}
    (name,) = a
    assert m[name] == a[name] and len(set(m.values())) == len(m) == 3
    assert name.replace("jobK/", "aaa/") in m  # the copy is its own job, with the same kind of name
    mine = _json(tmp_path / "out-alone" / "jobs" / f"{a[name]}.json")
    theirs = _json(tmp_path / "out-more" / "jobs" / f"{a[name]}.json")
    assert mine == theirs


def test_grouping_one_directory_at_a_time_equals_grouping_them_all(tree):
    from traceread.loaders import load
    from traceread.ranks import identify

    ids = []
    for d, rels in (("jobK", ("train.rank0.pt.trace.json", "train.rank1.pt.trace.json.gz")),
                    ("nsys", ("run.sqlite",)), ("copy", ("train.rank0.pt.trace.json",))):
        for r in rels:
            src = "jobK" if d == "copy" else d
            ids += identify(load(str(tree / src / r), decoders=1), f"{d}/{r}")
    whole = {tuple(m.label for m in g.members) for g in group_jobs(ids)}
    per_dir = {tuple(m.label for m in g.members)
               for d in ("jobK", "nsys", "copy") for g in group_jobs([i for i in ids if os.path.dirname(i.path) == d])}
    assert whole == per_dir and len(whole) == 3


def test_job_file_names_are_unique_without_counting_other_directories():
    assert job_file("jobK/train.rank*", "jobK", set()) == "jobK__train.rank"
    # "a/b__c" and "a/b/c" have the same safe name: a hash of the exact name tells them apart
    f1, f2 = job_file("a/b__c", "a", set()), job_file("a/b/c", "a/b", set())
    assert f1 != f2 and f1.startswith("a__b__c-") and f2 == "a__b__c"
    assert job_file("my run/x", "my run", set()) != job_file("my_run/x", "my_run", set())
    used: set[str] = set()  # two stems of one directory that differ only in odd characters
    assert [job_file(n, "d", used) for n in ("d/x*y", "d/x?y")] == ["d__x_y", "d__x_y-2"]


def test_rescan_rebuilds_only_the_jobs_of_changed_directories(tree, tmp_path, monkeypatch):
    from traceread.scan import jobs as scan_jobs

    src = tmp_path / "src"
    shutil.copytree(tree, src)
    out = tmp_path / "out"
    assert main(["scan", str(src), "--out", str(out), "--workers", "2"]) == 0
    first = {p.name: p.read_bytes() for p in (out / "jobs").iterdir()}
    built: list[str] = []
    real = scan_jobs.build_directory_jobs

    def counting(done, settings, finder):
        built.append(os.path.dirname(done[0].rel))
        return real(done, settings, finder)

    monkeypatch.setattr(scan_jobs, "build_directory_jobs", counting)
    assert main(["scan", str(src), "--out", str(out), "--workers", "2"]) == 0
    assert built == []  # nothing changed: no job rebuilt, no rank summary read
    assert {p.name: p.read_bytes() for p in (out / "jobs").iterdir()} == first
    index = _json(out / "index.json")
    assert len(index["jobs"]) == 2 and {t["job"] for t in index["traces"]} == {j["job"] for j in index["jobs"]}
    (src / "nsys" / "run.sqlite").unlink()  # one directory changes: only its jobs are built again
    shutil.copyfile(tree / "jobK" / "train.rank0.pt.trace.json", src / "nsys" / "extra.pt.trace.json")
    assert main(["scan", str(src), "--out", str(out), "--workers", "2"]) == 0
    assert built == ["nsys"]
    index = _json(out / "index.json")
    assert sorted(t["path"] for t in index["traces"]) == ["jobK/train.rank0.pt.trace.json",
                                                         "jobK/train.rank1.pt.trace.json.gz",
                                                         "nsys/extra.pt.trace.json"]
    assert len(pq.read_table(out / "traces.parquet")) == index["scan"]["tables"]["traces"]
