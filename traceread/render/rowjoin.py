"""A table's rows laid out from its columns (``_cjoin.c``, compiled): the one step of the column-wise
CSV writer (``csv_table``: ``gaps --csv``) that goes row by row. (The JSON tables are columns since
report schema 2.0: orjson writes them, ``json_tables``, with no row layout; a categorical column's cells
are spread from its categories' texts by :func:`join`.)

Why compiled code and not a library's writer: ``pyarrow.csv``'s writer, given the same columns (the
evidence sentences made as str, the categories as dictionaries), took about 2.4x this writer's CPU
time on ``gaps --csv --derived`` of the 2M-kernel export (``scripts/bench_analyze.py --gaps-kernels``
makes it; the two writers timed in one process on the same frame), before the escaping it lacks
(control characters shown, formula cells neutralised, pandas' minimal quoting): beyond the 10% a
replacement may cost, and its quoting and number texts differ from pandas' CSV, which the CSV has
always matched. ``_cparts.c`` (``gather``: the evidence sentences laid out from their parts, no str per
row; ``--derived`` only) and ``_frepr.c`` (float64 cells as Python's ``repr`` without the GIL: the
``phase`` column, and the fractions with ``--derived``) are the parts of that time a library has no
equivalent for.

``join(pieces, columns, n, sep)``: row ``i`` is ``pieces[0] + cell(0, i) + pieces[1] + ... +
pieces[k]`` over the ``k`` columns, and the ``n`` rows are joined by ``sep``. A column is a list of
``n`` bytes, a triple ``(buf, starts, ends)`` of bytes and two arrays of ``n`` int64 positions
whose cell ``i`` is ``buf[starts[i]:ends[i]]`` (:func:`separated`: the cells of a buffer cut at a
separator; :func:`spread`: a table of distinct texts spread by code; no bytes object per cell), or
an array of ``n`` int64 or uint64 values, written in decimal (JSON's and CSV's integers).
:func:`gather` makes a triple from text kept as parts (:class:`TextParts`: a table of encoded
parts and codes per row), and the join and gather run without the GIL (a writer on a thread).
:func:`join_pieces` gives the same bytes as pieces of about a given size (a writer's buffer: written
while still in the CPU's cache, and reused by the allocator instead of fresh pages every chunk). The compiled join is used when it was built (``setup.py`` builds it
like the Kineto scanner, optionally); :func:`join_python` is its exact twin, used without a compiler
or with ``TRACEREAD_NO_CJOIN=1``; a test compares the two.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol, TypeAlias

import numpy as np
import pandas as pd

from traceread.extensions import optional, switched_off

DISABLE_ENV = "TRACEREAD_NO_CJOIN"
PIECE_BYTES = 1 << 20  # join_pieces' piece size: a fraction of a CPU cache, many rows (not a threshold)


class TextParts(Protocol):
    """Rows of text kept as their parts, as a writer reads them (the evidence sentences of
    ``Analysis.findings.evidence_chunks``, its ``parts``): row ``i`` is ``"".join(table[c] for c in
    codes[i])``; ``table[0]`` is ``""``, ``codes`` a C-contiguous ``(n, k)`` int32 matrix."""

    table: list[str]
    codes: np.ndarray

    def rows(self, at: np.ndarray | None = None) -> list[str]:
        """The texts of rows ``at`` (all: None) as str."""
        ...


class Later:
    """A column made when its block is joined (:func:`join_block`, on a writer's thread where it has
    one): ``fn(*args)``, a compiled step that needs no GIL (:func:`gather`'s layout of text kept as
    parts), so the thread encoding the next chunk's columns does not wait for it."""

    __slots__ = ("fn", "args")

    def __init__(self, fn: Any, *args: Any) -> None:
        self.fn, self.args = fn, args

    def made(self) -> Ready:
        return self.fn(*self.args)


