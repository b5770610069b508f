"""CSV written column by column (``render.csv_table``) is the bytes pandas' ``to_csv(index=False)``
writes for the same cells, and the row join's compiled and Python forms give the same bytes.

The reference is pandas itself, given the text cells already shown with ``\\xNN`` for control
characters (as every text output shows them), on hostile values (quotes, commas, line breaks,
controls, non-ASCII, empty and missing text), random floats across the whole float64 range, and a
gaps table of a generated trace written by ``traceread gaps --csv``.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tracesynth.nsys_writer import write_nsys
from tracesynth.planted import CLASSES, PlantSpec, plant

from traceread import load
from traceread.cli import main
from traceread.config import Thresholds
from traceread.engine.gaps import find_gaps, with_fractions
from traceread.engine.steps import find_steps
from traceread.printable import printable
from traceread.render import csv_table, rowjoin
from traceread.rules import classify

TEXT = ["a\x1b]0;x\x07", 'q"uo\\te', "100% %b %s", "\u009b\u00b5s /home/u/x.py", None, float("nan"), "",
        "\x7f", "a,b", '"', "x\ny", "\u65e5\u672c,\u8a9e", "\r", ",", 'p,"q"', " lead", "tab\there"]


def _reference(df: pd.DataFrame) -> bytes:
    """pandas' CSV of ``df`` with every text cell shown printable (missing cells kept missing)."""
    df = df.copy()
    for c in df.columns:
        if df[c].dtype == object or isinstance(df[c].dtype, pd.CategoricalDtype):
            df[c] = df[c].astype(object).map(lambda v: _neutral(printable(v)) if isinstance(v, str) else v)
    out = io.StringIO()
    df.to_csv(out, index=False)
    return out.getvalue().encode()


def _neutral(text: str) -> str:
    """A text cell that would start a spreadsheet formula, with the apostrophe that makes it text."""
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


def _written(df: pd.DataFrame) -> bytes:
    return b"".join(csv_table.csv_chunks([csv_table.CsvColumn(str(c), df[c]) for c in df.columns], len(df)))


def _hostile() -> pd.DataFrame:
    n = len(TEXT)
    return pd.DataFrame({
        "i": np.arange(n, dtype=np.int64) * 10**15 - 7, "j": np.arange(n, dtype=np.int32) - 3,
        "u": np.arange(n, dtype=np.uint8),
        "f": np.array([0.1, 1e-7, 1e16, np.nan, 2.5, -0.0, 1 / 3, 123456.789, np.inf, -np.inf, 0.0, 5e-324,
                       1e300, 2.0, np.nan, 1e-5, 9007199254740993.0], dtype=np.float64),
        "h": np.linspace(0, 1, n).astype(np.float32), "b": np.arange(n) % 3 == 0,
        "s": pd.Series(TEXT, dtype=object),
        "c": pd.Categorical(["x", None, "y\x9b", "=x", "%", None, "y\x9b", "z", "a,b", 'q"', "x", "x", "", "z",
                             "z", "\n", "x"]),
        "sp": pd.arrays.SparseArray(np.arange(n, dtype=np.int64) % 4 * 5, fill_value=0),
        "o": pd.Series([1, 2.5, True, None, "t", b"x", float("nan"), 3, "@x", 5, 6, 7, 8, 9, 10, -1, 0], dtype=object),
        "fo": pd.Series(["=HYPERLINK(\"http://x\",\"y\")", "+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)", "a=b", "\t=1",
                         "\r=1", "", None, "=", "-", "x", "+", "@", "=a,b", "\n=", "ok"], dtype=object),
        'we"ird,name': np.arange(n),
    })


