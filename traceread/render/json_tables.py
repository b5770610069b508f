"""Tables of a JSON document as columns: an object of equal-length arrays, one line per column.

A table (the report's and ``gaps --json``'s ``gaps`` and ``steps``) is written as

::

  "gaps": {
    "start_ns": [1695835572943613000,1695835573023613000,...],
    "class": ["launch-bound", "sync-stall", ...],
    ...
  }

so that ``pandas.DataFrame(doc["gaps"])`` reads it in one call with exact int64 columns, and jq reads
a column (``.gaps.class``) or rebuilds record ``$i`` with ``.gaps | map_values(.[$i])``. The keys are
written once per table, not once per row, and no cell is a derivation of others (schema 2.0).

Each column is encoded by orjson a chunk of rows at a time (numbers as numpy arrays with
``OPT_SERIALIZE_NUMPY``, text as one list per chunk, categories once per category and spread by
code), so memory is bounded by a chunk and no Python object is made per numeric cell. DEL and C1
characters are escaped (``printable_json``) in the text columns' encodings, the only place they can be.
A field may give its values a chunk at a time (``Field.chunk``: the evidence sentences, made for the
rows being written). :func:`table_text` lays out a table given as a dict of lists the same way: the
tests compare the two.
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
from traceread.render.rowjoin import SparseRows

CHUNK_ROWS = 1 << 18  # rows encoded at a time: bounds the per-chunk bytes objects, not a threshold
_NUMPY = orjson.OPT_SERIALIZE_NUMPY


@dataclass(frozen=True)
class Field:
    """One column of a table: its values (``rows`` long), or ``chunk``: the values of rows [lo, hi)."""

    key: str
    values: np.ndarray | pd.Series | None = None
    # applied to the string values holding a path separator (path scrubbing: the identity on the rest)
    text: Callable[[str], str] | None = None
    # instead of ``values``: the values of rows [lo, hi) (numbers, or text objects), asked for one
    # chunk at a time, so that they exist for those rows only
    chunk: Callable[[int, int], np.ndarray | pd.Series] | None = None


def _is_text(s: pd.Series) -> bool:
    return isinstance(s.dtype, pd.CategoricalDtype) or s.dtype == object or pd.api.types.is_string_dtype(s)


def text_values(values: list, text: Callable[[str], str] | None) -> list[str]:
    """As the report writes text cells: '' for missing, ``str`` of anything else, then ``text``
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
    u8 = np.frombuffer(joined.encode("utf-8", "surrogatepass"), dtype=np.uint8)
    hits = np.flatnonzero((u8 == ord("/")) | (u8 == ord("\\")))
    return np.unique(np.searchsorted(np.flatnonzero(u8 == ord("\n")), hits))


# Between cells of small numbers and text: a comma and a space. orjson's reader (yyjson, 3.x) refuses a
# pretty-printed document whose arrays hold about a value per two bytes ("0,0,0,...": a column of zeros)
# as "failed to allocate memory"; at three bytes a value it reads them. A chunk of numbers that take
# three bytes a value with a bare comma (times, durations) keeps orjson's bare commas: adding the space
# would cost a pass over the column's bytes (bytes.replace) for nothing.
SEP = b", "
_DENSE = 3  # bytes per value under which a chunk of numbers gets SEP


def _inner(encoded: bytes, n: int) -> bytes:
    """orjson's ``[a,b,c]`` of ``n`` numbers -> ``a,b,c``, or ``a, b, c`` where that is under
    :data:`_DENSE` bytes a value."""
    body = encoded[1:-1]
    return rowjoin.comma_spaced(body) if len(body) + 1 < _DENSE * n else body


def _texts(values: list[str]) -> bytes:
    """Strings as JSON cells between :data:`SEP` (each encoded by orjson in C, no Python call per value)."""
    return printable_json(SEP.join(map(orjson.dumps, values)))


def _numbers(a: np.ndarray) -> bytes | None:
    """A numeric or boolean array's cells as orjson writes them (NaN and infinities as null), comma-
    separated; None for values that are not plain numbers."""
    if a.dtype.kind == "f":
        a = a.astype(np.float64, copy=False)  # a float32 would print its own shortest digits
    elif a.dtype.kind not in "biu":
        return None
    if len(a) and a.dtype.kind != "f" and a[0] == a.min() == a.max():  # one value (an overlap column's zeros)
        return _repeated(_inner(orjson.dumps(a[:1], option=_NUMPY), 1), len(a))
    return _inner(orjson.dumps(np.ascontiguousarray(a), option=_NUMPY), len(a))


def _repeated(cell: bytes, n: int) -> bytes:
    """``n`` copies of one cell between :data:`SEP` (a C repeat: no encoding per value)."""
    return (cell + SEP) * (n - 1) + cell


