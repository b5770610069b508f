"""``traceread scan`` end to end on a generated tree: outputs, failures, exit codes, cache, limits."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import jsonschema
import pyarrow.parquet as pq
import pytest
from _frames import table_rows
from scan_tree import FAILED, GOOD, NOT_TRACES, UNREADABLE, is_root, make_tree, snapshot

from traceread.cli import main
from traceread.render import jsonout
from traceread.scan.cache import DIRNAME

# One xdist worker runs this module's tests (tests/conftest.py ONE_WORKER_MODULES): its module-scoped ``tree`` and ``scanned`` are made once.

def _schema(name: str) -> dict:
    from importlib import resources

    return json.loads(resources.files("traceread").joinpath(f"data/{name}").read_text("utf-8"))


def _index(out: Path) -> dict:
    return json.loads((out / "index.json").read_text())


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    return make_tree(tmp_path_factory.mktemp("tree") / "runs")


@pytest.fixture(scope="module")
def scanned(tree, tmp_path_factory):
    out = tmp_path_factory.mktemp("out") / "scan"
    before = snapshot(tree)
    rc = main(["scan", str(tree), "--out", str(out), "--workers", "2"])
    return tree, out, rc, before


def test_exit_code_zero_and_input_tree_unchanged(scanned):
    tree, out, rc, before = scanned
    assert rc == 0
    assert snapshot(tree) == before, "the scanned tree must stay byte for byte (and mtime) unchanged"


def test_index_lists_good_traces_failures_and_not_traces(scanned):
    _, out, _, _ = scanned
    doc = _index(out)
    jsonschema.validate(doc, _schema("index.schema.json"))
    # as root (CI) chmod 000 does not stop reading: the file is then an (empty) trace
    assert sorted(t["path"] for t in doc["traces"]) == sorted(GOOD + ((UNREADABLE,) if is_root() else ()))
    failed = {f["path"]: f["problem"] for f in doc["failures"]}
    expected_failed = set(FAILED) | (set() if is_root() else {UNREADABLE})
    assert set(failed) == expected_failed, failed
    assert failed["broken/empty.pt.trace.json"] == "empty file"
    assert failed["links/dangling.json"] == "broken symbolic link"
    assert "nsys export --type sqlite" in failed["broken/capture.nsys-rep"] or "nsys export" in \
        failed["broken/capture.nsys-rep"]
    if not is_root():
        assert failed[UNREADABLE] == "permission denied"
    assert sorted(f["path"] for f in doc["not_traces"]) == sorted(NOT_TRACES)
    skipped = doc["scan"]["skipped"]
    assert skipped["other files"] == 2  # README.txt, loss.csv
    assert skipped["already found through another path (symbolic link)"] == 1  # links/rank0.json
    assert skipped["symbolic link loops (not followed)"] == 1
    assert failed["crashed/train.rank0.json.tmp"].startswith("truncated (a damaged file): file ends inside")
    assert failed["broken/truncated.sqlite"].startswith("not a readable SQLite database")
    # worst first by the GPU time the dominant cause costs
    lost = [t["dominant_lost_ns"] for t in doc["traces"]]
    assert lost == sorted(lost, reverse=True)
    md = (out / "failures.md").read_text()
    assert md.index("## Failures") < md.index("corrupt.json.gz") < md.index("## Not traces") < md.index("settings.json")


def test_per_trace_report_is_the_analyze_report(scanned, tmp_path):
    tree, out, _, _ = scanned
    doc = _index(out)
    row = next(t for t in doc["traces"] if t["path"] == "jobK/train.rank0.pt.trace.json")
    report = json.loads((out / row["link_json"]).read_text())
    jsonschema.validate(report, jsonout.schema())
    assert (out / row["link_md"]).read_text().startswith("#")
    single = tmp_path / "single.json"
    assert main(["analyze", str(tree / row["path"]), "--json", str(single), "-o", str(tmp_path / "r.md")]) == 0
    alone = json.loads(single.read_text())
    for d in (report, alone):
        for t in d["traces"]:
            t.pop("path")
        d.pop("notes")  # notes name the file
    assert report == alone
    assert row["dominant_cause"] == alone["dominant_cause"]
    assert row["steps"] == len(set(alone["steps"]["step"]))


def test_parquet_rows_match_the_per_trace_reports(scanned):
    _, out, _, _ = scanned
    doc = _index(out)
    gaps, steps, traces = (pq.read_table(out / f"{n}.parquet").to_pandas() for n in ("gaps", "steps", "traces"))
    for row in doc["traces"]:
        rep = json.loads((out / row["link_json"]).read_text())
        tid = row["trace_id"]
        assert (gaps["trace_id"] == tid).sum() == len(table_rows(rep["gaps"]))
        assert (steps["trace_id"] == tid).sum() == len(table_rows(rep["steps"]))
        # one row per rank/GPU unit; a trace with no analysable window still gets one row
        assert (traces["trace_id"] == tid).sum() == max(1, len(rep["attribution"]))
        mine = gaps[gaps["trace_id"] == tid]
        assert set(mine["job"]) <= {row["job"]}
        assert int(mine["end_ns"].sum() - mine["start_ns"].sum()) == sum(g["end_ns"] - g["start_ns"] for g in table_rows(rep["gaps"]))
        if row["epoch_offset_ns"] is not None and len(mine):
            assert (mine["start_epoch_ns"] - mine["start_ns"] == row["epoch_offset_ns"]).all()
    assert doc["scan"]["tables"] == {"gaps": len(gaps), "steps": len(steps), "traces": len(traces)}
    assert len(gaps) > 0 and len(steps) > 0


def test_rescan_reuses_every_result_and_touch_is_matched_by_hash(scanned, tmp_path):
    tree, out, _, _ = scanned
    work = tmp_path / "copy"
    shutil.copytree(out, work, symlinks=True)
    before = {p.name: p.read_bytes() for p in (work / "traces").iterdir()}
    from traceread.scan import ScanOptions, scan

    res = scan(ScanOptions(roots=[str(tree)], out=str(work), workers=2, progress=False))
    n_good = len(GOOD) + is_root()
    assert res.analysed == n_good and res.reused == n_good
    assert {p.name: p.read_bytes() for p in (work / "traces").iterdir()} == before
    from traceread.config import Thresholds
    from traceread.scan import Settings

    other = Settings(cfg=Thresholds().with_overrides({"healthy_max_idle": 0.5}))
    changed = scan(ScanOptions(roots=[str(tree)], out=str(work), workers=2, progress=False, settings=other))
    assert changed.analysed == n_good and changed.reused == 0  # a threshold changes every result
    report = json.loads((work / "traces" / next(iter(before)).replace(".md", ".json")).read_text())
    assert report["thresholds"]["healthy_max_idle"] == 0.5
    res = scan(ScanOptions(roots=[str(tree)], out=str(work), workers=2, progress=False))
    assert res.reused == 0
    log = (work / DIRNAME / "log.jsonl").read_text().splitlines()
    # every file that reached a worker, fresh or failed: not the ones discovery turned away
    assert len(log) == n_good + 3 + 1  # + corrupt gzip, the .nsys-rep, the cut Kineto file; + settings.json


def test_changed_file_is_analysed_again_and_old_report_removed(tree, tmp_path):
    src = tmp_path / "t"
    shutil.copytree(tree / "jobK", src / "jobK")
    out = tmp_path / "o"
    from traceread.scan import ScanOptions, scan

    first = scan(ScanOptions(roots=[str(src)], out=str(out), workers=2, progress=False, use_cache=False))
    assert first.analysed == 2 and first.reused == 0
    f = src / "jobK" / "train.rank0.pt.trace.json"
    st = f.stat()
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # touched, same content: hash matches
    touched = scan(ScanOptions(roots=[str(src)], out=str(out), workers=2, progress=False))
    assert touched.reused == 2  # --no-cache analysed everything but still recorded the results
    ids = sorted(p.name for p in (out / "traces").iterdir())
    f.write_bytes(f.read_bytes().replace(b'"schemaVersion": 1', b'"schemaVersion": 1 ', 1))  # new content
    again = scan(ScanOptions(roots=[str(src)], out=str(out), workers=2, progress=False))
    assert again.reused == 1 and again.analysed == 2
    now = sorted(p.name for p in (out / "traces").iterdir())
    assert len(now) == len(ids) and now != ids  # the old version's id is gone, the new one is there


def test_workers_write_reports_and_cache_parts_and_leftover_temporaries_are_removed(tree, tmp_path):
    src = tmp_path / "t"
    shutil.copytree(tree / "jobK", src / "jobK")
    out = tmp_path / "o"
    from traceread.scan import ScanOptions, scan
    from traceread.scan.work import Settings, Task, run_task

    scan(ScanOptions(roots=[str(src)], out=str(out), workers=2, progress=False))
    # what a worker killed while writing leaves behind (atomic_open's temporaries): gone after the next scan
    for d in (out / "traces", out / DIRNAME):
        (d / ".traceread-abc123.tmp").write_bytes(b"half")
    scan(ScanOptions(roots=[str(src)], out=str(out), workers=2, progress=False))
    assert not list(out.rglob(".traceread-*.tmp"))
    # a worker given the output folder writes the files itself and sends back only the index row;
    # without it (Dask) the same bytes travel in the outcome
    path = src / "jobK" / "train.rank0.pt.trace.json"
    st = path.stat()
    task = Task(path=str(path), rel="jobK/train.rank0.pt.trace.json", kind="kineto", size=st.st_size,
                mtime_ns=st.st_mtime_ns, inode=st.st_ino)
    (tmp_path / "w" / "traces").mkdir(parents=True)
    (tmp_path / "w" / DIRNAME).mkdir()
    local, travelled = run_task(task, Settings(), str(tmp_path / "w")), run_task(task, Settings())
    assert local.written and not travelled.written and local.row == travelled.row
    assert local.md is local.json is local.tables is local.identities is None
    assert (tmp_path / "w" / "traces" / (local.trace_id + ".json")).read_bytes() == travelled.json
    assert (tmp_path / "w" / "traces" / (local.trace_id + ".md")).read_bytes() == travelled.md
    from traceread.scan.cachecodec import decode_tables

    rows = decode_tables((tmp_path / "w" / DIRNAME / f"{local.trace_id}.rows.msgpack").read_bytes())
    assert {k: bytes(v) for k, v in rows.items()} == {k: bytes(v) for k, v in travelled.tables.items()}


def test_exit_codes(tree, tmp_path):
    assert main(["scan", str(tree), "--out", str(tmp_path / "a"), "--workers", "2", "--strict"]) == 1
    assert main(["scan", str(tree), "--out", str(tmp_path / "a"), "--workers", "2",
                 "--fail-on", "unattributed:0.001"]) == 1
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "x.json").write_text("{}")
    (bad / "y.json").write_bytes(b"")
    assert main(["scan", str(bad), "--out", str(tmp_path / "b")]) == 2  # nothing readable
    assert main(["scan", str(tree), "--out", str(tree / "reports")]) == 2  # --out inside the tree
    assert not (tree / "reports").exists()
    assert main(["scan", str(tree), "--out", str(tmp_path / "c"), "--fail-on", "nonsense:5"]) == 2


def test_out_inside_is_allowed_on_request_and_skipped(tree, tmp_path):
    src = tmp_path / "t"
    shutil.copytree(tree / "jobK", src / "jobK")
    out = src / "reports"
    assert main(["scan", str(src), "--out", str(out), "--allow-out-inside", "--workers", "1"]) == 0
    assert main(["scan", str(src), "--out", str(out), "--allow-out-inside", "--workers", "1"]) == 0
    assert len(_index(out)["traces"]) == 2  # its own reports were not scanned


def test_trace_timeout_and_max_rss_replace_the_worker_and_go_on(tree, tmp_path):
    src = tmp_path / "t"
    shutil.copytree(tree / "jobK", src / "jobK")
    out = tmp_path / "o"
    assert main(["scan", str(src), "--out", str(out), "--workers", "2", "--trace-timeout", "0.05"]) == 2
    problems = [f["problem"] for f in _index(out)["failures"]]
    assert len(problems) == 2 and all("--trace-timeout" in p for p in problems)
    assert main(["scan", str(src), "--out", str(tmp_path / "m"), "--workers", "1", "--max-rss", "60M"]) == 2
    problems = [f["problem"] for f in _index(tmp_path / "m")["failures"]]
    assert len(problems) == 2 and all("--max-rss" in p for p in problems), problems
    # limits are not cached: with room to work, the same files are analysed
    assert main(["scan", str(src), "--out", str(out), "--workers", "2"]) == 0
    assert len(_index(out)["traces"]) == 2


def test_file_changing_size_while_read_is_a_failure(tree):
    from traceread.scan.work import Settings, Task, run_task

    path = tree / "jobK" / "train.rank0.pt.trace.json"
    st = path.stat()
    task = Task(path=str(path), rel="jobK/x.json", kind="kineto", size=st.st_size - 100, mtime_ns=st.st_mtime_ns,
                inode=st.st_ino)
    o = run_task(task, Settings())
    assert o.status == "failed" and o.problem.startswith("changed while being read")


def test_job_file_in_tree_gives_mfu_and_cli_job_wins(tree, tmp_path):
    src = tmp_path / "t"
    shutil.copytree(tree / "jobK", src / "jobK")
    shutil.copytree(tree / "nsys", src / "nsys")
    (src / "jobK" / "traceread-job.toml").write_text('params = "1B"\ntokens_per_step = 8192\ndtype = "bf16"\n')
    out = tmp_path / "o"
    assert main(["scan", str(src), "--out", str(out), "--workers", "2"]) == 0
    rows = {t["path"]: t for t in _index(out)["traces"]}
    assert rows["jobK/train.rank0.pt.trace.json"]["mfu"] is not None
    assert rows["nsys/run.sqlite"]["mfu"] is None
    mfu_tree = rows["jobK/train.rank0.pt.trace.json"]["mfu"]
    job = tmp_path / "job.toml"
    job.write_text('params = "2B"\ntokens_per_step = 8192\ndtype = "bf16"\ngpus = 2\n')
    assert main(["scan", str(src), "--out", str(out), "--workers", "2", "--job", str(job)]) == 0
    rows = {t["path"]: t for t in _index(out)["traces"]}
    assert rows["jobK/train.rank0.pt.trace.json"]["mfu"] == pytest.approx(2 * mfu_tree)  # 6N with N doubled
    assert rows["nsys/run.sqlite"]["mfu"] is not None


_KILLED_PARENT = r"""
import json, os, signal, sys
from traceread.scan.pool import WorkerPool
from traceread.scan.work import Settings, Task
st = os.stat(sys.argv[1])
task = Task(path=sys.argv[1], rel="a.json", kind="kineto", size=st.st_size, mtime_ns=st.st_mtime_ns, inode=st.st_ino)
pool = WorkerPool(2, Settings(), 600.0, 1 << 40)
outcomes = pool.run([task] * 8)
assert next(outcomes).status == "ok"
print(json.dumps([w.proc.pid for w in pool.workers]), flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # no cleanup at all: the workers must notice by themselves
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")
def test_workers_of_a_killed_scan_exit_by_themselves(tree):
    import subprocess
    import sys
    import time

    proc = subprocess.run([sys.executable, "-c", _KILLED_PARENT, str(tree / "jobK" / "train.rank0.pt.trace.json")],
                          capture_output=True, text=True, timeout=300)
    pids = json.loads(proc.stdout)
    assert len(pids) == 2
    deadline = time.monotonic() + 120  # each finishes the file it has, then finds its parent gone
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(_alive(p) for p in pids), "workers outlived their killed parent"