@pytest.mark.parametrize("chunk", [4, 65_536])
@pytest.mark.parametrize("compiled", [True, False])
def test_hostile_cells_write_as_pandas_does(chunk: int, compiled: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(csv_table, "CHUNK_ROWS", chunk)
    if not compiled:
        monkeypatch.setenv(rowjoin.DISABLE_ENV, "1")
    df = _hostile()
    got = _written(df)
    assert got == _reference(df)
    assert b"\x1b" not in got and b"\\x1b" in got  # shown, never raw


@pytest.mark.parametrize("compiled", [True, False])
def test_floats_and_integers_across_their_range_write_as_pandas_does(compiled: bool,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    if not compiled:
        monkeypatch.setenv(rowjoin.DISABLE_ENV, "1")
    rng = np.random.default_rng(3)
    raw = np.frombuffer(rng.bytes(8 * 30_000), dtype=np.float64)  # every exponent, NaN payloads too
    df = pd.DataFrame({"f": np.concatenate([rng.random(30_000), rng.random(30_000) * 1e-6, raw]),
                       "k": rng.integers(-2**63, 2**63 - 1, 90_000),
                       "u": rng.integers(0, 2**64 - 1, 90_000, dtype=np.uint64),
                       "b": rng.random(90_000) < 0.5,
                       "z": np.where(rng.random(90_000) < 0.5, 0.0, -0.0), "e": np.array([np.inf, -np.inf, 0.0] * 30_000)})
    assert _written(df) == _reference(df)


@pytest.mark.parametrize("chunk", [1, 3, 65_536])
@pytest.mark.parametrize("compiled", [True, False])
def test_columns_of_one_value_write_as_pandas_does(chunk: int, compiled: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Columns whose chunk holds one value (folded into the constant text between cells, not joined cell
    by cell), beside columns that vary; a one-row chunk folds every column."""
    monkeypatch.setattr(csv_table, "CHUNK_ROWS", chunk)
    if not compiled:
        monkeypatch.setenv(rowjoin.DISABLE_ENV, "1")
    n = 7
    df = pd.DataFrame({
        "zero": np.zeros(n, dtype=np.int64), "neg": np.full(n, -2**63, dtype=np.int64),
        "umax": np.full(n, 2**64 - 1, dtype=np.uint64), "vary": np.arange(n, dtype=np.int32) - 3,
        "sp": pd.arrays.SparseArray(np.zeros(n, dtype=np.int64), fill_value=0),
        "sp2": pd.arrays.SparseArray(np.array([0, 0, 0, 0, 0, 9, 0], dtype=np.int64), fill_value=0),
        "quoted": pd.Categorical(['a,"b"'] * n), "formula": pd.Categorical(["=x"] * n),
        "cat": pd.Categorical(["x", "x", "x", "y", "y", None, None]), "flag": np.ones(n, dtype=bool),
        "f": np.full(n, 0.1), "text": pd.Series(["same"] * n, dtype=object), "empty": pd.Series([""] * n, dtype=object),
    })
    assert _written(df) == _reference(df)
    hostile = _hostile()
    assert _written(hostile) == _reference(hostile)


def test_repeated_text_writes_as_pandas_does() -> None:
    """Text whose rows share a few values (escaped once per distinct value, then spread)."""
    values = [t for t in TEXT if isinstance(t, str)]
    df = pd.DataFrame({"s": pd.Series([values[i % len(values)] for i in range(100)], dtype=object),
                       "n": np.arange(100)})
    assert _written(df) == _reference(df)


def test_empty_table_is_its_header() -> None:
    df = _hostile().iloc[:0]
    assert _written(df) == _reference(df)


def test_gaps_csv_of_a_generated_trace_is_pandas_csv_of_its_gaps(tmp_path: Path) -> None:
    """``gaps --csv`` against pandas' own CSV of the classified gaps (with ``--derived``: with their
    fractions and evidence sentences, in their places)."""
    p = plant(PlantSpec(seed=8, ranks=1, steps=6, weights={c: 1.0 for c in CLASSES}))
    path = tmp_path / "t.sqlite"
    write_nsys(p.scenario, str(path))
    out, derived = tmp_path / "g.csv", tmp_path / "derived.csv"
    assert main(["gaps", str(path), "--csv", str(out)]) == 0
    assert main(["gaps", str(path), "--csv", str(derived), "--derived"]) == 0
    cfg = Thresholds()
    tr = load(str(path))
    steps = find_steps(tr, cfg).steps
    gaps = classify(find_gaps(tr, steps, cfg), steps, tr, cfg)
    assert len(gaps) > 50
    assert derived.read_bytes() == _reference(with_fractions(gaps))
    assert out.read_bytes() == _reference(gaps.drop(columns=["evidence"]))


@pytest.mark.parametrize("seed", range(4))
def test_compiled_join_equals_its_python_twin(seed: int) -> None:
    if rowjoin.COMPILED is None:
        pytest.skip("the compiled join was not built")
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 50))
    cells = [[bytes(rng.integers(0, 256, int(rng.integers(0, 6)), dtype=np.uint8)) for _ in range(n)] for _ in range(3)]
    numbers = rng.integers(-10**6, 10**6, n)
    buf = ("[" + ",".join(map(str, numbers.tolist())) + "]").encode()
    none = np.zeros(0, dtype=np.int64)
    triple = rowjoin.separated(buf, ord(","), 1, len(buf) - 1) if n else (buf, none, none)
    pieces = [b"<", b"%b", b"", b"|%%|", b">"]
    columns: list = [cells[0], triple, cells[1], cells[2]]
    expected = b",\n".join(b"<" + a + b"%b" + str(v).encode() + b"" + b + b"|%%|" + c + b">"
                           for a, v, b, c in zip(cells[0], numbers.tolist(), cells[1], cells[2], strict=True))
    assert rowjoin.join_python(pieces, columns, n, b",\n") == expected
    assert rowjoin.COMPILED.join(pieces, columns, n, b",\n") == expected
    # cells of every length around the compiled join's short-copy size, some at the buffer's very end
    table = [bytes(rng.integers(0, 256, length, dtype=np.uint8)) for length in range(40)]
    codes = rng.integers(-1, 40, n)
    spread = rowjoin.spread(table, codes)
    assert rowjoin.COMPILED.join([b"[", b"]"], [spread], n, b"") == b"".join(b"[" + table[c] + b"]" for c in codes)


def test_compiled_join_refuses_bad_columns() -> None:
    if rowjoin.COMPILED is None:
        pytest.skip("the compiled join was not built")
    join = rowjoin.COMPILED.join
    with pytest.raises(ValueError):
        join([b"", b""], [[b"a"]], 2, b",")  # a column shorter than n
    with pytest.raises(TypeError):
        join([b"", b""], [["a", "b"]], 2, b",")  # str cells
    with pytest.raises(ValueError):
        join([b""], [[b"a"]], 1, b",")  # pieces not one more than columns
    def at(*v: int, dtype: type = np.int64) -> np.ndarray:
        return np.array(v, dtype=dtype)

    assert join([b"<", b">"], [(b"abc", at(1), at(3))], 1, b",") == b"<bc>"
    with pytest.raises(ValueError):
        join([b"", b""], [(b"abc", at(0), at(4))], 1, b",")  # past the buffer
    with pytest.raises(ValueError):
        join([b"", b""], [(b"abc", at(2), at(1))], 1, b",")  # ends before it starts
    with pytest.raises(ValueError):
        join([b"", b""], [(b"abc", at(-1), at(1))], 1, b",")  # before the buffer
    with pytest.raises(ValueError):
        join([b"", b""], [(b"abc", at(0, dtype=np.int32), at(1, dtype=np.int32))], 1, b",")  # not int64
    with pytest.raises(ValueError):
        join([b"", b""], [(b"abc", at(0, 1), at(1, 2))], 1, b",")  # not n positions


def test_spread_and_separated_cells() -> None:
    """The two ways a column's cells avoid a bytes object each, read back cell by cell."""
    assert rowjoin.cells(rowjoin.spread([b"x", b"", b"yz"], np.array([2, 0, -1, 1, 0])), 5) == \
        [b"yz", b"x", b"yz", b"", b"x"]
    assert rowjoin.cells(rowjoin.separated(b"[1,-22,,3]", ord(","), 1, 9), 4) == [b"1", b"-22", b"", b"3"]
