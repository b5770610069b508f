"""The gaps as the rules read them: ``col``/``frac`` of a frame, of some of its rows (``Rows``), or of a
``ColumnCache`` over it, which converts each column once for every rule (``column_cache``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeAlias

import numpy as np
import pandas as pd


class ColumnCache:
    """A gaps frame whose columns ``col``/``frac`` convert once (dense, typed, read-only) and hand the same
    array to every rule: the rules read the same few columns dozens of times, and the engine's overlap
    columns are sparse, so every plain read densified a copy. Made by ``column_cache(frame)`` and passed
    to the rules in the frame's place (it reads like one to ``col``, ``frac``, ``Rows`` and ``len``); the
    frame (``frame``) must not be modified while the cache is in use, but for new columns."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self.frame = frame
        self.arrays: dict[tuple[str, Any, Any], np.ndarray] = {}

    @property
    def columns(self) -> pd.Index:
        return self.frame.columns

    def __len__(self) -> int:
        return len(self.frame)

    def __getitem__(self, name: str) -> np.ndarray:
        return col(self, name)

    def forget(self) -> None:
        """Free the columns converted so far (the cache stays usable): for a phase that no longer reads them."""
        self.arrays.clear()


# A whole gaps frame as the rules get it: the frame, or a cache over it (``ColumnCache``).
Frame: TypeAlias = pd.DataFrame | ColumnCache


def frame_of(gaps: Frame) -> pd.DataFrame:
    """The frame itself (for what only a frame does: copy, take, a pandas column)."""
    return gaps.frame if isinstance(gaps, ColumnCache) else gaps


def cached(gaps: Frame) -> ColumnCache:
    """``gaps`` itself when it is a cache already, else a new cache over it."""
    return gaps if isinstance(gaps, ColumnCache) else ColumnCache(gaps)


class Rows:
    """Some rows of a gaps frame, without copying the frame (evidence is built for a rule's hits); of a
    ``ColumnCache``, the rows of its converted columns."""

    def __init__(self, frame: Frame, idx: np.ndarray) -> None:
        self.frame, self.idx, self.columns = frame, idx, frame.columns

    def __len__(self) -> int:
        return len(self.idx)

    def __getitem__(self, name: str) -> np.ndarray:
        if isinstance(self.frame, ColumnCache):
            return col(self.frame, name)[self.idx]
        # Only these rows (formatting a chunk of a frame's evidence must not convert whole columns).
        return np.asarray(self.frame[name].array.take(self.idx))


# What the rules read gap columns from: a whole frame (``Frame``) or some of its rows (``Rows``).
Gaps: TypeAlias = pd.DataFrame | ColumnCache | Rows


@contextmanager
def column_cache(frame: pd.DataFrame) -> Iterator[ColumnCache]:
    """A ``ColumnCache`` of ``frame`` for the block's duration: its arrays are freed when the block ends,
    even where a reference to the cache outlives it."""
    cache = ColumnCache(frame)
    try:
        yield cache
    finally:
        cache.forget()


def col(gaps: Gaps, name: str, default: float | int | bool | str = 0, dtype: Any = None) -> np.ndarray:
    """A gaps column as an ndarray (of ``dtype`` when given), or ``default`` everywhere when the
    engine did not provide it. Of a ``ColumnCache`` the array is shared: never modify it."""
    if isinstance(gaps, ColumnCache):
        arrays = gaps.arrays
        key = (name, None if dtype is None else np.dtype(dtype).str, default)
        out = arrays.get(key)
        if out is None:
            out = _column(gaps.frame, name, default, dtype)
            out.flags.writeable = False
            arrays[key] = out
        return out
    return _column(gaps, name, default, dtype)


def _column(gaps: Gaps, name: str, default: float | int | bool | str, dtype: Any) -> np.ndarray:
    if name in gaps.columns:
        return np.asarray(gaps[name], dtype=dtype)
    return np.full(len(gaps), default, dtype=dtype)


def frac(gaps: Gaps, name: str) -> np.ndarray:
    """``<name>_frac`` as float64 (recomputed from ``<name>_ns`` when the fraction is missing; of a
    ``ColumnCache`` once, and shared: never modify it)."""
    if f"{name}_frac" in gaps.columns:
        return col(gaps, f"{name}_frac", dtype=np.float64)
    key = (f"{name}_ns / dur_ns", "frac", 0)
    if isinstance(gaps, ColumnCache) and key in gaps.arrays:
        return gaps.arrays[key]
    dur = np.maximum(col(gaps, "dur_ns", 1, dtype=np.float64), 1.0)
    out = col(gaps, f"{name}_ns", dtype=np.float64) / dur
    if isinstance(gaps, ColumnCache):
        out.flags.writeable = False
        gaps.arrays[key] = out
    return out