class _Column:
    """Encodes rows ``[lo, hi)`` of one field as comma-separated JSON values."""

    def __init__(self, f: Field) -> None:
        self.codes: np.ndarray | None = None
        self.array: np.ndarray | None = None
        self.objects: np.ndarray | None = None
        self.plain: np.ndarray | None = None
        self.sparse: SparseRows | None = None
        self.chunk, self.text = f.chunk, f.text
        if f.chunk is not None:
            return
        s = f.values if isinstance(f.values, pd.Series) else pd.Series(f.values)
        if isinstance(s.dtype, pd.CategoricalDtype):
            # Once per category, then spread by code (-1, missing, reads as '').
            cats = text_values(s.cat.categories.tolist(), f.text) + [""]
            self.table = rowjoin.spread([printable_json(orjson.dumps(c)) for c in cats], np.arange(len(cats)))
            self.codes = s.cat.codes.to_numpy()
        elif _is_text(s):
            self.objects = s.to_numpy(dtype=object)
        elif isinstance(s.dtype, pd.SparseDtype) and s.dtype.subtype.kind in "biuf":
            self.sparse = SparseRows(s.array)  # dense a chunk at a time (a dense copy of every column is GBs)
        else:
            a = s.to_numpy()
            if a.dtype.kind in "biuf":
                self.array = a
            else:  # extension values (nullable integers...): as Python values, null where missing
                self.plain = a.astype(object)

    def encode(self, lo: int, hi: int) -> bytes:
        if self.codes is not None:  # laid out by rowjoin's join (compiled): no Python object per cell
            return rowjoin.join((b"", b""), [rowjoin.take(self.table, self.codes[lo:hi])], hi - lo, SEP)
        if self.array is not None:
            return _numbers(self.array[lo:hi])  # type: ignore[return-value]
        if self.sparse is not None:
            return _numbers(self.sparse(lo, hi))  # type: ignore[return-value]
        if self.plain is not None:
            return SEP.join(map(orjson.dumps, json_text.plain(self.plain[lo:hi].tolist())))
        values = self.objects[lo:hi] if self.objects is not None else self.chunk(lo, hi)  # type: ignore[misc]
        if isinstance(values, pd.Series):
            values = values.to_numpy()
        values = np.asarray(values)
        if values.dtype != object and (cells := _numbers(values)) is not None:
            return cells
        return _texts(text_values(values.tolist(), self.text))


def table_chunks(fields: tuple[Field, ...], rows: int, indent: int = 2) -> Iterator[bytes]:
    """The table as the value of a key at ``indent`` spaces: ``{`` a line per column ``}`` (``{}``
    without columns). C1 controls and DEL escaped as ``json_text.dumps`` does."""
    if not fields:
        yield b"{}"
        return
    pad = b" " * (indent + 2)
    for i, f in enumerate(fields):
        yield (b"{\n" if i == 0 else b",\n") + pad + printable_json(orjson.dumps(f.key)) + b": ["
        column = _Column(f)
        for lo in range(0, rows, CHUNK_ROWS):
            if lo:
                yield SEP
            yield column.encode(lo, min(rows, lo + CHUNK_ROWS))  # (not joined to SEP: a copy of every chunk)
        yield b"]"
    yield b"\n" + b" " * indent + b"}"


def table_text(columns: dict[str, list], indent: int = 2) -> bytes:
    """A table given as ``{key: list of plain values}`` laid out as :func:`table_chunks` writes it."""
    if not columns:
        return b"{}"
    pad = b" " * (indent + 2)
    lines = [pad + orjson.dumps(k) + b": [" + _list_cells(v) + b"]" for k, v in columns.items()]
    return printable_json(b"{\n" + b",\n".join(lines) + b"\n" + b" " * indent + b"}")


def _list_cells(values: list) -> bytes:
    """A list's cells as :func:`table_chunks` writes them in one chunk."""
    if values and all(v is None or isinstance(v, (int, float)) for v in values):  # numbers (NaN as None)
        if len(values) > 1 and all(v == values[0] for v in values) and not isinstance(values[0], float):
            return _repeated(orjson.dumps(values[0]), len(values))
        return _inner(orjson.dumps(values), len(values))
    return SEP.join(map(orjson.dumps, values))


def columns_of(fields: tuple[Field, ...], rows: int) -> dict[str, list]:
    """The table of ``fields`` as ``{key: list}`` (the values :func:`table_chunks` writes, as Python
    values: for scan's rows and for tests)."""
    return {f.key: orjson.loads(b"[" + SEP.join(_Column(f).encode(lo, min(rows, lo + CHUNK_ROWS))
                                                 for lo in range(0, rows, CHUNK_ROWS)) + b"]")
            if rows else [] for f in fields}


def document_chunks(doc: dict, tables: dict[str, tuple[tuple[Field, ...], int] | dict[str, list]],
                    late: dict[str, Callable[[], Any]] | None = None) -> Iterator[bytes]:
    """``json_text.dumps(doc)`` with each top-level key of ``tables`` holding its table: fields and rows
    (written column by column, :func:`table_chunks`) or a dict of lists (:func:`table_text`).

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

    for name, table in tables.items():
        mark = orjson.dumps(marks[name])
        before, head = head.split(mark, 1)
        yield filled(before)
        if isinstance(table, dict):
            yield table_text(table)
        else:
            yield from table_chunks(*table)
    yield filled(head)
