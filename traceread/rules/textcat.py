"""Row-wise concatenation of text columns: the one step of the evidence sentences that goes row by row.

``cat(*parts)``: each part is a string (the same in every row) or an array of ``n`` strings; row ``i``
is the parts' texts of row ``i`` joined (``"".join`` over the rows); distinct texts are found by
pandas' ``factorize``. (No compiled twin: one measured within 10% of these on ``analyze`` and
``gaps``, so it did not earn its keep; the git log of this file has the figures.)

A writer does not need the str at all: inside :func:`as_parts` the rules' text helpers
(``rules._base``: ``cat``, ``cat_where``, ``where``, ``choose``, the number formatters) give
:class:`Texts`, a sentence per row kept as its parts (the distinct part texts and an int32 code per
row and part), which the JSON and CSV writers escape once per distinct part and lay out in C
(``render.rowjoin.gather``); ``Texts.rows`` makes the str of a few rows (the same text ``cat`` gives).
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pandas as pd


def cat(*parts: np.ndarray | str) -> np.ndarray:
    """Element-wise string concatenation of equally long arrays (of str) and scalars: an object array
    (a 0-d one when every part is a string). Anything but str in a row: ``"".join``'s TypeError."""
    arrays = [np.asarray(p, dtype=object).tolist() for p in parts if not isinstance(p, str)]
    if not arrays:
        return np.asarray("".join(p for p in parts if isinstance(p, str)), dtype=object)
    n = len(arrays[0])
    if any(len(a) != n for a in arrays):
        raise ValueError("cat: the parts' arrays differ in length")
    it = iter(arrays)
    columns = [[p] * n if isinstance(p, str) else next(it) for p in parts]
    out = np.empty(n, dtype=object)
    out[:] = list(map("".join, zip(*columns, strict=True)))
    return out


