"""The compiled reader of nsys integer columns (``_cread.c``) against its Python twin (``read._fetch``).

Every column of every table, the loader's own packed expressions, and whole loads are read twice,
with the compiled reader and with ``TRACEREAD_NO_CREAD=1``, in many small rowid slices over several
reader threads, and must agree value for value; on damaged exports (the fuzz tests' mutations,
truncated and overwritten files) both must give the same trace or the same one-line error.
"""

from __future__ import annotations

import random
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import needs_shared, shared_nsys
from fuzz.fuzz_mutations import SQLITE_MUTATIONS, mutate_sqlite
from tracesynth.nsys_example import example_scenario
from tracesynth.nsys_writer import write_nsys

from traceread.cli import main
from traceread.errors import TraceReadError
from traceread.loaders.nsys import cread
from traceread.loaders.nsys import read as R
from traceread.runner import load  # with the runner's reader threads (READERS of them)
from traceread.runner.workers import THREADS

pytestmark = pytest.mark.skipif(cread._module() is None,
                                reason="the compiled nsys reader is not built (or no libsqlite3 found)")
K = "CUPTI_ACTIVITY_KIND_"


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(R, "CHUNK_ROWS", 7)
    monkeypatch.setattr(R, "READERS", 3)


def _mode(monkeypatch: pytest.MonkeyPatch, compiled: bool) -> None:
    monkeypatch.setenv(cread.DISABLE_ENV, "0" if compiled else "1")


def _outcome(fn):
    try:
        return "ok", fn()
    except (TraceReadError, sqlite3.Error, ValueError, TypeError, OverflowError) as exc:
        return "error", type(exc).__name__, str(exc)


def _columns(path: Path, monkeypatch: pytest.MonkeyPatch, compiled: bool) -> dict:
    """Each (table, column) read alone as an integer column, and each table's columns all at once."""
    _mode(monkeypatch, compiled)
    ex = R.open_export(str(path), THREADS)
    try:
        out = {}
        for table, cols in ex.columns.items():
            if table.startswith("__"):
                continue
            for c in cols:
                out[table, c] = _outcome(lambda t=table, c=c: ex.ints(t, {"v": f'"{c}"'})["v"])
            out[table, "*"] = _outcome(lambda t=table, cols=cols: ex.ints(t, {c: f'"{c}"' for c in cols}))
        return out
    finally:
        ex.close()


def _same_values(a, b) -> None:
    if isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _same_values(a[k], b[k])
        return
    assert a.dtype == b.dtype == np.int64
    np.testing.assert_array_equal(a, b)


