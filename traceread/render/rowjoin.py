"""A table's rows laid out from its columns (``_cjoin.c``, compiled): the one step of a column-wise
writer (JSON tables, CSV) that goes row by row.

``join(pieces, columns, n, sep)``: row ``i`` is ``pieces[0] + cell(0, i) + pieces[1] + ... +
pieces[k]`` over the ``k`` columns, and the ``n`` rows are joined by ``sep``. A column is a list of
``n`` bytes, or a pair ``(buf, bounds)`` of bytes and ``n + 1`` int64 positions whose cell ``i`` is
``buf[bounds[i] + 1 : bounds[i + 1]]`` (:func:`separated`: the cells of a buffer cut at a separator,
with no bytes object per cell). The compiled join is used when it was built (``setup.py`` builds it
like the Kineto scanner, optionally); :func:`join_python` is its exact twin, used without a compiler
or with ``TRACEREAD_NO_CJOIN=1``; a test compares the two.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence
from types import ModuleType
from typing import TypeAlias

import numpy as np

DISABLE_ENV = "TRACEREAD_NO_CJOIN"

Column: TypeAlias = list[bytes] | tuple[bytes, np.ndarray]  # cells, or (buffer, n + 1 positions)


def _compiled() -> ModuleType | None:
    try:
        return importlib.import_module("traceread.render._cjoin")
    except ImportError:  # built without a compiler: the Python twin joins (same bytes, slower)
        return None


COMPILED = _compiled()


def separated(buf: bytes, sep: int, start: int = 0, end: int | None = None) -> tuple[bytes, np.ndarray]:
    """``buf[start:end]`` cut at every byte ``sep``, as a ``(buf, bounds)`` column (``start - 1`` and
    ``end`` close the first and last cell)."""
    stop = len(buf) if end is None else end
    at = np.flatnonzero(np.frombuffer(buf, dtype=np.uint8, count=stop - start, offset=start) == sep) + start
    bounds = np.empty(len(at) + 2, dtype=np.int64)
    bounds[0], bounds[-1] = start - 1, stop
    bounds[1:-1] = at
    return buf, bounds


def join(pieces: Sequence[bytes], columns: Sequence[Column], n: int, sep: bytes) -> bytes:
    """The rows (module doc) as one bytes object."""
    if COMPILED is None or os.environ.get(DISABLE_ENV) == "1":
        return join_python(pieces, columns, n, sep)
    return bytes(COMPILED.join(list(pieces), list(columns), n, sep))


def _cells(column: Column, n: int) -> list[bytes]:
    if isinstance(column, tuple) and len(column) == 2:
        buf, bounds = column
        b = np.asarray(bounds, dtype=np.int64)
        if len(b) != n + 1:
            raise ValueError("join: bounds must be n + 1 int64 positions")
        return [buf[lo + 1:hi] for lo, hi in zip(b[:-1].tolist(), b[1:].tolist(), strict=True)]
    cells = list(column)
    if len(cells) != n:
        raise ValueError("join: a column's length is not n")
    return cells


def join_python(pieces: Sequence[bytes], columns: Sequence[Column], n: int, sep: bytes) -> bytes:
    """The compiled join's exact twin (a Python step per row: only for builds without a compiler)."""
    if len(pieces) != len(columns) + 1:
        raise ValueError("join: pieces must be one more than columns")
    template = b"%b".join(p.replace(b"%", b"%%") for p in pieces)
    cells = [_cells(c, n) for c in columns]
    if not cells:
        return sep.join([template] * n)
    return sep.join([template % row for row in zip(*cells, strict=True)])
