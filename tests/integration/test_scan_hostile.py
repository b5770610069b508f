"""Issue 26 (scan side): what an independent attack found in ``scan``, each kept as a regression.

Every case ends in exit 0 with a result or exit 2 with one line naming the file and the problem,
never exit 3, and leaves the scanned tree unchanged (hashed before and after).
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from scan_tree import make_tree, snapshot

from traceread.cli import main
from traceread.scan.cache import DIRNAME


@pytest.fixture(scope="module")
def job_tree(tmp_path_factory) -> Path:
    full = make_tree(tmp_path_factory.mktemp("tree") / "full", seed=5)
    root = tmp_path_factory.mktemp("jobk") / "runs"
    shutil.copytree(full / "jobK", root / "jobK")
    shutil.copy(full / "nsys" / "run.sqlite", root.parent / "run.sqlite")  # an nsys export, kept out of the tree
    return root


def _index(out: Path) -> dict:
    return json.loads((out / "index.json").read_text())


def _stable(doc: dict) -> dict:
    """An index without what differs from run to run (timing, reuse)."""
    doc = json.loads(json.dumps(doc))
    doc["scan"].pop("seconds")
    return doc


def _scan(tree: Path, out: Path, *extra: str, capsys=None) -> int:
    before = snapshot(tree)
    code = main(["scan", str(tree), "--out", str(out), "--workers", "1", *extra])
    assert snapshot(tree) == before
    return code


class _WritesAFile:
    """A pickle that, when loaded, writes ``path``: the cache must never load one."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (Path.write_text, (Path(self.path), "pwned"))