# cells, (buffer, starts, ends), or 64-bit integers; a Column may also be one of these made when joined
Ready: TypeAlias = list[bytes] | tuple[bytes, np.ndarray, np.ndarray] | np.ndarray
Column: TypeAlias = Ready | Later


def made(column: Column) -> Ready:
    """``column`` itself, or what a :class:`Later` one makes."""
    return column.made() if isinstance(column, Later) else column


# None when built without a compiler: the Python twin joins (same bytes, slower)
COMPILED = optional("traceread.render._cjoin")


def separated(buf: bytes, sep: int, start: int = 0, end: int | None = None) -> tuple[bytes, np.ndarray, np.ndarray]:
    """``buf[start:end]`` cut at every byte ``sep``, as a ``(buf, starts, ends)`` column."""
    stop = len(buf) if end is None else end
    at = np.flatnonzero(np.frombuffer(buf, dtype=np.uint8, count=stop - start, offset=start) == sep) + start
    starts = np.empty(len(at) + 1, dtype=np.int64)
    starts[0] = start
    starts[1:] = at + 1
    return buf, starts, np.append(at, stop).astype(np.int64, copy=False)


def spread(cells: list[bytes], codes: np.ndarray) -> tuple[bytes, np.ndarray, np.ndarray]:
    """A table of a few distinct ``cells`` spread by ``codes`` (indices into it; -1 the last), as a
    ``(buf, starts, ends)`` column: no bytes object per row."""
    lengths = np.fromiter(map(len, cells), dtype=np.int64, count=len(cells))
    ends = np.cumsum(lengths)
    starts = ends - lengths
    return b"".join(cells), starts[codes], ends[codes]


def comma_spaced(cells: bytes) -> bytes:
    """``cells.replace(b",", b", ")`` (cells that hold no comma of their own: numbers), in one compiled pass."""
    if COMPILED is None or switched_off(DISABLE_ENV):
        return cells.replace(b",", b", ")
    return bytes(COMPILED.comma_spaced(cells))


def integers(a: np.ndarray) -> np.ndarray:
    """An integer array as a column (int64, or uint64 when unsigned 64-bit), contiguous."""
    return np.ascontiguousarray(a, dtype=np.uint64 if a.dtype == np.uint64 else np.int64)


def float_reprs(a: np.ndarray) -> Later | None:
    """A float64 array's cells as Python's ``repr`` (pandas' CSV text of a float64; NaN as nothing),
    formatted by the compiled module on the join's thread (:class:`Later`; ``_frepr.c``: without the GIL
    but for the few values it leaves to Python's own formatter); None without it (``csv_table`` then
    formats each distinct value with ``repr``: the twin)."""
    if COMPILED is None or switched_off(DISABLE_ENV):
        return None
    return Later(_reprs, np.ascontiguousarray(a, dtype=np.float64))


def _reprs(a: np.ndarray) -> tuple[bytes, np.ndarray, np.ndarray]:
    assert COMPILED is not None  # (float_reprs made this only with it)
    buf, offsets = COMPILED.reprs(a)
    at = np.frombuffer(offsets, dtype=np.int64)
    return buf, at[:-1], at[1:]


class SparseRows:
    """A sparse column's rows ``[lo, hi)`` made dense, as ``np.asarray(array[lo:hi])`` gives them, from
    its stored positions (pandas' slicing of a sparse array costs several times this per chunk)."""

    def __init__(self, array: pd.arrays.SparseArray) -> None:
        index: Any = array.sp_index  # an IntIndex or a BlockIndex (pandas' stubs name neither method)
        self.at = np.asarray(index.to_int_index().indices, dtype=np.int64)
        self.values = array.sp_values
        self.fill = array.fill_value
        self.dtype = np.asarray(array[:0]).dtype

    def __call__(self, lo: int, hi: int) -> np.ndarray:
        out = np.full(hi - lo, self.fill, dtype=self.dtype)
        a, b = np.searchsorted(self.at, [lo, hi]).tolist()
        out[self.at[a:b] - lo] = self.values[a:b]
        return out