def _assert_same_columns(path: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    """Compiled and Python column reads agree; returns how many reads succeeded."""
    py, c = _columns(path, monkeypatch, False), _columns(path, monkeypatch, True)
    assert list(py) == list(c)
    ok = 0
    for key in py:
        assert py[key][0] == c[key][0], (key, py[key], c[key])
        if py[key][0] == "ok":
            _same_values(py[key][1], c[key][1])
            ok += 1
        else:
            assert py[key] == c[key], key
    return ok


def _same_trace(a, b) -> None:
    pd.testing.assert_frame_equal(a.events, b.events, check_exact=True, check_categorical=True)
    assert list(a.side) == list(b.side)
    for name in a.side:
        pd.testing.assert_frame_equal(a.side[name], b.side[name], check_exact=True)
    for attr in ("generation", "time_base", "epoch_offset_ns", "devices", "ranks", "warnings", "extra"):
        assert getattr(a.meta, attr) == getattr(b.meta, attr), attr


def _load_both(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple:
    _mode(monkeypatch, False)
    py = _outcome(lambda: load(str(path)))
    _mode(monkeypatch, True)
    c = _outcome(lambda: load(str(path)))
    return py, c


def _assert_same_load(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    py, c = _load_both(path, monkeypatch)
    assert py[0] == c[0], (py, c)
    if py[0] == "ok":
        _same_trace(py[1], c[1])
    else:
        assert py == c


def _compiled_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the Python twin fail if called: the compiled reader must read every slice itself."""
    def refuse(*_a, **_k):
        raise AssertionError("the Python reader was used")
    monkeypatch.setattr(R, "_fetch", refuse)


@pytest.mark.parametrize("schema", ["2026", "2022"])
def test_generated_exports_read_the_same_column_by_column(tmp_path, schema, monkeypatch, small_chunks) -> None:
    path = write_nsys(example_scenario(n_ranks=2), tmp_path / f"ex_{schema}.sqlite", schema=schema)
    assert _assert_same_columns(Path(path), monkeypatch) > 20
    _assert_same_load(Path(path), monkeypatch)


@pytest.mark.parametrize("schema", ["2026", "2022"])
def test_the_compiled_reader_reads_a_plain_export_alone(tmp_path, schema, monkeypatch, small_chunks) -> None:
    path = write_nsys(example_scenario(n_ranks=2), tmp_path / f"ex_{schema}.sqlite", schema=schema)
    _mode(monkeypatch, False)
    want = load(str(path))
    _compiled_only(monkeypatch)
    _mode(monkeypatch, True)
    _same_trace(load(str(path)), want)
    assert len(want.side["kernel_args"]) > 0  # the lazy launch configuration read too


def _edit(path: Path, *statements: str) -> None:
    with sqlite3.connect(path) as db:
        for s in statements:
            db.execute(s)
    db.close()


def test_nulls_gaps_sparse_and_empty_tables(tmp_path, monkeypatch, small_chunks) -> None:
    path = Path(write_nsys(example_scenario(n_ranks=2), tmp_path / "ex.sqlite"))
    _edit(path,
          # NULLs in nullable columns the loader reads (coalesced to -1, or packed as 0)
          f"UPDATE {K}KERNEL SET correlationId = NULL, globalPid = NULL, graphId = NULL WHERE rowid % 3 = 0",
          f"UPDATE {K}RUNTIME SET correlationId = NULL, globalTid = NULL WHERE rowid % 5 = 0",
          f"UPDATE {K}MEMCPY SET srcKind = NULL WHERE rowid % 2 = 0",
          # rowid gaps and a sparse tail (a rowid of 2^62: read by rows, not by span)
          f"DELETE FROM {K}KERNEL WHERE rowid % 4 = 1",
          f"DELETE FROM {K}RUNTIME WHERE rowid BETWEEN 10 AND 40",
          f"UPDATE {K}KERNEL SET rowid = {2**62} WHERE rowid = (SELECT MAX(rowid) FROM {K}KERNEL)",
          # an empty table
          f"DELETE FROM {K}MEMSET")
    assert _assert_same_columns(path, monkeypatch) > 20
    _assert_same_load(path, monkeypatch)


def test_a_text_or_real_value_is_declined_and_read_by_python(tmp_path, monkeypatch, small_chunks) -> None:
    path = Path(write_nsys(example_scenario(n_ranks=1), tmp_path / "ex.sqlite"))
    _edit(path, f"UPDATE {K}KERNEL SET start = start + 0.5 WHERE rowid = 3",
          f"UPDATE {K}RUNTIME SET \"end\" = 'text' WHERE rowid = 5")
    _assert_same_columns(path, monkeypatch)
    py, c = _load_both(path, monkeypatch)
    assert py == c and py[0] == "error" and "wrong type" in py[2], py


@needs_shared
@pytest.mark.parametrize("path", shared_nsys(), ids=lambda p: p.name)
def test_real_exports_read_the_same(path, monkeypatch) -> None:
    monkeypatch.setattr(R, "CHUNK_ROWS", 1000)
    monkeypatch.setattr(R, "READERS", 3)
    assert _assert_same_columns(path, monkeypatch) > 0
    _assert_same_load(path, monkeypatch)


@pytest.mark.parametrize("kind", SQLITE_MUTATIONS)
def test_damaged_exports_give_the_same_trace_or_error(tmp_path, kind, monkeypatch, small_chunks) -> None:
    base = Path(write_nsys(example_scenario(n_ranks=2, steps=2), tmp_path / "base.sqlite"))
    for seed in range(3):
        d = tmp_path / f"{kind}-{seed}"
        d.mkdir()
        path = d / "ex.sqlite"
        shutil.copyfile(base, path)
        how = mutate_sqlite(random.Random(seed), path, kind)
        try:
            _assert_same_load(path, monkeypatch)
        except AssertionError as exc:
            raise AssertionError(f"{how}: {exc}") from None


@pytest.mark.parametrize("cut", [0.3, 0.6, 0.9])
def test_truncated_or_overwritten_export_is_the_same_one_line_error(tmp_path, cut, monkeypatch, capsys,
                                                                    small_chunks) -> None:
    base = Path(write_nsys(example_scenario(n_ranks=2, steps=2), tmp_path / "base.sqlite"))
    data = bytearray(base.read_bytes())
    truncated = tmp_path / "truncated.sqlite"
    truncated.write_bytes(bytes(data[:int(len(data) * cut)]))
    rnd = random.Random(int(cut * 10))
    for _ in range(40):  # pages past the schema overwritten: the tables' b-trees are damaged
        data[rnd.randrange(4096, len(data))] = rnd.randrange(256)
    damaged = tmp_path / "damaged.sqlite"
    damaged.write_bytes(bytes(data))
    for path in (truncated, damaged):
        results = []
        for compiled in (False, True):
            _mode(monkeypatch, compiled)
            capsys.readouterr()
            code = main(["info", str(path)])
            results.append((code, capsys.readouterr().err))
        assert results[0] == results[1], (path.name, results)
        code, err = results[0]
        assert code in (0, 2), results
        if code == 2:
            assert err.strip().count("\n") == 0 and str(path) in err, err