def factorize(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``pd.factorize(values, use_na_sentinel=False)`` of an object array (codes, and the distinct
    values in order of first appearance).

    The rules' texts are a few shared str objects repeated over millions of gaps, and hashing each
    element's value is most of pandas' time: the objects are told apart by identity first (their
    references, as integers: one integer hash per row), and only one element of each is then
    factorized by value. Equal values held by distinct objects end up with one code, in the same order
    of first appearance, so the result is pandas' own."""
    arr = np.asarray(values, dtype=object)
    if len(arr) < _BY_IDENTITY_MIN_ROWS:
        return pd.factorize(arr, use_na_sentinel=False)
    refs = np.frombuffer(np.ascontiguousarray(arr), dtype=np.intp)
    if not np.any(refs != refs[0]):  # one object in every row (a fact no gap holds: ''): no hashing at all
        codes, uniq = pd.factorize(arr[:1], use_na_sentinel=False)
        return np.zeros(len(arr), dtype=codes.dtype), uniq
    by_ref, _ = pd.factorize(refs)
    # codes count up from 0 in order of first appearance: each first appearance raises their running max
    top = np.maximum.accumulate(by_ref)
    first = np.flatnonzero(np.concatenate(([True], top[1:] != top[:-1])))
    codes, uniq = pd.factorize(arr[first], use_na_sentinel=False)
    return codes[by_ref], uniq


# Below this many rows pandas' factorize by value is as quick as the identity pass.
_BY_IDENTITY_MIN_ROWS = 4096


# --- text kept as parts (the writers' form) ------------------------------------------------------

_LAZY: contextvars.ContextVar[bool] = contextvars.ContextVar("traceread_text_parts", default=False)


class Texts:
    """Rows of text kept as their parts: row ``i`` is ``"".join(table[c] for c in codes[i])``.

    ``table`` holds the distinct parts (``table[0]`` is ``""``: the padding of rows with fewer parts),
    ``codes`` is a C-contiguous ``(n, k)`` int32 matrix. A writer encodes each part once and lays the
    rows out from the codes (``rowjoin.gather``): no Python str per row."""

    __slots__ = ("table", "codes")

    def __init__(self, table: list[str], codes: np.ndarray) -> None:
        self.table, self.codes = table, codes

    def __len__(self) -> int:
        return len(self.codes)

    def rows(self, at: np.ndarray | None = None) -> list[str]:
        """The texts of rows ``at`` (all: None) as str (a Python step per row: for a few rows)."""
        codes = self.codes if at is None else self.codes[at]
        table = self.table
        return ["".join([table[c] for c in row]) for row in codes.tolist()]

    def slice(self, lo: int, hi: int) -> Texts:
        """Rows ``[lo, hi)`` (the same table)."""
        return Texts(self.table, self.codes[lo:hi])


@contextmanager
def as_parts() -> Iterator[None]:
    """While open (in this thread), ``cat``/``where``/``choose`` and the rules' number formatters give
    :class:`Texts` instead of arrays of str: how a writer asks the evidence functions for parts."""
    token = _LAZY.set(True)
    try:
        yield
    finally:
        _LAZY.reset(token)


@contextmanager
def as_str() -> Iterator[None]:
    """Inside :func:`as_parts`: text as arrays of str again (a sentence part computed as one str)."""
    token = _LAZY.set(False)
    try:
        yield
    finally:
        _LAZY.reset(token)


def lazy() -> bool:
    """Whether text is being kept as parts (inside :func:`as_parts`)."""
    return _LAZY.get()


def from_codes(texts: list[str], codes: np.ndarray) -> Texts:
    """One part per row: ``texts[codes[i]]``."""
    return Texts(["", *texts], (np.asarray(codes, dtype=np.int32) + 1).reshape(-1, 1))


def _constant(s: str, n: int) -> Texts:
    if not s:
        return Texts([""], np.zeros((n, 0), dtype=np.int32))
    return Texts(["", s], np.ones((n, 1), dtype=np.int32))


def texts(part: Texts | np.ndarray | str, n: int) -> Texts:
    """A part as :class:`Texts` of ``n`` rows: a str repeated, an array of str by its distinct values."""
    if isinstance(part, Texts):
        return part
    if isinstance(part, str):
        return _constant(part, n)
    arr = np.asarray(part)
    if arr.ndim != 1 or len(arr) != n:
        raise ValueError("cat: the parts' arrays differ in length")
    codes, uniq = factorize(arr.astype(object, copy=False))
    listed = np.asarray(uniq, dtype=object).tolist()
    if not all(isinstance(s, str) for s in listed):  # as the compiled cat refuses them
        raise TypeError("cat: expected str parts")
    return from_codes(listed, codes)


def _stack(parts: list[Texts], n: int) -> Texts:
    """The parts' texts joined row by row (tables concatenated, codes side by side, written into one
    matrix: no matrix per part and no copy to stack them)."""
    table: list[str] = [""]
    codes = np.empty((n, sum(t.codes.shape[1] for t in parts)), dtype=np.int32)
    at = 0
    for t in parts:
        k = t.codes.shape[1]
        if k:
            np.add(t.codes, np.int32(len(table)), out=codes[:, at:at + k], casting="unsafe")
            table.extend(t.table)
            at += k
    return Texts(table, codes)


def cat_parts(*parts: Texts | np.ndarray | str, n: int | None = None) -> Texts:
    """:func:`cat` as :class:`Texts` (adjacent strings merged into one part; ``n`` rows, given when
    every part is a string)."""
    n = next((len(p) for p in parts if not isinstance(p, str)), n)
    if n is None:
        raise ValueError("cat: every part is a string")
    merged: list[Texts | np.ndarray | str] = []
    for p in parts:
        if isinstance(p, str) and merged and isinstance(merged[-1], str):
            merged[-1] += p
        else:
            merged.append(p)
    return _stack([texts(p, n) for p in merged], n)


def fill(out: Texts, rows: np.ndarray, part: Texts) -> Texts:
    """``out`` with rows ``rows`` (positions) holding ``part``'s texts (``len(rows)`` of them)."""
    ko, kp = out.codes.shape[1], part.codes.shape[1]
    k = max(ko, kp)
    if ko == k:  # (a copy of out's codes, not zeros and then a copy)
        codes = np.array(out.codes, dtype=np.int32, order="C")
    else:
        codes = np.zeros((len(out), k), dtype=np.int32)
        codes[:, :ko] = out.codes
    if kp < k:
        codes[rows, kp:] = 0
    codes[rows, :kp] = part.codes + np.int32(len(out.table))
    return Texts(out.table + part.table, codes)


def where_parts(cond: np.ndarray, a: Texts | np.ndarray | str, b: Texts | np.ndarray | str) -> Texts:
    """``np.where(cond, a, b)`` of texts, as :class:`Texts`."""
    cond = np.asarray(cond, dtype=bool)
    n = len(cond)
    at = np.flatnonzero(cond)
    ta = texts(a, n)
    return fill(texts(b, n), at, Texts(ta.table, ta.codes[at]))
