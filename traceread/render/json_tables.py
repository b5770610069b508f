"""Tables of a JSON document written column by column: the bytes ``json_text.dumps`` would give for a
list of one object per row, without building a Python dict per row.

Each column is encoded once by orjson (float columns as numpy arrays, text columns as one list,
categories once per category; integers are written by the join itself), a chunk of rows at a time,
and the rows are laid out by ``rowjoin.join_pieces`` (compiled: one copy per cell, pieces of about a
megabyte), so memory is bounded by a chunk and the cost by C loops. DEL and C1 characters are escaped
(``printable_json``) in the text columns' encodings, the only place they can be. A field may give its values a chunk at a time (``Field.chunk``: text formatted only for the
rows being written, derived columns computed per chunk); a chunk function with a ``parts`` method
(``Analysis.findings.evidence_chunks``) gives its text as parts, escaped once per distinct part and laid
out in C (``_Parts``: no str per row). The layout is orjson's
``OPT_INDENT_2`` at the depth the table sits in the document (a list under a top-level key); the
tests compare the result with ``json_text.dumps`` of the same records.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
import pandas as pd

from traceread.printable import printable_json
from traceread.render import json_text, rowjoin

CHUNK_ROWS = 16_384  # rows encoded at a time: bounds the per-chunk bytes objects, not a threshold


@dataclass(frozen=True)
class Field:
    """One key of every row: its values (``rows`` long), or ``group``: a nested object of fields."""

    key: str
    values: np.ndarray | pd.Series | None = None
    # applied to the string values holding a path separator (path scrubbing: the identity on the rest)
    text: Callable[[str], str] | None = None
    group: tuple[Field, ...] = ()
    # as ``frame.astype({categorical: str}).to_dict("records")`` gives them (``gaps --json``): text
    # cells as they are (None as null), a categorical's missing value as 'nan'
    raw: bool = False
    # instead of ``values``: the values of rows [lo, hi) (numbers, or text objects), asked for one
    # chunk at a time, so that they exist for those rows only
    chunk: Callable[[int, int], np.ndarray | pd.Series] | None = None


def _is_text(s: pd.Series) -> bool:
    return isinstance(s.dtype, pd.CategoricalDtype) or s.dtype == object or pd.api.types.is_string_dtype(s)


def _lines(values: list) -> list[bytes]:
    """Each value's JSON text (orjson's encoding and escaping; one line per value as indented output)."""
    if not values:
        return []
    body = printable_json(orjson.dumps(values, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY)).split(b"\n")[1:-1]
    last = body.pop()[2:]
    out = [ln[2:-1] for ln in body]
    out.append(last)
    return out


def _line_cells(values: list) -> rowjoin.Column:
    """:func:`_lines` as a ``(buf, starts, ends)`` column: each line of the indented list without its
    indent and comma (no bytes object per value)."""
    if not values:
        return []
    buf = printable_json(orjson.dumps(values, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))
    at = np.flatnonzero(np.frombuffer(buf, dtype=np.uint8) == ord("\n"))  # after "[", then after each value
    ends = at[1:] - 1  # before the comma...
    ends[-1] += 1  # ...which the last value has not
    return buf, at[:-1] + 3, ends


def _unquoted_cells(values: list[str]) -> tuple[bytes, np.ndarray, np.ndarray]:
    """:func:`_line_cells` of (at least one) str without their quotes: the escaped texts."""
    cells = _line_cells(values)
    assert isinstance(cells, tuple)
    buf, starts, ends = cells
    return buf, starts + 1, ends - 1


def text_values(values: list, text: Callable[[str], str] | None) -> list[str]:
    """As the report always wrote text cells: '' for missing, ``str`` of anything else, then ``text``
    (given ``text`` only where a value holds a path separator: the one change ``scrub_paths`` makes)."""
    arr = np.asarray(values, dtype=object)
    if len(arr) and pd.api.types.infer_dtype(arr, skipna=False) != "string":  # a C pass; rare
        arr = np.array(["" if v is None or (isinstance(v, float) and v != v) else v if isinstance(v, str) else str(v)
                        for v in values] or [""], dtype=object)[:len(values)]
    if text is not None and len(arr):
        for i in _holding_separator(arr.tolist()).tolist():
            arr[i] = text(arr[i])
    return arr.tolist()


def _holding_separator(values: list[str]) -> np.ndarray:
    """Indices of the strings holding '/' or '\\', found by numpy in the joined UTF-8 bytes."""
    joined = "\n".join(values)
    count = joined.count("/") + joined.count("\\")
    if not count:
        return np.zeros(0, dtype=np.int64)
    if joined.count("\n") != len(values) - 1:  # a value holds a line break: value by value (rare)
        return np.flatnonzero(["/" in v or "\\" in v for v in values])
    if count * 16 < len(values):  # a few (evidence sentences rarely hold one): found by str.find
        return np.unique(np.array(_rows_holding(joined, "/") + _rows_holding(joined, "\\"), dtype=np.int64))
    u8 = np.frombuffer(joined.encode("utf-8", "surrogatepass"), dtype=np.uint8)
    hits = np.flatnonzero((u8 == ord("/")) | (u8 == ord("\\")))
    return np.unique(np.searchsorted(np.flatnonzero(u8 == ord("\n")), hits))


def _rows_holding(joined: str, sep: str) -> list[int]:
    """The lines of ``joined`` holding ``sep``, by their number (a step per such line)."""
    rows: list[int] = []
    row, at = 0, 0  # the line starting at position ``at``
    pos = joined.find(sep)
    while pos >= 0:
        row += joined.count("\n", at, pos)
        rows.append(row)
        end = joined.find("\n", pos)
        if end < 0:
            break
        row, at = row + 1, end + 1
        pos = joined.find(sep, at)
    return rows


def _numbers(a: np.ndarray) -> rowjoin.Column | None:
    """A numeric array's cells as orjson writes them (integers as an array the join writes in decimal,
    booleans spread from their two texts, floats as a ``(buf, starts, ends)`` column: no bytes per
    cell); None for values that are not plain numbers."""
    if a.dtype.kind in "iu":
        return rowjoin.integers(a)
    if a.dtype.kind == "b":
        return rowjoin.spread([b"false", b"true"], a.view(np.uint8))
    if a.dtype.kind == "f":
        a = a.astype(np.float64, copy=False)  # a float32 would print its own shortest digits
    if a.dtype.kind != "f":
        return None
    buf = orjson.dumps(np.ascontiguousarray(a), option=orjson.OPT_SERIALIZE_NUMPY)
    return rowjoin.separated(buf, ord(","), 1, len(buf) - 1)


class _Parts:
    """Text kept as parts (``rowjoin.TextParts``: the evidence sentences) as JSON cells: each distinct part
    escaped once (orjson, then ``printable_json``: both escape character by character, so the
    escaped parts concatenate to the escaped sentence), the rows laid out by ``rowjoin.gather``
    between quotes. ``text`` (path scrubbing) is not applied part by part (a path may run across
    parts): a row with a part holding '/' or '\\' is made whole, scrubbed and escaped on its own."""

    def __init__(self, text: Callable[[str], str] | None) -> None:
        self.text = text
        self.table: list[str] | None = None  # the table encoded below (kept: its id is the key)
        self.cells: tuple[bytes, np.ndarray, np.ndarray] = (b"", np.zeros(0, np.int64), np.zeros(0, np.int64))
        self.separated: np.ndarray | None = None  # per part: holds a path separator

    def encode(self, t: rowjoin.TextParts) -> rowjoin.Column:
        if t.table is not self.table:
            self.cells = _unquoted_cells(t.table)
            self.separated = None
            if self.text is not None:
                self.separated = np.zeros(len(t.table), dtype=bool)
                self.separated[_holding_separator(t.table)] = True
            self.table = t.table
        codes = t.codes
        cells = self.cells
        if self.separated is not None and self.separated.any() and codes.shape[1]:
            whole = np.flatnonzero(self.separated[codes].any(axis=1))
            if len(whole):  # these rows whole, scrubbed, escaped: extra parts after the table's
                extra, e_starts, e_ends = _unquoted_cells(text_values(t.rows(whole), self.text))
                buf, starts, ends = cells
                cells = (buf + extra, np.concatenate([starts, e_starts + len(buf)]),
                         np.concatenate([ends, e_ends + len(buf)]))
                codes = codes.copy()
                codes[whole] = 0
                codes[whole, 0] = len(starts) + np.arange(len(whole), dtype=np.int32)
        return rowjoin.Later(rowjoin.gather, cells, codes, b'"', b'"')  # laid out on the join's thread


class _Column:
    """Encodes rows ``[lo, hi)`` of one field as a ``rowjoin`` column of JSON texts."""

    def __init__(self, f: Field) -> None:
        self.codes: np.ndarray | None = None
        self.array: np.ndarray | None = None
        self.objects: np.ndarray | None = None
        self.sparse: rowjoin.SparseRows | None = None
        self.chunk = f.chunk
        self.text, self.raw = f.text, f.raw
        # a chunk that can give its text as parts (``Analysis.findings.evidence_chunks``)
        self.parts: Callable[[int, int], rowjoin.TextParts | None] | None = getattr(f.chunk, "parts", None)
        self.encoder = _Parts(None if f.raw else f.text)
        if f.chunk is not None:
            return
        s = f.values if isinstance(f.values, pd.Series) else pd.Series(f.values)
        if isinstance(s.dtype, pd.CategoricalDtype):
            # Once per category, then spread by code (-1, missing, reads as '' or as 'nan' when raw).
            cats = s.cat.categories.astype(str).tolist() if f.raw else text_values(s.cat.categories.tolist(), f.text)
            self.table = _lines(cats + ["nan" if f.raw else ""])
            self.codes = s.cat.codes.to_numpy()
        elif _is_text(s):
            self.objects = s.to_numpy(dtype=object)
        elif isinstance(s.dtype, pd.SparseDtype) and s.dtype.subtype.kind in "biuf":
            self.sparse = rowjoin.SparseRows(s.array)  # dense a chunk at a time (a dense copy of every column is GBs)
        else:
            a = s.to_numpy()
            if a.dtype.kind in "biuf":
                self.array = a
            else:  # extension values (nullable integers...): as Python values
                self.objects, self.raw = a.astype(object), True

    def encode(self, lo: int, hi: int) -> rowjoin.Column:
        if self.codes is not None:
            return rowjoin.spread(self.table, self.codes[lo:hi])
        if self.array is not None:
            return _numbers(self.array[lo:hi])  # type: ignore[return-value]
        if self.sparse is not None:
            return _numbers(self.sparse(lo, hi))  # type: ignore[return-value]
        if self.parts is not None and (t := self.parts(lo, hi)) is not None:
            try:
                return self.encoder.encode(t)
            except (TypeError, ValueError, orjson.JSONEncodeError):  # not encodable (a lone surrogate):
                pass  # the str path below raises as it always did
        values = self.objects[lo:hi] if self.objects is not None else self.chunk(lo, hi)  # type: ignore[misc]
        if isinstance(values, pd.Series):
            values = values.to_numpy()
        if values.dtype != object and (cells := _numbers(values)) is not None:
            return cells
        items = values.tolist()
        if (shared := rowjoin.distinct(items)) is not None:  # each distinct text encoded once
            codes, texts = shared
            return rowjoin.spread(_lines(texts if self.raw else text_values(texts, self.text)), codes)
        return _line_cells(items if self.raw else text_values(items, self.text))


def _pieces(fields: tuple[Field, ...], indent: int) -> list[bytes]:
    """``{ "key": <value>, ... }`` laid out as orjson indents an object at ``indent`` spaces, as the
    constant pieces around each leaf's value (one more piece than leaves)."""
    pad = b" " * (indent + 2)
    out = [b"{\n"]
    for i, f in enumerate(fields):
        out[-1] += (b",\n" if i else b"") + pad + orjson.dumps(f.key) + b": "
        if f.group:
            inner = _pieces(f.group, indent + 2)
            out[-1] += inner[0]
            out.extend(inner[1:])
        else:
            out.append(b"")
    out[-1] += b"\n" + b" " * indent + b"}"
    return out


