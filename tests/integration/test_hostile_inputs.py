"""Folders in the wild, locales and hostile names (issue 48): folder analyses never open a FIFO and say
what they left out; reports never fail on the output's encoding; CSV cells never start a formula."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from tracesynth.kineto_writer import write_kineto
from tracesynth.planted import PlantSpec, plant

import traceread
from traceread.cli import main
from traceread.errors import EXIT_USAGE
from traceread.render.notes import text as words  # notes are data; the reports word them

ROOT_USER = hasattr(os, "geteuid") and os.geteuid() == 0


def _trace(folder: Path, name: str = "t.pt.trace.json", rename=None) -> Path:
    [path] = write_kineto(plant(PlantSpec(seed=5, ranks=1, steps=4)).scenario, str(folder / name))
    if rename is not None:
        doc = json.loads(Path(path).read_text())
        for ev in doc["traceEvents"]:
            if ev.get("cat") in ("kernel", "cpu_op", "user_annotation"):
                ev["name"] = rename(ev["name"])
        Path(path).write_text(json.dumps(doc))
    return Path(path)


def _in_time(fn, seconds: float = 60.0):
    """Run ``fn`` in a thread; fail (not hang) when it has not returned in ``seconds``."""
    box: dict = {}
    t = threading.Thread(target=lambda: box.update(v=fn()), daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "hung"
    return box.get("v")


def test_a_fifo_inside_a_folder_is_never_opened_and_is_noted(tmp_path, capsys) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    _trace(folder)
    os.mkfifo(folder / "zz.pt.trace.json")  # nobody writes: opening it blocked for ever
    out = tmp_path / "r.json"
    rc = _in_time(lambda: main(["analyze", str(folder), "--json", str(out)]))
    assert rc == 0
    err = capsys.readouterr().err
    assert "zz.pt.trace.json" in err and "not a regular file" in err
    assert any("zz.pt.trace.json" in n and "left out" in n for n in json.loads(out.read_text())["notes"])
    with pytest.warns(UserWarning, match="zz.pt.trace.json"):
        report = _in_time(lambda: traceread.analyze(folder))
    assert any("zz.pt.trace.json" in n for n in map(words, report.notes))
    assert _in_time(lambda: main(["diff", str(folder), str(folder)])) in (0, 1)
    assert "zz.pt.trace.json" in capsys.readouterr().err


@pytest.mark.skipif(ROOT_USER, reason="root reads files without permission")
def test_unreadable_files_and_subfolders_are_noted_and_exit_2_only_when_nothing_was_read(tmp_path, capsys) -> None:
    folder = tmp_path / "run"
    (folder / "sub").mkdir(parents=True)
    _trace(folder, "a.pt.trace.json")
    locked = _trace(folder, "b.pt.trace.json")
    _trace(folder / "sub", "c.pt.trace.json")
    locked.chmod(0)
    (folder / "sub").chmod(0)
    try:
        out = tmp_path / "r.md"
        assert main(["analyze", str(folder), "-o", str(out)]) == 0
        err = capsys.readouterr().err
        assert "b.pt.trace.json" in err and "sub" in err
        md = out.read_text()
        assert "b.pt.trace.json" in md and "left out" in md
        (folder / "a.pt.trace.json").chmod(0)
        assert main(["analyze", str(folder)]) == EXIT_USAGE  # nothing read
        assert "no trace files" in capsys.readouterr().err
    finally:
        (folder / "sub").chmod(0o755)
        for p in folder.glob("*.json"):
            p.chmod(0o644)


def test_unreadable_file_in_a_folder_is_noted_as_root_too(tmp_path, capsys, monkeypatch) -> None:
    """The same through an error the sniff meets (as a file without read permission gives)."""
    from traceread import loaders

    folder = tmp_path / "run"
    folder.mkdir()
    _trace(folder, "a.pt.trace.json")
    _trace(folder, "b.pt.trace.json")
    real = loaders.sniff

    def sniff(path: str) -> str:
        if path.endswith("b.pt.trace.json"):
            raise loaders.TraceReadError(path, "cannot read (Permission denied)")
        return real(path)

    monkeypatch.setattr(loaders, "sniff", sniff)
    left: list = []
    assert [Path(p).name for p in loaders.expand_paths([folder], left)] == ["a.pt.trace.json"]
    assert [(Path(p).name, why) for p, why in left] == [("b.pt.trace.json", "not read (cannot read (Permission denied))")]
    with pytest.warns(UserWarning, match="b.pt.trace.json"):
        report = traceread.analyze(folder)
    assert any("b.pt.trace.json" in n for n in map(words, report.notes))


NAMES = "\u00b5s \u2026 \U0001f600 \u65e5\u672c "


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_a_report_never_fails_on_the_outputs_encoding(tmp_path, encoding) -> None:
    # an ASCII or Latin-1 standard output turned every report with an ellipsis or a micro sign into exit 3
    path = _trace(tmp_path, rename=lambda n: NAMES + n)
    env = {**os.environ, "PYTHONIOENCODING": encoding, "LANG": "C", "LC_ALL": "C"}
    for argv in (["analyze", str(path)], ["kernels", str(path), "--json", "-"], ["gaps", str(path)]):
        r = subprocess.run([sys.executable, "-c", "from traceread.cli import run; run()", *argv], env=env, capture_output=True, timeout=300)
        assert r.returncode == 0, (argv, r.stderr[-500:])
        assert not r.stderr, r.stderr[-500:]
        text = r.stdout.decode("utf-8")
        if argv[-1] == "-":
            assert any(k["name"].startswith(NAMES) for k in json.loads(text)["kernels"])


def test_csv_cells_that_would_start_a_formula_are_neutralized(tmp_path) -> None:
    formulas = ["=HYPERLINK(\"http://evil\",\"x\")", "+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)"]
    k = {"n": 0}

    def evil(name: str) -> str:
        k["n"] += 1
        return formulas[k["n"] % len(formulas)] + name

    path = _trace(tmp_path, rename=evil)
    out = tmp_path / "g.csv"
    assert main(["gaps", str(path), "--csv", str(out)]) == 0
    import csv

    rows = list(csv.reader(out.read_text(encoding="utf-8").splitlines()))
    assert len(rows) > 1
    cells = [c for row in rows for c in row]
    assert any(c.startswith("'=") or c.startswith("'+") or c.startswith("'@") for c in cells)
    bad = [c for c in cells if c[:1] in ("=", "+", "@") or (c[:1] == "-" and not _number(c))]
    assert not bad, bad[:5]


def _number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def test_a_pipe_is_sniffed_before_it_is_copied_and_the_copy_is_bounded(tmp_path, capsys) -> None:
    # `cat /dev/zero | traceread info /dev/stdin` spooled up to 64 GiB into TMPDIR before looking
    fifo = tmp_path / "zeros"
    os.mkfifo(fifo)
    written = {"n": 0}

    def feed(head: bytes) -> None:
        try:
            with open(fifo, "wb") as fh:
                fh.write(head)
                block = bytes(1 << 20)
                while written["n"] < 256 << 20:  # what an unbounded copy would take in
                    fh.write(block)
                    written["n"] += len(block)
        except BrokenPipeError:
            pass

    for head in (b"", b'{"traceEvents": ['):
        written["n"] = 0
        t = threading.Thread(target=feed, args=(head,), daemon=True)
        t.start()
        rc = _in_time(lambda: main(["info", str(fifo)]))
        t.join(60)
        err = capsys.readouterr().err
        assert rc == EXIT_USAGE and "not a trace" in err, err
        assert written["n"] < 32 << 20, written  # refused within the first blocks


def test_a_sparse_file_is_refused_quickly_by_its_holes(tmp_path, capsys) -> None:
    # 20 GiB apparent size: read and hashed whole (78 s, 9.5 GB resident) before "ends inside the array"
    tree = tmp_path / "tree"
    tree.mkdir()
    sparse = tree / "big.pt.trace.json"
    with open(sparse, "wb") as fh:
        fh.write(b'{"traceEvents": [')
        fh.truncate(20 << 30)
    if os.stat(sparse).st_blocks * 512 >= 1 << 30:
        pytest.skip("this file system stores no holes")
    rc = _in_time(lambda: main(["info", str(sparse)]))
    assert rc == EXIT_USAGE
    assert "sparse" in capsys.readouterr().err
    _trace(tree)
    rc = _in_time(lambda: main(["scan", str(tree), "--out", str(tmp_path / "out"), "--workers", "1"]), 120)
    assert rc == 0
    capsys.readouterr()
    assert "sparse" in (tmp_path / "out" / "failures.md").read_text()


@pytest.mark.parametrize(("name", "head"), [
    ("big.sqlite", b"SQLite format 3\x00" + b"\x10\x00\x01\x01" + b"\x00" * 80),  # an nsys export's header
    ("big.xplane.pb", b"\n\x12\n\x10/device:GPU:0"),  # an XSpace's first plane
])
def test_a_sparse_file_of_any_format_is_refused_before_it_is_read(tmp_path, capsys, name, head) -> None:
    """Every input is measured by its stored blocks, not only Kineto JSON: a 20 GiB SQLite or protobuf file
    that is almost all holes is refused in one line by info and by a scan (before its holes are hashed)."""
    tree = tmp_path / "tree"
    tree.mkdir()
    sparse = tree / name
    with open(sparse, "wb") as fh:
        fh.write(head)
        fh.truncate(20 << 30)
    if os.stat(sparse).st_blocks * 512 >= 1 << 30:
        pytest.skip("this file system stores no holes")
    rc = _in_time(lambda: main(["info", str(sparse)]))
    assert rc == EXIT_USAGE
    assert "sparse" in capsys.readouterr().err
    _trace(tree)
    rc = _in_time(lambda: main(["scan", str(tree), "--out", str(tmp_path / "out"), "--workers", "1"]), 120)
    assert rc == 0  # in time: refused by its content or its holes, never read whole
    capsys.readouterr()
    index = json.loads((tmp_path / "out" / "index.json").read_text())
    assert all(t["path"] != name for t in index["traces"])


@pytest.mark.parametrize("body", [
    "params = " + "[" * 100_000 + "]" * 100_000,  # 100,000 nested arrays aborted the whole scan with exit 3
    f"params = 7e9\nglobal_batch = {2**64}\nseq_len = 4096\n",  # past int64: failed every trace under it
    f"params = 7e9\nglobal_batch = {2**40}\nseq_len = {2**40}\n",  # a product past int64
    "x" * (2 << 20),  # larger than any job file
])
def test_one_bad_job_file_in_a_scanned_tree_fails_only_its_traces(tmp_path, capsys, body) -> None:
    tree = tmp_path / "tree"
    (tree / "bad").mkdir(parents=True)
    (tree / "good").mkdir()
    _trace(tree / "bad")
    _trace(tree / "good")
    (tree / "bad" / "traceread-job.toml").write_text(body)
    out = tmp_path / "out"
    rc = _in_time(lambda: main(["scan", str(tree), "--out", str(out), "--workers", "1"]), 300)
    err = capsys.readouterr().err
    assert rc == 0 and "internal error" not in err, err
    index = json.loads((out / "index.json").read_text())
    text = json.dumps(index)
    assert "good" in text and "traceread-job.toml" in (out / "failures.md").read_text()


def test_a_job_file_that_is_a_fifo_or_too_deep_is_one_line(tmp_path, capsys) -> None:
    path = _trace(tmp_path)
    fifo = tmp_path / "job.toml"
    os.mkfifo(fifo)
    rc = _in_time(lambda: main(["analyze", str(path), "--job", str(fifo)]))
    assert rc == EXIT_USAGE and "not a regular file" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["VIRTUAL", "STORED"])
def test_an_nsys_export_with_a_generated_column_is_refused_before_it_is_read(tmp_path, capsys, kind) -> None:
    # a `start` computing a 200 MB blob per row: 330 s and 1.09 GB for 240 rows
    import sqlite3

    from tracesynth.nsys_writer import write_nsys

    path = Path(write_nsys(plant(PlantSpec(seed=11, ranks=1, steps=4)).scenario, tmp_path / "n.sqlite"))
    with sqlite3.connect(path) as db:
        sql = db.execute("SELECT sql FROM sqlite_master WHERE name = 'CUPTI_ACTIVITY_KIND_KERNEL'").fetchone()[0]
        cols = [r[1] for r in db.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_KERNEL)") if r[1] != "start"]
        db.execute(sql.replace("CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL,",
                               "K2 (s0 INTEGER NOT NULL, start INTEGER GENERATED ALWAYS AS "
                               f"(s0 + length(zeroblob(1000)) * 0) {kind},"))
        db.execute(f"INSERT INTO K2 (s0, {', '.join(cols)}) SELECT start, {', '.join(cols)} FROM CUPTI_ACTIVITY_KIND_KERNEL")
        db.execute("DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL")
        db.execute("ALTER TABLE K2 RENAME TO CUPTI_ACTIVITY_KIND_KERNEL")
    assert main(["info", str(path)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "generated" in err and "start" in err and len(err.strip().splitlines()) == 1


def test_an_unreadable_subfolder_is_noted_as_root_too(tmp_path, capsys, monkeypatch) -> None:
    """os.walk's error on a subfolder it cannot list (as a folder without permission gives)."""
    folder = tmp_path / "run"
    (folder / "sub").mkdir(parents=True)
    _trace(folder, "a.pt.trace.json")
    _trace(folder / "sub", "c.pt.trace.json")
    real = os.scandir

    def scandir(path="."):
        if os.fspath(path).endswith("sub"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    out = tmp_path / "r.json"
    assert main(["analyze", str(folder), "--json", str(out)]) == 0
    assert "sub: left out: folder not read (Permission denied)" in capsys.readouterr().err
    assert any("sub" in n and "folder not read" in n for n in json.loads(out.read_text())["notes"])


def test_a_slow_scale_pattern_is_stopped_before_the_replay_thread(tmp_path, capsys, monkeypatch) -> None:
    """``whatif --scale '.*.*.*=2'`` over a name of 5,000 characters backtracks for ~n^3 steps. The replay
    matches names on its own thread, where no signal can stop the regex engine (the process then ignored
    SIGTERM until the match ended); the runner matches the pattern first on the main thread, under the
    budget: a usage error in time, never a hang."""
    import gzip

    from conftest import FIXTURES

    from traceread import bounds

    doc = json.loads(gzip.decompress((FIXTURES / "hta_alexnet_a100.json.gz").read_bytes()))
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    op = next(e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op")
    op["name"] = "a" * 5000
    path = tmp_path / "long_name.json"
    path.write_text(json.dumps(doc))
    monkeypatch.setattr(bounds, "MATCH_BUDGET_S", 1.0)
    # in this (main) thread, as a command runs: the budget is a signal only the main thread receives
    started = time.monotonic()
    rc = main(["whatif", str(path), "--scale", ".*.*.*==2"])
    assert rc == EXIT_USAGE and time.monotonic() - started < 30
    assert "took more than 1 s" in capsys.readouterr().err
