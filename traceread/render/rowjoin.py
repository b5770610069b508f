"""A table's rows laid out from its columns (``_cjoin.c``, compiled): the one step of a column-wise
writer (JSON tables, CSV) that goes row by row.

``join(pieces, columns, n, sep)``: row ``i`` is ``pieces[0] + cell(0, i) + pieces[1] + ... +
pieces[k]`` over the ``k`` columns, and the ``n`` rows are joined by ``sep``. A column is a list of
``n`` bytes, or a triple ``(buf, starts, ends)`` of bytes and two arrays of ``n`` int64 positions
whose cell ``i`` is ``buf[starts[i]:ends[i]]`` (:func:`separated`: the cells of a buffer cut at a
separator; :func:`spread`: a table of distinct texts spread by code; no bytes object per cell). The compiled join is used when it was built (``setup.py`` builds it
like the Kineto scanner, optionally); :func:`join_python` is its exact twin, used without a compiler
or with ``TRACEREAD_NO_CJOIN=1``; a test compares the two.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

import numpy as np

from traceread.extensions import optional, switched_off

DISABLE_ENV = "TRACEREAD_NO_CJOIN"

Column: TypeAlias = list[bytes] | tuple[bytes, np.ndarray, np.ndarray]  # cells, or (buffer, starts, ends)


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


def join(pieces: Sequence[bytes], columns: Sequence[Column], n: int, sep: bytes) -> bytes:
    """The rows (module doc) as one bytes object."""
    if COMPILED is None or switched_off(DISABLE_ENV):
        return join_python(pieces, columns, n, sep)
    return bytes(COMPILED.join(list(pieces), list(columns), n, sep))


def cells(column: Column, n: int) -> list[bytes]:
    """A column's ``n`` cells as a list of bytes (for a few: tables, headers; and the Python twin)."""
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


def join_python(pieces: Sequence[bytes], columns: Sequence[Column], n: int, sep: bytes) -> bytes:
    """The compiled join's exact twin (a Python step per row: only for builds without a compiler)."""
    if len(pieces) != len(columns) + 1:
        raise ValueError("join: pieces must be one more than columns")
    template = b"%b".join(p.replace(b"%", b"%%") for p in pieces)
    listed = [cells(c, n) for c in columns]
    if not listed:
        return sep.join([template] * n)
    return sep.join([template % row for row in zip(*listed, strict=True)])
