"""Small parts of ``traceread scan``: trace ids, sizes, the progress line, discovery of odd files."""

from __future__ import annotations

import sqlite3

import pytest

from traceread.cli.scan import parse_size
from traceread.errors import UsageError
from traceread.scan.discover import discover, is_nsys_export, trace_kind
from traceread.scan.progress import ScanProgress
from traceread.scan.work import trace_id


def test_trace_id_is_readable_safe_and_versioned():
    assert trace_id("cluster/job7/rank0.pt.trace.json.gz", "0123456789abcdef") == \
        "cluster__job7__rank0.pt.trace.json.gz-01234567"
    a = trace_id("cluster 1/job#7/rank0.pt.trace.json.gz", "0123456789abcdef")
    assert a.startswith("cluster_1__job_7__rank0.pt.trace.json.gz~") and a.endswith("-01234567")
    # names that are equal once made safe stay apart (issue 26: one report for three traces)
    same = ["run 1/trace.json", "run_1/trace.json", "run&1/trace.json", "run/1/trace.json", "run__1/trace.json"]
    assert len({trace_id(r, "ab" * 8) for r in same}) == len(same)
    assert trace_id("x/" + "a" * 300 + ".json", "ff" * 8) != trace_id("x/" + "a" * 301 + ".json", "ff" * 8)
    assert trace_id("x/" + "a" * 300 + ".json", "ff" * 8).startswith("x__aaa")
    assert len(trace_id("x/" + "a" * 300 + ".json", "ff" * 8)) <= 130


def test_parse_size():
    assert parse_size("512M") == 512 << 20
    assert parse_size("1.5GiB") == int(1.5 * (1 << 30))
    assert parse_size("4096") == 4096
    with pytest.raises(UsageError):
        parse_size("lots")


def test_progress_line_counts_failures_and_gives_eta():
    bar = ScanProgress(total=10, done=2, failed=0, enabled=False)
    bar.update(done=1, failed=True)
    line = bar.line()
    assert line.startswith("scan 3/10 files, 1 failed, 00:00 elapsed")
    assert "ETA" in line


def test_names_and_sqlite_tables(tmp_path):
    assert trace_kind("a.pt.trace.json.gz") == "kineto" and trace_kind("b.json.tmp") == "kineto"
    assert trace_kind("c.nsys-rep") == "nsys-rep" and trace_kind("d.sqlite") == "sqlite"
    assert trace_kind("e.csv") is None
    db = tmp_path / "other.sqlite"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE StringIds (id INT, value TEXT)")  # one nsys-like table is not enough
    conn.commit()
    conn.close()
    ok, why = is_nsys_export(str(db))
    assert not ok and "Nsight" in why
    found = discover([str(tmp_path)])
    assert [(p.rel, p.kind) for p in found.problems] == [("other.sqlite", "not-trace")]
