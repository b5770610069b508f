"""The nsys loader reads its big tables in row chunks (any chunk size gives the same trace) and the
kernels' launch configuration on first use (the same table as an eager read).

Each export is loaded once as one chunk per table (a chunk size above every table) and again with
a tiny chunk size, serially and with parallel readers, and the two traces must be equal: every
column of the events frame (category order included), every side table, and the metadata.
"""

from __future__ import annotations

import os
import pickle
import shutil
import sqlite3
import subprocess
import sys

import pandas as pd
import pytest
from conftest import REPO, needs_shared, shared_nsys
from tracesynth.nsys_example import example_scenario
from tracesynth.nsys_writer import write_nsys

from traceread import schema as S
from traceread.errors import TraceReadError
from traceread.loaders import nsys as N
from traceread.loaders.nsys import load_nsys
from traceread.loaders.nsys import read as nsys_read
from traceread.runner.workers import THREADS

WHOLE = 1 << 40  # more rows than any table: one chunk each


def _load(path, chunk: int, readers: int, monkeypatch):
    monkeypatch.setattr(nsys_read, "CHUNK_ROWS", chunk)
    monkeypatch.setattr(nsys_read, "READERS", readers)
    return load_nsys(path, parallel=THREADS)


def _same(a, b) -> None:
    pd.testing.assert_frame_equal(a.events, b.events, check_exact=True, check_categorical=True)
    assert list(a.side) == list(b.side)
    for name in a.side:
        pd.testing.assert_frame_equal(a.side[name], b.side[name], check_exact=True)
    for attr in ("generation", "time_base", "epoch_offset_ns", "devices", "ranks", "warnings", "extra",
                 "profiler_options"):
        assert getattr(a.meta, attr) == getattr(b.meta, attr), attr
    if a.meta.steps is None:
        assert b.meta.steps is None
    else:
        pd.testing.assert_frame_equal(a.meta.steps, b.meta.steps, check_exact=True)


def _check(path, monkeypatch, chunks=(1, 7, 1000)) -> None:
    whole = _load(path, WHOLE, 1, monkeypatch)
    assert len(whole.events)
    for chunk in chunks:
        for readers in (1, 3):
            _same(_load(path, chunk, readers, monkeypatch), whole)


@needs_shared
@pytest.mark.parametrize("path", shared_nsys(), ids=lambda p: p.name)
def test_real_export_chunked_equals_whole(path, monkeypatch) -> None:
    _check(path, monkeypatch, chunks=(7, 1000))


@pytest.mark.parametrize("schema", ["2026", "2022"])
def test_generated_example_chunked_equals_whole(tmp_path, schema, monkeypatch) -> None:
    path = write_nsys(example_scenario(n_ranks=2), tmp_path / f"example_{schema}.sqlite", schema=schema)
    _check(path, monkeypatch)


def test_generated_large_layout_chunked_equals_whole(tmp_path, monkeypatch) -> None:
    # The benchmark's layout (kernels, one launch each, planted gaps, ProfilerStep ranges, 2 processes).
    path = tmp_path / "big.sqlite"
    subprocess.run([sys.executable, str(REPO / "scripts" / "gen_nsys.py"), "--kernels", "30000", "--ranks", "2",
                    "--out", str(path)], check=True, cwd=REPO, capture_output=True, timeout=300)
    _check(path, monkeypatch, chunks=(4096, 9999))


def test_chunks_cover_every_row_once(tmp_path, monkeypatch) -> None:
    path = write_nsys(example_scenario(n_ranks=2), tmp_path / "example.sqlite")
    ex = nsys_read.open_export(str(path))
    try:
        table = "CUPTI_ACTIVITY_KIND_KERNEL"
        want = [r[0] for r in ex.conn.execute(f"SELECT start FROM {table}")]
        for chunk in (1, 5, WHOLE):
            monkeypatch.setattr(nsys_read, "CHUNK_ROWS", chunk)
            parts = list(ex.chunks(table, {"start": "start"}))
            got = [int(v) for p in parts for v in p["start"]]
            assert got == want
            assert max(len(p["start"]) for p in parts) <= chunk
        assert ex.row_bound(table) >= len(want)
    finally:
        ex.conn.close()


def test_kernel_launch_config_is_read_on_first_use(tmp_path) -> None:
    path = write_nsys(example_scenario(n_ranks=2), tmp_path / "example.sqlite")
    ex = nsys_read.open_export(str(path))
    try:
        eager = N.load_export(ex, str(path), False, None, lazy_args=False)
    finally:
        ex.conn.close()
    lazy = load_nsys(path)
    assert list(lazy.side) == list(eager.side) == ["kernel_args", "copy_args"]
    assert "kernel_args" in lazy.side and not lazy.side.is_read("kernel_args")
    pd.testing.assert_frame_equal(lazy.side["kernel_args"], eager.side["kernel_args"], check_exact=True)
    assert lazy.side.is_read("kernel_args")
    # A pickled trace carries the table (read before pickling), not a way to read it.
    again = load_nsys(path)
    copy = pickle.loads(pickle.dumps(again))
    pd.testing.assert_frame_equal(copy.side["kernel_args"], eager.side["kernel_args"], check_exact=True)
    # An export changed after the load is not read as if it were the same one.
    moved = tmp_path / "moved.sqlite"
    shutil.copyfile(path, moved)
    stale = load_nsys(moved)
    st = os.stat(moved)
    os.utime(moved, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    with pytest.raises(TraceReadError, match="changed since it was loaded"):
        stale.side["kernel_args"]


def test_export_with_empty_tables_gives_the_canonical_empty_frame(tmp_path) -> None:
    path = tmp_path / "empty.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT)")
    conn.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INT NOT NULL, end INT NOT NULL, deviceId INT, "
                 "streamId INT, correlationId INT, globalPid INT, demangledName INT, shortName INT)")
    conn.commit()
    conn.close()
    tr = load_nsys(path)
    want = S.empty_events()
    want["trace"] = pd.Categorical([], categories=[str(path)])
    pd.testing.assert_frame_equal(tr.events, want)
    assert dict(tr.side) == {}