def _leaves(fields: tuple[Field, ...]) -> list[Field]:
    return [leaf for f in fields for leaf in (_leaves(f.group) if f.group else [f])]


def table_chunks(fields: tuple[Field, ...], rows: int, indent: int = 2) -> Iterator[bytes]:
    """The JSON list of ``rows`` objects (``[]`` when empty), as the list value of a key at ``indent``
    spaces: items at ``indent + 2``. C1 controls and DEL escaped as ``json_text.dumps`` does."""
    if rows == 0:
        yield b"[]"
        return
    pieces = [printable_json(p) for p in _pieces(fields, indent + 2)]  # keys are text too
    pieces[0] = b" " * (indent + 2) + pieces[0]
    columns = [_Column(f) for f in _leaves(fields)]

    def blocks() -> Iterator[rowjoin.Block]:
        for lo in range(0, rows, CHUNK_ROWS):
            hi = min(rows, lo + CHUNK_ROWS)
            yield pieces, [c.encode(lo, hi) for c in columns], hi - lo, b",\n"

    yield b"[\n"
    for i, block in enumerate(rowjoin.joined_ahead(blocks())):
        if i:
            yield b",\n"
        yield from block
    yield b"\n" + b" " * indent + b"]"


def document_chunks(doc: dict, tables: dict[str, tuple[tuple[Field, ...], int]],
                    late: dict[str, Callable[[], Any]] | None = None) -> Iterator[bytes]:
    """``json_text.dumps(doc)`` with each top-level key of ``tables`` holding its table, written column-wise.

    ``doc`` holds every key in its place (the tables' and ``late`` keys' values are ignored). A
    ``late`` key's value is made by its function only when the text before it is written: after the
    tables that precede it (the what-if replay runs on a thread while they are written)."""
    late = late or {}
    marks = {name: f"traceread-{uuid.uuid4().hex}" for name in (*tables, *late)}
    head = json_text.dumps({k: marks.get(k, v) for k, v in doc.items()})
    pending = {orjson.dumps(marks[name]): (name, fn) for name, fn in late.items()}

    def filled(text: bytes) -> bytes:
        for mark in [m for m in pending if m in text]:
            name, fn = pending.pop(mark)
            key = b'{\n  ' + orjson.dumps(name) + b": "
            value = json_text.dumps({name: fn()})  # indented as at the top level of the document
            text = text.replace(mark, value[len(key):-2], 1)
        return text

    for name, (fields, rows) in tables.items():
        mark = orjson.dumps(marks[name])
        before, head = head.split(mark, 1)
        yield filled(before)
        yield from table_chunks(fields, rows)
    yield filled(head)
