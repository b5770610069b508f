"""A table as CSV written column by column: the bytes of pandas' ``to_csv(index=False)`` (``na_rep``
'', minimal quoting, ``os.linesep`` after every row) for the dtypes of a gaps frame, without a
Python object per row.

Each column of a chunk of rows is formatted once: integers in decimal by the join itself, floats as
numpy's ``astype(str)`` (what pandas calls; for float64 that is Python's ``repr``) once per distinct
value, booleans and categories from a table of their few texts, text cells joined and escaped as one
buffer (numpy finds the cells to quote), or, for text kept as parts (the evidence sentences:
``Analysis.findings.evidence_chunks``' ``parts``), each distinct part shown and escaped once and the rows laid out in C
(``_Parts``); ``rowjoin.join_pieces`` lays the rows out (pieces of about a megabyte). Text cells are shown with control characters as ``\\xNN`` (``printable``), as every text
output is; a missing value is always written as '' (the row-wise writer wrote 'nan'/'None' in a
chunk where the same column also held a control character).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd

from traceread.printable import BIDI_UTF8_LEADS, printable
from traceread.render import rowjoin

CHUNK_ROWS = 65_536  # rows formatted at a time: bounds the chunk's bytes, not a threshold
_C0_BUT_NL = bytes([*range(0x0A), *range(0x0B, 0x20), 0x7F])  # C0 but the joining newline, and DEL
_C1 = re.compile(rb"\xc2[\x80-\x9f]")
_BIDI = re.compile(rb"\xd8\x9c|\xe2\x80[\x8e\x8f\xaa-\xae]|\xe2\x81[\xa6-\xa9]")  # printable.BIDI_CHARS in UTF-8
_QUOTE, _COMMA, _NL = ord('"'), ord(","), ord("\n")


@dataclass(frozen=True)
class CsvColumn:
    """One column: its values (``rows`` long), or ``chunk``: the values of rows [lo, hi), asked for
    one chunk at a time (text formatted only for the rows being written, derived numbers)."""

    name: str
    values: pd.Series | np.ndarray | None = None
    chunk: Callable[[int, int], np.ndarray | pd.Series] | None = None


def text_cells(values: list) -> list[rowjoin.Column]:
    """Text cells as pandas writes them: '' for missing, ``str`` of anything else, control characters
    shown as ``\\xNN``, quoted (quotes doubled) where a comma or quote is inside (a line break is shown
    as ``\\x0a``). As ``rowjoin`` columns: the cells, or an opening quote (or nothing), the cells and a
    closing quote, so that quoting moves no bytes."""
    if not values:
        return [[]]
    arr = np.asarray(values, dtype=object)
    text = None  # which cells are text (None: all); a number, even -1, is no formula
    if pd.api.types.infer_dtype(arr, skipna=False) != "string":  # a C pass; rare
        text = np.array([isinstance(v, str) for v in values], dtype=bool)
        missing = pd.isna(arr)
        arr = np.array(["" if m else v if isinstance(v, str) else str(v) for v, m in zip(values, missing.tolist(),
                                                                                     strict=True)] + [""],
                       dtype=object)[:len(values)]
    joined = "\n".join(arr.tolist())
    buf = joined.encode("utf-8")
    if _has_control(buf) or joined.count("\n") != len(arr) - 1:  # a hostile name: rare
        buf = "\n".join([printable(v) for v in arr.tolist()]).encode("utf-8")
    u8 = np.frombuffer(buf, dtype=np.uint8)
    newlines = np.flatnonzero(u8 == _NL)
    formula = _formula_cells(u8, newlines, text)
    special = np.flatnonzero((u8 == _COMMA) | (u8 == _QUOTE))
    if not len(special):
        return [rowjoin.separated(buf, _NL)] if formula is None else [formula, rowjoin.separated(buf, _NL)]
    quoted = np.zeros(len(arr), dtype=np.uint8)
    quoted[np.searchsorted(newlines, special)] = 1  # the cells holding one
    if buf.find(b'"') >= 0:
        buf = buf.replace(b'"', b'""')
    mark = rowjoin.spread([b"", b'"'], quoted)
    return [mark, *([] if formula is None else [formula]), rowjoin.separated(buf, _NL), mark]


# CSV injection: a cell starting with one of these is a formula to a spreadsheet (=HYPERLINK(...),
# +cmd|..., -2+3, @SUM(...)). Such a text cell gets a leading apostrophe, so that it reads as text
# (the usual defence; docs/reliability.md). Tab and carriage return, the other two starters, never
# lead a cell: control characters are shown as ``\x09`` first.
FORMULA_STARTS = b"=+-@"
_FORMULA = np.zeros(256, dtype=bool)
_FORMULA[list(FORMULA_STARTS)] = True


def _formula_cells(u8: np.ndarray, newlines: np.ndarray, text: np.ndarray | None = None) -> rowjoin.Column | None:
    """The apostrophe (or nothing) before each cell of the newline-joined ``u8`` that would start a
    formula (of the ``text`` cells, all when None), as a ``rowjoin`` column; None when no cell does
    (the usual case: nothing added)."""
    if not len(u8):
        return None
    starts = np.concatenate([np.zeros(1, np.int64), newlines + 1])
    hit = _FORMULA[u8[np.minimum(starts, len(u8) - 1)]] & (starts < len(u8))  # an empty cell starts at a newline
    if text is not None:
        hit &= text
    if not hit.any():
        return None
    return rowjoin.spread([b"", b"'"], hit.view(np.uint8))


def _listed(values: list) -> list[bytes]:
    """A few text cells (categories, the header) as whole bytes, quotes included."""
    columns = text_cells(values)
    return rowjoin.join([b""] * (len(columns) + 1), columns, len(values), b"\n").split(b"\n") if values else []


def _has_control(buf: bytes) -> bool:
    """Whether UTF-8 ``buf`` holds a control character other than the joining newline (C1 is
    0xC2 0x80-0x9F); ``bytes.translate``/``find`` are C passes (a regex scans several times slower)."""
    if len(buf.translate(None, _C0_BUT_NL)) != len(buf):
        return True
    if any(buf.find(lead) >= 0 for lead in BIDI_UTF8_LEADS) and _BIDI.search(buf) is not None:
        return True
    return buf.find(b"\xc2") >= 0 and _C1.search(buf) is not None


def _floats(a: np.ndarray) -> rowjoin.Column:
    """``a.astype(str)`` (pandas' call; NaN as '') once per distinct value (bit pattern: -0.0 stays).
    Zeros (most overlap fractions: nothing of that kind overlapped) are left out of the sort."""
    bits = a.view(np.dtype(f"i{a.dtype.itemsize}"))
    codes = np.zeros(len(a), dtype=np.int64)  # code 0: 0.0 (all bits zero)
    nonzero = np.flatnonzero(bits)
    uniq, inverse = np.unique(bits[nonzero], return_inverse=True)
    codes[nonzero] = inverse.reshape(-1) + 1
    u = np.concatenate([np.zeros(1, dtype=a.dtype), uniq.view(a.dtype)])
    # float64: Python's repr, which is numpy's str of a float64 (and faster); narrower floats have their own
    texts = list(map(repr, u.tolist())) if a.dtype == np.float64 else u.astype(str).tolist()
    for i in np.flatnonzero(np.isnan(u)).tolist():  # NaN bit patterns: a few at most
        texts[i] = ""
    return rowjoin.spread("\n".join(texts).encode().split(b"\n"), codes)


def number_cells(a: np.ndarray) -> rowjoin.Column | None:
    """A numeric array's cells as pandas writes them; None when ``a`` is not numbers or booleans."""
    if a.dtype.kind == "b":
        return rowjoin.spread([b"False", b"True"], a.view(np.uint8))
    if a.dtype.kind in "iu":  # written in decimal by the join (Python's str of an integer)
        return rowjoin.integers(a)
    if a.dtype == np.float64 and (cells := rowjoin.float_reprs(a)) is not None:
        return cells
    if a.dtype.kind == "f":
        return _floats(np.ascontiguousarray(a))
    return None


class _Parts:
    """Text kept as parts (``rowjoin.TextParts``: the evidence sentences) as CSV cells: each distinct part
    shown (``printable``) and its quotes doubled once (both character by character, so the parts
    concatenate to the sentence's cell), a row quoted where a part holds a comma or quote, the rows
    laid out by ``rowjoin.gather``."""

    def __init__(self) -> None:
        self.table: list[str] | None = None  # the table encoded below (kept: its id is the key)
        self.cells: tuple[bytes, np.ndarray, np.ndarray] = (b"", np.zeros(0, np.int64), np.zeros(0, np.int64))
        self.special = np.zeros(0, dtype=bool)  # per part: holds a comma or quote
        self.formula = np.zeros(0, dtype=bool)  # per part: starts with a formula character
        self.empty = np.zeros(0, dtype=bool)  # per part: ''

    def cells_of(self, t: rowjoin.TextParts) -> list[rowjoin.Column]:
        if t.table is not self.table:  # as text_cells escapes a chunk's texts, once per table
            joined = "\n".join(t.table)
            buf = joined.encode("utf-8")
            if _has_control(buf) or joined.count("\n") != len(t.table) - 1:  # a hostile name: rare
                buf = "\n".join([printable(p) for p in t.table]).encode("utf-8")
            u8 = np.frombuffer(buf, dtype=np.uint8)
            starts = np.concatenate([np.zeros(1, np.int64), np.flatnonzero(u8 == _NL) + 1])
            ends = np.append(starts[1:] - 1, len(u8))
            self.empty = ends == starts
            self.formula = ~self.empty & _FORMULA[u8[np.minimum(starts, max(len(u8) - 1, 0))]] if len(u8) else \
                np.zeros(len(t.table), dtype=bool)
            self.special = np.zeros(len(t.table), dtype=bool)
            self.special[np.searchsorted(np.flatnonzero(u8 == _NL), np.flatnonzero((u8 == _COMMA) | (u8 == _QUOTE)))] = True
            if buf.find(b'"') >= 0:
                buf = buf.replace(b'"', b'""')
            self.cells = rowjoin.separated(buf, _NL)
            self.table = t.table
        text = rowjoin.Later(rowjoin.gather, self.cells, t.codes)  # laid out on the join's thread
        formula = self._formula_rows(t.codes)
        shown: list[rowjoin.Column] = [text] if formula is None else [formula, text]
        if not self.special.any() or not t.codes.shape[1]:
            return shown
        mark = rowjoin.spread([b"", b'"'], self.special[t.codes].any(axis=1).view(np.uint8))
        return [mark, *shown, mark]

    def _formula_rows(self, codes: np.ndarray) -> rowjoin.Column | None:
        """The apostrophe before rows whose first non-empty part starts a formula (as text_cells)."""
        if not self.formula.any() or not codes.shape[1]:
            return None
        hit = np.zeros(len(codes), dtype=bool)
        decided = np.zeros(len(codes), dtype=bool)
        for k in range(codes.shape[1]):  # parts per row: a few
            c = codes[:, k]
            now = ~decided & ~self.empty[c]
            hit |= now & self.formula[c]
            decided |= now
        return rowjoin.spread([b"", b"'"], hit.view(np.uint8)) if hit.any() else None


class _Column:
    """Formats rows [lo, hi) of one column (categories once)."""

    def __init__(self, c: CsvColumn) -> None:
        self.chunk, self.codes = c.chunk, None
        self.values: np.ndarray | pd.api.extensions.ExtensionArray | None = None
        self.table: list[bytes] = []
        # a chunk that can give its text as parts (``Analysis.findings.evidence_chunks``), and their encoder
        self.parts: Callable[[int, int], rowjoin.TextParts | None] | None = getattr(c.chunk, "parts", None)
        self.encoder = _Parts()
        if c.chunk is not None:
            return
        s = c.values if isinstance(c.values, pd.Series) else pd.Series(c.values)
        if isinstance(s.dtype, pd.CategoricalDtype):
            # code -1 (missing) reads the last cell, ''
            cats = s.cat.categories.tolist()
            self.table = _listed(cats) + [b""]
            self.codes = s.cat.codes.to_numpy()
        elif isinstance(s.dtype, pd.SparseDtype):
            self.chunk = rowjoin.SparseRows(s.array)  # made dense a chunk at a time
        else:
            self.values = s.to_numpy()

    def cells(self, lo: int, hi: int) -> list[rowjoin.Column]:
        """The rows' cells as one ``rowjoin`` column, or several laid side by side (quoted text)."""
        if self.codes is not None:
            return [rowjoin.spread(self.table, self.codes[lo:hi])]
        if self.parts is not None and (t := self.parts(lo, hi)) is not None:
            try:
                return self.encoder.cells_of(t)
            except UnicodeEncodeError:  # a lone surrogate: the str path below raises as it always did
                pass
        values = self.chunk(lo, hi) if self.chunk is not None else self.values[lo:hi]  # type: ignore[index]
        a = np.asarray(values)
        if a.dtype != object and (cells := number_cells(a)) is not None:
            return [cells]
        items = a.astype(object).tolist()
        if (shared := rowjoin.distinct(items)) is not None:  # each distinct text escaped once
            codes, texts = shared
            return [rowjoin.take(c, codes) for c in text_cells(texts)]  # type: ignore[arg-type]
        return text_cells(items)


def _one_cell(column: rowjoin.Column) -> bytes | None:
    """The one text every cell of ``column`` holds (integers or cells of a buffer), or None: cells that
    differ, or a column made when joined (``rowjoin.Later``) or given as a list."""
    if isinstance(column, np.ndarray):
        if len(column) and column[0] == column.min() == column.max():
            return b"%d" % int(column[0])
        return None
    if isinstance(column, tuple):
        buf, starts, ends = column
        if len(starts) and starts.min() == starts.max() and ends.min() == ends.max():
            return buf[int(starts[0]):int(ends[0])]
    return None


# ``ahead(blocks, rowjoin.join_block)``: the blocks' rows laid out, in order (``runner.ahead.mapped_ahead``
# does it on a thread while the next block is made)
Ahead = Callable[[Iterator[rowjoin.Block], Callable[[rowjoin.Block], list[bytes]]], Iterator[list[bytes]]]


def _in_turn(blocks: Iterator[rowjoin.Block], fn: Callable[[rowjoin.Block], list[bytes]]) -> Iterator[list[bytes]]:
    return map(fn, blocks)


def csv_chunks(columns: list[CsvColumn], rows: int, lineterminator: str = os.linesep,
               ahead: Ahead | None = None) -> Iterator[bytes]:
    """The CSV's bytes (header first), a chunk of rows at a time; ``ahead`` lays each chunk's rows out
    (by default here, in turn)."""
    end = lineterminator.encode()
    yield b",".join(_listed([c.name for c in columns])) + end
    formatters = [_Column(c) for c in columns]

    def blocks() -> Iterator[rowjoin.Block]:
        for lo in range(0, rows, CHUNK_ROWS):
            hi = min(rows, lo + CHUNK_ROWS)
            parts = [f.cells(lo, hi) for f in formatters]
            # Nothing between a column's parts, a comma between columns; a column whose cells are all one
            # text in this chunk (an overlap kind that never occurs, an empty quote mark, the one rank) is
            # that text in the constant pieces around it, not a column the join formats cell by cell.
            pieces: list[bytes] = []
            laid: list[rowjoin.Column] = []
            pending = b""
            for i, part in enumerate(parts):
                for column in part:
                    if (same := _one_cell(column)) is None:
                        pieces.append(pending)
                        laid.append(column)
                        pending = b""
                    else:
                        pending += same
                if i < len(parts) - 1:
                    pending += b","
            pieces.append(pending)
            yield pieces, laid, hi - lo, end

    for block in (ahead or _in_turn)(blocks(), rowjoin.join_block):
        yield from block
        yield end
