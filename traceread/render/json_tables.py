"""Tables of a JSON document written column by column: the bytes ``json_text.dumps`` would give for a
list of one object per row, without building a Python dict per row.

Each column is encoded once by orjson (numeric columns as numpy arrays, text columns as one list,
categories once per category), a chunk of rows at a time, and the rows are laid out by one bytes
template, so memory is bounded by a chunk and the cost by orjson's C loops. The layout is orjson's
``OPT_INDENT_2`` at the depth the table sits in the document (a list under a top-level key); the
tests compare the result with ``json_text.dumps`` of the same records.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import orjson
import pandas as pd

from traceread.printable import printable_json
from traceread.render import json_text

CHUNK_ROWS = 16_384  # rows encoded at a time: bounds the per-chunk bytes objects, not a threshold


@dataclass(frozen=True)
class Field:
    """One key of every row: its values (``rows`` long), or ``group``: a nested object of fields."""

    key: str
    # or a function of ``(lo, hi)`` giving rows ``[lo, hi)`` of a text column made per chunk (the
    # evidence: ``rules.evidence.EvidenceChunks``)
    values: np.ndarray | pd.Series | Callable[[int, int], np.ndarray] | None = None
    # applied to the string values holding a path separator (path scrubbing: the identity on the rest)
    text: Callable[[str], str] | None = None
    group: tuple[Field, ...] = ()
    # as ``frame.astype({categorical: str}).to_dict("records")`` gives them (``gaps --json``): text
    # cells as they are (None as null), a categorical's missing value as 'nan'
    raw: bool = False


def _is_text(s: pd.Series) -> bool:
    return isinstance(s.dtype, pd.CategoricalDtype) or s.dtype == object or pd.api.types.is_string_dtype(s)


def _lines(values: list) -> list[bytes]:
    """Each value's JSON text (orjson's encoding and escaping; one line per value as indented output)."""
    if not values:
        return []
    body = orjson.dumps(values, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY).split(b"\n")[1:-1]
    last = body.pop()[2:]
    out = [ln[2:-1] for ln in body]
    out.append(last)
    return out


def text_values(values: list, text: Callable[[str], str] | None) -> list[str]:
    """As the report always wrote text cells: '' for missing, ``str`` of anything else, then ``text``
    (given ``text`` only where a value holds a path separator: the one change ``scrub_paths`` makes)."""
    arr = np.asarray(values, dtype=object)
    if len(arr) and pd.api.types.infer_dtype(arr, skipna=False) != "string":  # a C pass; rare
        arr = np.array(["" if v is None or (isinstance(v, float) and v != v) else v if isinstance(v, str) else str(v)
                        for v in values] or [""], dtype=object)[:len(values)]
    if text is not None and len(arr):
        wide = arr.astype(str)  # one chunk's fixed-width copy, for numpy's C string search
        for i in np.flatnonzero((np.char.find(wide, "/") >= 0) | (np.char.find(wide, "\\") >= 0)).tolist():
            arr[i] = text(arr[i])
    return arr.tolist()


class _Column:
    """Encodes rows ``[lo, hi)`` of one field as a list of JSON texts."""

    def __init__(self, f: Field) -> None:
        self.codes: np.ndarray | None = None
        self.array: np.ndarray | None = None
        self.objects: np.ndarray | None = None
        self.chunk: Callable[[int, int], np.ndarray] | None = None
        self.text = f.text
        if callable(f.values):
            self.chunk, self.is_text = f.values, not f.raw
            return
        s = f.values if isinstance(f.values, pd.Series) else pd.Series(f.values)
        if isinstance(s.dtype, pd.CategoricalDtype):
            # Once per category, then spread by code (-1, missing, reads as '' or as 'nan' when raw).
            cats = s.cat.categories.astype(str).tolist() if f.raw else text_values(s.cat.categories.tolist(), f.text)
            self.table = np.array(_lines(cats + ["nan" if f.raw else ""]), dtype=object)
            self.codes = s.cat.codes.to_numpy()
        elif _is_text(s):
            self.objects, self.is_text = s.to_numpy(dtype=object), not f.raw
        else:
            a = s.to_numpy()
            if a.dtype.kind == "f":
                a = a.astype(np.float64, copy=False)  # a float32 would print its own shortest digits
            if a.dtype.kind in "biuf":
                self.array = np.ascontiguousarray(a)
            else:  # extension values (nullable integers...): as Python values
                self.objects, self.is_text = a.astype(object), False

    def encode(self, lo: int, hi: int) -> list[bytes] | np.ndarray:
        if self.codes is not None:
            return self.table[self.codes[lo:hi]]
        if self.array is not None:
            return orjson.dumps(self.array[lo:hi], option=orjson.OPT_SERIALIZE_NUMPY)[1:-1].split(b",")
        if self.chunk is not None:
            values = self.chunk(lo, hi).tolist()
        else:
            assert self.objects is not None
            values = self.objects[lo:hi].tolist()
        return _lines(text_values(values, self.text) if self.is_text else values)


def _template(fields: tuple[Field, ...], indent: int) -> bytes:
    """``{ "key": %b, ... }`` laid out as orjson indents an object at ``indent`` spaces."""
    pad = b" " * (indent + 2)
    parts = []
    for f in fields:
        key = orjson.dumps(f.key).replace(b"%", b"%%")
        parts.append(pad + key + b": " + (_template(f.group, indent + 2) if f.group else b"%b"))
    return b"{\n" + b",\n".join(parts) + b"\n" + b" " * indent + b"}"


def _leaves(fields: tuple[Field, ...]) -> list[Field]:
    return [leaf for f in fields for leaf in (_leaves(f.group) if f.group else [f])]


def table_chunks(fields: tuple[Field, ...], rows: int, indent: int = 2) -> Iterator[bytes]:
    """The JSON list of ``rows`` objects (``[]`` when empty), as the list value of a key at ``indent``
    spaces: items at ``indent + 2``. C1 controls and DEL escaped as ``json_text.dumps`` does."""
    if rows == 0:
        yield b"[]"
        return
    item = b" " * (indent + 2) + _template(fields, indent + 2)
    columns = [_Column(f) for f in _leaves(fields)]
    yield b"[\n"
    for lo in range(0, rows, CHUNK_ROWS):
        hi = min(rows, lo + CHUNK_ROWS)
        encoded = [c.encode(lo, hi) for c in columns]
        body = b",\n".join([item % row for row in zip(*encoded, strict=True)])
        yield printable_json((b",\n" if lo else b"") + body)
    yield b"\n" + b" " * indent + b"]"


def document_chunks(doc: dict, tables: dict[str, tuple[tuple[Field, ...], int]]) -> Iterator[bytes]:
    """``json_text.dumps(doc)`` with each top-level key of ``tables`` holding its table, written column-wise.

    ``doc`` holds every key in its place (the tables' values are ignored)."""
    marks = {name: f"traceread-table-{uuid.uuid4().hex}" for name in tables}
    head = json_text.dumps({k: (marks[k] if k in marks else v) for k, v in doc.items()})
    for name, (fields, rows) in tables.items():
        mark = orjson.dumps(marks[name])
        before, head = head.split(mark, 1)
        yield before
        yield from table_chunks(fields, rows)
    yield head