def distinct(values: list) -> tuple[np.ndarray, list] | None:
    """``(codes, firsts)`` with ``firsts[codes[i]] is values[i]`` when at most half of ``values`` are
    distinct objects (the evidence sentences: rows sharing a sentence share its str), so that a writer
    encodes each distinct value once and spreads it (any encoding of a value is a function of the
    object); else None. By identity, so no value is hashed or compared."""
    if len(values) < 2:
        return None
    if COMPILED is None or switched_off(DISABLE_ENV):
        codes, firsts = distinct_python(values)
    else:
        raw, firsts = COMPILED.distinct(values)
        codes = np.frombuffer(raw, dtype=np.int64)
    return (codes, firsts) if 2 * len(firsts) <= len(values) else None


def distinct_python(values: list) -> tuple[np.ndarray, list]:
    """The compiled ``distinct``'s exact twin."""
    index: dict[int, int] = {}
    firsts: list = []
    codes = np.empty(len(values), dtype=np.int64)
    for i, v in enumerate(values):
        at = index.get(id(v))
        if at is None:
            at = index[id(v)] = len(firsts)
            firsts.append(v)
        codes[i] = at
    return codes, firsts


def take(column: tuple[bytes, np.ndarray, np.ndarray], codes: np.ndarray) -> tuple[bytes, np.ndarray, np.ndarray]:
    """A ``(buf, starts, ends)`` column's cells picked by ``codes`` (a table of cells spread)."""
    buf, starts, ends = column
    return buf, np.asarray(starts, dtype=np.int64)[codes], np.asarray(ends, dtype=np.int64)[codes]


def gather(table: tuple[bytes, np.ndarray, np.ndarray], codes: np.ndarray, pre: bytes = b"",
           post: bytes = b"") -> tuple[bytes, np.ndarray, np.ndarray]:
    """Rows of text kept as parts (:class:`TextParts`) laid out as a column: row ``i`` is ``pre`` + the
    cells ``codes[i, 0], codes[i, 1], ...`` of ``table`` (a column of the distinct parts, encoded) +
    ``post``. Compiled: no Python object per row, and without the GIL (a writer on a thread)."""
    codes = np.ascontiguousarray(codes, dtype=np.int32)
    n, k = codes.shape
    buf, starts, ends = table
    starts, ends = np.ascontiguousarray(starts, dtype=np.int64), np.ascontiguousarray(ends, dtype=np.int64)
    if k == 0:  # nothing but pre and post
        buf, starts, ends, codes, k = b"", np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64), np.zeros((n, 1), dtype=np.int32), 1
    if COMPILED is None or switched_off(DISABLE_ENV):
        out, offsets = gather_python(buf, starts, ends, codes, pre, post)
    else:
        out, raw = COMPILED.gather(buf, starts, ends, codes, k, pre, post)
        offsets = np.frombuffer(raw, dtype=np.int64)
    return out, offsets[:-1], offsets[1:]


def gather_python(buf: bytes, starts: np.ndarray, ends: np.ndarray, codes: np.ndarray, pre: bytes,
                  post: bytes) -> tuple[bytes, np.ndarray]:
    """The compiled gather's exact twin: ``(out, offsets)`` (a Python step per row)."""
    if (len(codes) and (codes.min() < 0 or codes.max() >= len(starts))) or \
            (len(starts) and (starts.min() < 0 or (starts > ends).any() or ends.max() > len(buf))):
        raise ValueError("gather: a code or cell outside its table")
    parts = [buf[a:b] for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]
    rows = [pre + b"".join([parts[c] for c in row]) + post for row in codes.tolist()]
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, rows), dtype=np.int64, count=len(rows)), out=offsets[1:])
    return b"".join(rows), offsets


