"""Hostile Nsight Systems exports (issue 26): rowid layouts, a leftover -wal, a locked or changing
export, integers out of range. Each a result or one line naming the file; nothing written beside."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
from pathlib import Path

import pytest
from tracesynth.nsys_example import example_scenario
from tracesynth.nsys_writer import write_nsys
from tracesynth.planted import PlantSpec, plant

import traceread.loaders.nsys.read as R
from traceread.cli import main
from traceread.errors import TraceReadError
from traceread.loaders import load
from traceread.render.notes import text as words  # notes are data; the reports word them

K = "CUPTI_ACTIVITY_KIND_KERNEL"


def _export(path: Path) -> Path:
    write_nsys(example_scenario(n_ranks=1, steps=2), path)
    return path


def _tree_state(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def _kernels(path: Path) -> int:
    return int((load(path).events["category"].astype(str) == "kernel").sum())


def _sql(path: Path, *statements: str) -> None:
    conn = sqlite3.connect(path)
    for s in statements:
        conn.execute(s)
    conn.commit()
    conn.close()


@pytest.mark.parametrize("chunk_rows", [R.CHUNK_ROWS, 3])
def test_sparse_rowids_are_read_by_their_rows_not_their_span(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              chunk_rows: int) -> None:
    """A small kernel table whose last rowid is 2^62 was refused as 'more than 252M events'."""
    path = _export(tmp_path / "ex.sqlite")
    want = _kernels(path)
    _sql(path, f"UPDATE {K} SET rowid = {2**62} WHERE rowid = (SELECT MAX(rowid) FROM {K})",
         f"UPDATE {K} SET rowid = {2**40} WHERE rowid = (SELECT MIN(rowid) FROM {K})")
    monkeypatch.setattr(R, "CHUNK_ROWS", chunk_rows)
    before = _tree_state(tmp_path)
    assert _kernels(path) == want
    assert _tree_state(tmp_path) == before


def test_a_column_named_rowid_does_not_shadow_the_rowid(tmp_path: Path) -> None:
    """A user column called rowid holding duplicates made the range reads return rows twice (exit 3)."""
    path = _export(tmp_path / "ex.sqlite")
    want = _kernels(path)
    _sql(path, f"ALTER TABLE {K} ADD COLUMN rowid INTEGER", f"UPDATE {K} SET rowid = 1",
         "ALTER TABLE CUPTI_ACTIVITY_KIND_RUNTIME ADD COLUMN _rowid_ INTEGER")
    assert _kernels(path) == want
    _sql(path, f"ALTER TABLE {K} ADD COLUMN _rowid_ INTEGER", f"ALTER TABLE {K} ADD COLUMN oid INTEGER")
    with pytest.raises(TraceReadError, match="columns named rowid, _rowid_ and oid"):
        load(path)


def _with_wal(tmp_path: Path) -> tuple[Path, int]:
    """An export whose last kernels are only in its -wal (a writer that crashed), with no -shm."""
    src = _export(tmp_path / "src.sqlite")
    conn = sqlite3.connect(src)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    n = conn.execute(f"SELECT COUNT(*) FROM {K}").fetchone()[0]
    conn.execute(f"INSERT INTO {K} SELECT * FROM {K} WHERE rowid = (SELECT MIN(rowid) FROM {K})")
    conn.commit()
    tree = tmp_path / "tree"
    tree.mkdir()
    shutil.copyfile(src, tree / "ex.sqlite")
    shutil.copyfile(str(src) + "-wal", tree / "ex.sqlite-wal")  # copied while open: the -wal is kept
    conn.close()
    return tree / "ex.sqlite", n + 1


def test_export_with_a_leftover_wal_is_read_without_writing_beside_it(tmp_path: Path) -> None:
    """SQLite created a -shm beside an export with a -wal and no -shm (inside a scanned tree too)."""
    path, kernels = _with_wal(tmp_path)
    before = _tree_state(path.parent)
    assert _kernels(path) == kernels  # the -wal's rows count
    assert main(["scan", str(path.parent), "--out", str(tmp_path / "out")]) == 0
    assert _tree_state(path.parent) == before  # no -shm, nothing changed


def test_locked_export_is_read_not_listed_as_not_a_trace(tmp_path: Path) -> None:
    """An export another process holds locked (a write in progress) was listed under 'not traces'."""
    path = _export(tmp_path / "tree" / "ex.sqlite") if (tmp_path / "tree").mkdir() is None else None
    assert path is not None
    want = _kernels(path)
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN EXCLUSIVE")
    writer.execute("CREATE TABLE scratch(x)")
    try:
        before = _tree_state(path.parent)
        assert _kernels(path) == want
        assert main(["scan", str(path.parent), "--out", str(tmp_path / "out")]) == 0
        index = (tmp_path / "out" / "index.md").read_text()
        assert "1 trace analysed" in index and "0 not traces" in index, index[:400]
        assert _tree_state(path.parent) == before
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_export_changed_while_read_is_an_error_not_a_torn_count(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import traceread.loaders.nsys.blocks as B

    path = _export(tmp_path / "ex.sqlite")
    runtime = B.runtime

    def rewritten_meanwhile(ex):  # another process rewrites the export between two tables
        out = runtime(ex)
        _sql(path, f"DELETE FROM {K} WHERE rowid % 2 = 0")
        return out

    monkeypatch.setattr(B, "runtime", rewritten_meanwhile)
    with pytest.raises(TraceReadError, match="changed while it was being read"):
        load(path)


def test_epoch_and_step_numbers_out_of_range_are_noted(tmp_path: Path) -> None:
    path = _export(tmp_path / "ex.sqlite")
    _sql(path, f"UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs = {2**63 - 1}",
         "UPDATE NVTX_EVENTS SET text = 'ProfilerStep#99999999999999999999, op_id = 1' "
         "WHERE text LIKE 'ProfilerStep#4,%'")
    tr = load(path)
    assert tr.meta.epoch_offset_ns is None and tr.meta.time_base == "session"
    assert any(w.startswith("TARGET_INFO_SESSION_START_TIME.utcEpochNs 9223372036854775807 is not a time")
               for w in map(words, tr.meta.warnings))
    assert "a step number is past 2^63-1: steps are numbered in time order instead" in [words(w) for w in tr.meta.warnings]
    assert tr.meta.steps["step"].tolist() == list(range(len(tr.meta.steps)))
    assert main(["analyze", "--json", str(tmp_path / "o.json"), "-o", str(tmp_path / "o.md"), str(path)]) == 0
    assert os.path.exists(tmp_path / "o.json")


@pytest.mark.parametrize("command", ["info", "scan"])
def test_malformed_schema_quoting_sql_over_lines_is_one_line(tmp_path: Path, command: str, capsys) -> None:
    """Found by scripts/fuzz_long.py (seed 2612): SQLite's 'malformed database schema' message quotes
    the damaged SQL, newlines and all, so the error was not one line."""
    path = _export(tmp_path / "in" / "ex.sqlite") if (tmp_path / "in").mkdir() is None else None
    assert path is not None
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA writable_schema=ON")
    conn.execute("UPDATE sqlite_master SET sql = 'CREATE TABLE ENUM_CUDA_MEM_KIND (`name TEXT,\n  -- a\n label TEXT\n)' "
                 "WHERE name = 'ENUM_CUDA_MEM_KIND'")
    conn.commit()
    conn.close()
    capsys.readouterr()
    if command == "info":
        assert main(["info", str(path)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and "malformed database schema" in err, err
    else:
        assert main(["scan", str(path.parent), "--out", str(tmp_path / "out")]) in (0, 2)
        failures = (tmp_path / "out" / "failures.md").read_text()
        assert 'unrecognized token: "\\`name TEXT, -- a label TEXT )")\n' in failures, failures  # one line


@pytest.mark.parametrize("device_id", [2**31 - 1, 2**40, 2**63 - 1, -5])
def test_a_device_id_past_int32_is_a_label_with_a_note_never_another_device(tmp_path, device_id) -> None:
    """Kernels pack their deviceId into 31 bits: 2^40 used to wrap to device 0 silently."""
    path = Path(write_nsys(plant(PlantSpec(seed=3, ranks=1, steps=4)).scenario, tmp_path / "d.sqlite"))
    with sqlite3.connect(path) as db:
        for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY"):
            db.execute(f"UPDATE {table} SET deviceId = ?", (device_id,))
    tr = load(str(path))
    gpu = tr.events[tr.events["lane"].astype(str).str.startswith("gpu")]
    assert set(gpu["device"].unique()) == {2**31 - 1}
    assert any("deviceId outside" in w for w in map(words, tr.meta.warnings))


@pytest.mark.parametrize("command", ["analyze", "diff"])
def test_a_time_near_minus_2_63_is_refused_in_one_line_not_an_overflow(tmp_path: Path, command: str, capsys) -> None:
    """fuzz_long seed 3105: NVTX starts set to -2^63 made the step window's length overflow int64 in
    the attribution (exit 3). The trace's span past 2^63-1 ns is refused, naming the file."""
    path = _export(tmp_path / "ex.sqlite")
    _sql(path, f"UPDATE {K} SET start = {-2**63} WHERE rowid = (SELECT MIN(rowid) FROM {K})")
    argv = ["analyze", str(path), "-o", str(tmp_path / "r.md")] if command == "analyze" else \
        ["diff", str(path), str(path), "--json", str(tmp_path / "d.json")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err and all(line.startswith(f"traceread: error: {path}: its events span ") for line in err)
    assert "not a time" in err[0]