def test_planted_pickles_never_run_and_damaged_entries_are_analysed_again(job_tree, tmp_path):
    out = tmp_path / "out"
    assert _scan(job_tree, out) == 0
    fresh = _stable(_index(out))
    cache = out / DIRNAME
    marker = tmp_path / "ran"
    evil = pickle.dumps(_WritesAFile(str(marker)))
    # the names older versions read (jobs.pkl, <id>.row.pkl ...) and the names this one reads
    for name in ["jobs.pkl", "jobs.msgpack"] + [p.name.replace(".msgpack", ".pkl") for p in cache.glob("*.msgpack")]:
        (cache / name).write_bytes(evil)
    assert _scan(job_tree, out) == 0
    assert not marker.exists()
    assert _stable(_index(out)) == fresh
    assert not list(cache.glob("*.pkl"))  # an older version's pickles are removed, never read
    # every kind of cache part damaged: cut, replaced by a pickle, by other valid MessagePack
    parts = sorted(cache.glob("*.msgpack"))
    assert {p.name.split(".")[-2] for p in parts} == {"row", "ranks", "rows", "jobs"}
    for i, p in enumerate(parts):
        data = p.read_bytes()
        p.write_bytes([data[: len(data) // 2], evil, b"\x82\xa1a\x01\xa1b\xc0"][i % 3])
    assert _scan(job_tree, out) == 0
    assert not marker.exists()
    assert _stable(_index(out)) == fresh
    tables = {n: pq.read_table(out / f"{n}.parquet").num_rows for n in ("gaps", "steps", "traces")}
    assert tables == fresh["scan"]["tables"]


def test_planted_log_lines_are_ignored(job_tree, tmp_path):
    out = tmp_path / "out"
    assert _scan(job_tree, out) == 0
    fresh = _stable(_index(out))
    log = out / DIRNAME / "log.jsonl"
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    planted = [dict(e, trace_id="../../../escape") for e in lines] + [dict(e, size="1") for e in lines]
    log.write_bytes(b"\xff\xfe not utf-8\n" + "".join(json.dumps(e) + "\n" for e in planted).encode())
    assert _scan(job_tree, out) == 0
    assert _stable(_index(out)) == fresh
    assert not (tmp_path / "escape.json").exists()
    assert os.path.isdir(out / DIRNAME)


def _tiny_rank(path: Path, rank: int, world: int) -> None:
    """A 1 KB Kineto trace of rank ``rank`` claiming a world of ``world`` ranks."""
    doc = {"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world},
           "deviceProperties": [{"id": 0, "name": "NVIDIA H100"}],
           "traceEvents": [{"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 1000 + 10 * i,
                            "dur": 5, "args": {"device": 0, "stream": 7}} for i in range(5)]}
    path.write_text(json.dumps(doc))


@pytest.mark.parametrize("world", [10**7, 10**9, 2**31 - 1])
def test_world_size_from_a_file_never_sizes_a_list(tmp_path, world):
    tree = tmp_path / "runs"
    (tree / "job").mkdir(parents=True)
    for r in (0, 1):
        _tiny_rank(tree / "job" / f"trace.rank{r}.json", r, world)
    out = tmp_path / "out"
    assert _scan(tree, out) == 0
    (job,) = [json.loads(p.read_text()) for p in (out / "jobs").glob("*.json")]
    assert job["group"]["missing_rank_count"] == world - 2 and len(job["group"]["missing_ranks"]) == 1024
    assert f"and {world - 2 - 1024:,} more" in job["group"]["missing_ranks_text"]
    assert _index(out)["jobs"][0]["missing_ranks"] == world - 2
    assert all(p.stat().st_size < 1 << 20 for p in out.rglob("*") if p.is_file())
    paths = [str(tree / "job" / f"trace.rank{r}.json") for r in (0, 1)]
    assert main(["analyze", *paths, "--json", str(tmp_path / "a.json"), "-o", str(tmp_path / "a.md")]) == 0
    assert (tmp_path / "a.json").stat().st_size < 1 << 20


def test_a_world_size_past_the_rank_range_is_ignored_with_a_note(tmp_path):
    """Past 2^31-1 (the frame's int32 ranks, limits.py's integer policy) a world size is not a size at all."""
    paths = []
    for r in (0, 1):
        paths.append(tmp_path / f"trace.rank{r}.json")
        _tiny_rank(paths[-1], r, 2**63 - 1)
    assert main(["analyze", *map(str, paths), "--json", str(tmp_path / "a.json"), "-o", str(tmp_path / "a.md")]) == 0
    report = (tmp_path / "a.json").read_text()
    assert "world_size 9223372036854775807 is outside" in report and (tmp_path / "a.json").stat().st_size < 1 << 20


def _a_trace(job_tree: Path) -> bytes:
    return (job_tree / "jobK" / "train.rank0.pt.trace.json").read_bytes()


def test_names_equal_once_made_safe_keep_their_own_ids_jobs_and_rows(job_tree, tmp_path):
    tree = tmp_path / "runs"
    dirs = ["run 1", "run_1", "run&1"]
    for d in dirs:
        (tree / d).mkdir(parents=True)
        (tree / d / "trace.json").write_bytes(_a_trace(job_tree))  # the same content three times
    out = tmp_path / "out"
    assert _scan(tree, out) == 0
    doc = _index(out)
    assert sorted(t["path"] for t in doc["traces"]) == sorted(f"{d}/trace.json" for d in dirs)
    assert len({t["trace_id"] for t in doc["traces"]}) == 3
    assert sorted(t["job"] for t in doc["traces"]) == sorted(f"{d}/trace" for d in dirs)
    assert len({j["file"] for j in doc["jobs"]}) == 3 and len(list((out / "traces").glob("*.json"))) == 3
    traces = pq.read_table(out / "traces.parquet").to_pandas()
    assert sorted(traces.groupby("trace_id")["path"].first()) == sorted(f"{d}/trace.json" for d in dirs)


def test_names_of_any_bytes_and_deep_trees(job_tree, tmp_path, capsys):
    tree = tmp_path / "runs"
    odd = os.path.join(os.fsencode(tree), b"run\xff", b"tr\xfeace.json")
    os.makedirs(os.path.dirname(odd))
    Path(os.fsdecode(odd)).write_bytes(_a_trace(job_tree))
    literal = tree / "run\\xff" / "tr\\xfeace.json"  # spells the escaped name: must stay apart
    literal.parent.mkdir()
    literal.write_bytes(_a_trace(job_tree))
    shutil.copy(job_tree.parent / "run.sqlite", os.fsdecode(os.path.join(os.path.dirname(odd), b"ns\xffys.sqlite")))
    deep = tree.joinpath(*["d" * 90] * 4)  # ~370 characters of folders: jobs/<name> was too long a name
    deep.mkdir(parents=True)
    (deep / "train.rank0.json").write_bytes(_a_trace(job_tree))
    out = tmp_path / "out"
    assert _scan(tree, out) == 0
    doc = _index(out)
    assert doc["scan"]["complete"] and len(doc["traces"]) == 4 and not doc["failures"]
    paths = sorted(t["path"] for t in doc["traces"])
    # the escaped names collide with the literal one: each escaped part gets a hash of its bytes
    assert len(set(paths)) == 4 and "run\\xff/tr\\xfeace.json" in paths
    assert any(p.startswith("run\\xff~") and "/ns\\xffys.sqlite~" in p for p in paths)
    assert len({t["job"] for t in doc["traces"]}) == 4
    assert all(len(p.name) < 255 for p in out.rglob("*"))
    pq.read_table(out / "gaps.parquet")
    odd_root = Path(os.fsdecode(os.path.dirname(odd)))  # a scan root of such a name, with another root
    assert _scan(odd_root, tmp_path / "out2", str(deep)) == 0
    assert "run\\xff" in _index(tmp_path / "out2")["scan"]["roots"]
    # every command takes the name as the OS gives it, and shows it escaped
    name = os.fsdecode(odd)
    for cmd in (["analyze", name], ["kernels", name], ["gaps", name], ["diff", name, str(literal)], ["info", name]):
        capsys.readouterr()
        assert main(cmd) == 0, cmd
    assert "run\\xff" in capsys.readouterr().out
    assert main(["analyze", name, "--json", str(tmp_path / "a.json"), "-o", str(tmp_path / "a.md")]) == 0
    assert json.loads((tmp_path / "a.json").read_text())["traces"][0]["path"] == name.encode(
        "utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def test_a_full_disk_is_not_cached_as_the_files_outcome(job_tree, tmp_path, monkeypatch):
    from traceread.errors import OutputError
    from traceread.scan import work

    real = work.write_report_files

    def full(outdir, o):  # what a full output disk gives (the workers are forked: they see this too)
        raise OutputError(os.path.join(outdir, "traces", o.trace_id + ".json"), "No space left on device")

    out = tmp_path / "out"
    monkeypatch.setattr(work, "write_report_files", full)
    assert _scan(job_tree, out) == 2
    assert all("No space left on device" in f["problem"] for f in _index(out)["failures"])
    monkeypatch.setattr(work, "write_report_files", real)
    assert _scan(job_tree, out) == 0  # space freed: analysed now, without --no-cache
    assert len(_index(out)["traces"]) == 2 and not _index(out)["failures"]


def test_an_interrupted_scans_table_files_are_removed_by_the_next(job_tree, tmp_path):
    import fcntl

    out = tmp_path / "out"
    assert _scan(job_tree, out) == 0
    left = [out / f".{n}.parquet-k1ll3d.tmp" for n in ("gaps", "steps", "traces")]  # SIGKILL while writing
    for p in left:
        p.write_bytes(b"PAR1 half")
    running = out / ".gaps.parquet-running.tmp"  # a scan writing now holds its lock: left alone
    running.write_bytes(b"PAR1")
    with open(running, "rb") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        assert _scan(job_tree, out) == 0
        assert not any(p.exists() for p in left) and running.exists()
    assert _scan(job_tree, out) == 0
    assert not list(out.glob(".*.tmp"))


@pytest.mark.parametrize("flag", ["-o", "--json", "--plot", "--perfetto"])
def test_an_output_never_replaces_an_input(job_tree, tmp_path, capsys, flag):
    src = job_tree / "jobK" / "train.rank0.pt.trace.json"
    trace = tmp_path / "v.json"
    trace.write_bytes(src.read_bytes())
    (tmp_path / "link.json").symlink_to(trace)
    job = tmp_path / "job.toml"
    job.write_text("gpus = 8\n")
    before = snapshot(tmp_path)
    for target in (trace, tmp_path / "link.json", job):
        capsys.readouterr()
        assert main(["analyze", str(trace), "--job", str(job), flag, str(target)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        # --plot v.json is refused for its format before the input check: the input is safe either way
        assert len(err) == 1 and str(target) in err[0] and ("input" in err[0] or "picture format" in err[0])
    assert main(["diff", str(trace), str(src), flag if flag in ("-o", "--json") else "-o", str(trace)]) == 2
    assert main(["kernels", str(trace), "--json", str(trace)]) == 2
    assert main(["gaps", str(trace), "--csv", str(tmp_path / "link.json")]) == 2
    assert main(["info", str(trace), "--json", str(trace)]) == 2
    assert snapshot(tmp_path) == before


def test_scan_out_that_cannot_be_written_is_one_line_exit_2(job_tree, tmp_path, capsys, monkeypatch):
    a_file = tmp_path / "afile"
    a_file.write_text("x")
    for out in (a_file, a_file / "sub"):  # an existing file; a folder under a file (as a read-only disk, refused)
        capsys.readouterr()
        assert _scan(job_tree, out) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and str(a_file) in err[0] and "cannot write" in err[0]
    import errno

    real = os.makedirs
    for code in (errno.EROFS, errno.EACCES, errno.ENOSPC):  # tests run as root: chmod would not stop them

        def refused(path, *a, code=code, **k):
            if str(tmp_path / "ro") in os.fsdecode(path):
                raise OSError(code, os.strerror(code), path)
            return real(path, *a, **k)

        monkeypatch.setattr(os, "makedirs", refused)
        capsys.readouterr()
        assert _scan(job_tree, tmp_path / "ro" / "out") == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and os.strerror(code) in err[0]
    assert a_file.read_text() == "x"


def test_an_epoch_offset_near_int64_max_scans_as_analyze_does(job_tree, tmp_path):
    tree = tmp_path / "runs"
    (tree / "job").mkdir(parents=True)
    for r in (0, 1):
        doc = json.loads((job_tree / "jobK" / "train.rank0.pt.trace.json").read_text())
        doc["baseTimeNanoseconds"] = 2**63 - 1000
        doc["distributedInfo"]["rank"] = r
        (tree / "job" / f"t{r}.json").write_text(json.dumps(doc))
    paths = [str(p) for p in sorted((tree / "job").iterdir())]
    assert main(["analyze", *paths, "-o", str(tmp_path / "a.md")]) == 0
    out = tmp_path / "out"
    assert _scan(tree, out) == 0
    doc = _index(out)
    assert len(doc["traces"]) == 2 and not doc["failures"]
    gaps = pq.read_table(out / "gaps.parquet")
    assert gaps.num_rows > 0 and gaps.column("start_epoch_ns").null_count == gaps.num_rows  # unknown, not wrapped


def test_diff_of_a_job_against_one_trace(job_tree, tmp_path, capsys):
    one = str(job_tree / "jobK" / "train.rank0.pt.trace.json")
    job = str(job_tree / "jobK")
    nsys = str(job_tree.parent / "run.sqlite")  # one export holding two processes
    for before, after in ((job, one), (one, job), (nsys, one), (one, nsys)):
        capsys.readouterr()
        assert main(["diff", before, after, "--json", str(tmp_path / "d.json"), "-o", str(tmp_path / "d.md")]) == 0
        ranks = json.loads((tmp_path / "d.json").read_text())
        assert ranks and "## Ranks" in (tmp_path / "d.md").read_text()