def join(pieces: Sequence[bytes], columns: Sequence[Column], n: int, sep: bytes, lo: int = 0,
         hi: int | None = None) -> bytes:
    """The rows (module doc) as one bytes object; with ``lo``/``hi``: rows ``[lo, hi)`` of it, each row
    but row 0 after its ``sep`` (consecutive ranges concatenate to the whole)."""
    end = n if hi is None else hi
    ready = [made(c) for c in columns]
    if COMPILED is None or switched_off(DISABLE_ENV):
        return join_python(pieces, ready, n, sep, lo, end)
    return bytes(COMPILED.join(list(pieces), ready, n, sep, lo, end))


def join_pieces(pieces: Sequence[bytes], columns: Sequence[Column], n: int, sep: bytes,
                size: int = PIECE_BYTES) -> Iterator[bytes]:
    """:func:`join`'s bytes as consecutive pieces of about ``size`` bytes (whole rows; at least one).
    Compiled: in one call (``join_split``: pieces of at least ``size`` bytes but the last), so that a
    writer's thread takes the GIL a few times a block, not twice a piece."""
    ready = [made(c) for c in columns]
    if COMPILED is not None and not switched_off(DISABLE_ENV):
        yield from COMPILED.join_split(list(pieces), ready, n, sep, size)
        return
    lo, rows = 0, 64  # a first few rows measure the row size
    while lo < n:
        hi = min(n, lo + rows)
        piece = join(pieces, ready, n, sep, lo, hi)
        yield piece
        rows = max(1, size * (hi - lo) // max(1, len(piece)))
        lo = hi


Block: TypeAlias = tuple[Sequence[bytes], Sequence[Column], int, bytes]  # join_pieces' pieces, columns, n, sep


def join_block(block: Block) -> list[bytes]:
    """:func:`join_pieces` of one block as a list (its :class:`Later` columns made here): the step a
    writer may run on a thread (``runner.ahead.mapped_ahead``), as it holds no GIL when compiled."""
    pieces, columns, n, sep = block
    return list(join_pieces(pieces, columns, n, sep))


def cells(column: Column, n: int) -> list[bytes]:
    """A column's ``n`` cells as a list of bytes (for a few: tables, headers; and the Python twin)."""
    column = made(column)
    if isinstance(column, np.ndarray):
        if column.dtype not in (np.int64, np.uint64) or column.shape != (n,):
            raise ValueError("join: an integer column must be n int64 or uint64 values")
        return [b"%d" % v for v in column.tolist()]
    if isinstance(column, tuple):
        buf, starts, ends = column
        lo, hi = np.asarray(starts, dtype=np.int64).tolist(), np.asarray(ends, dtype=np.int64).tolist()
        if len(lo) != n or len(hi) != n:
            raise ValueError("join: starts and ends must be n int64 positions")
        return [buf[a:b] for a, b in zip(lo, hi, strict=True)]
    out = list(column)
    if len(out) != n:
        raise ValueError("join: a column's length is not n")
    return out


def join_python(pieces: Sequence[bytes], columns: Sequence[Column], n: int, sep: bytes, lo: int = 0,
                hi: int | None = None) -> bytes:
    """The compiled join's exact twin (a Python step per row: only for builds without a compiler)."""
    end = n if hi is None else hi
    if n < 0 or not 0 <= lo <= end <= n:
        raise ValueError("join: n must not be negative, and 0 <= lo <= hi <= n")
    if len(pieces) != len(columns) + 1:
        raise ValueError("join: pieces must be one more than columns")
    template = b"%b".join(p.replace(b"%", b"%%") for p in pieces)
    listed = [cells(c, n)[lo:end] for c in columns]
    # (no column: the one piece itself, as the template's %% would stay doubled without a % to apply)
    rows = [pieces[0]] * (end - lo) if not listed else [template % row for row in zip(*listed, strict=True)]
    return (sep if lo and end > lo else b"") + sep.join(rows)
