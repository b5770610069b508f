"""Evidence as data: what a gap's sentence is made of is kept, the sentence is made where it is read.

``rules.classify`` (``text=False``, as the analysis runs it) does not keep a sentence per gap: a
multi-million-gap export held GBs of them, and every output but the JSON gap table shows a few. It
keeps, beside the gap columns each sentence also reads, the context fields each class's evidence
reads (``Rule.reads``) as ``evidence.<field>`` columns of the gaps frame, only on that class's rows:
numbers and flags sparse, text categorical (one string per distinct value). They travel with the rows
through any selection, sort or concatenation of the frame.

:func:`evidence_text` is the one place the sentences are made, from those columns, for the rows
asked (by the same evidence functions the rules define, a class and a chunk of rows at a time); every
reader calls it for the rows it shows or writes: :func:`with_evidence` (a frame with its ``evidence``
column, for the Python API and small selections) and :class:`EvidenceChunks` (a writer going through
the rows in order, a block at a time; its ``parts`` give the JSON and CSV writers the sentences as
``textcat.Texts``, made by :func:`evidence_parts` from the same evidence functions: no str per row).
A frame that already has an ``evidence`` column (built by hand, or classified with ``text=True``) is
read as it is.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from traceread.config import Thresholds
from traceread.rules import textcat
from traceread.rules._base import RuleContext, cat, cat_where, fmt_int
from traceread.rules._columns import ColumnCache, Frame, Rows, column_cache, frame_of
from traceread.vocabulary import GAP_CLASSES

PREFIX = "evidence."  # the data columns' names: PREFIX + a RuleContext field
# Rows formatted at a time: the sentence's parts exist for one chunk only (a memory bound).
CHUNK_ROWS = 262_144
# Rows a writer's block holds (EvidenceChunks): a few of the JSON writer's chunks (a memory bound).
BLOCK_ROWS = 65_536

Formatter = Callable[[pd.DataFrame | Rows, RuleContext, Thresholds], np.ndarray]


@functools.cache
def _formatters() -> dict[int, tuple[Formatter, tuple[str, ...]]]:
    """Class code (in ``GAP_CLASSES``) -> (its evidence function, the context fields it reads)."""
    from traceread.rules import RESIDUAL, RULES  # the rules package imports this module

    code = {c: i for i, c in enumerate(GAP_CLASSES)}
    return {code[r.name]: (_with_group(r.evidence), r.reads + ("recurring_n", "recurring_ranks")) for r in RULES + (RESIDUAL,)}


def _with_group(evidence: Formatter) -> Formatter:
    """``evidence``, and where the gap's class came from its recurring gap (``rules.recurring``) a clause
    saying so (its own facts stay in the sentence)."""
    def text(gaps: pd.DataFrame | Rows, ctx: RuleContext, cfg: Thresholds) -> np.ndarray:
        own = evidence(gaps, ctx, cfg)
        n = np.asarray(ctx.recurring_n)
        if len(n) != len(gaps) or not (n > 0).any():
            return own
        ranks = np.asarray(ctx.recurring_ranks)
        ranks = ranks if len(ranks) == len(gaps) else np.zeros(len(gaps), dtype=np.int64)
        return cat(own, cat_where(n > 0, "; one recurring gap: classed with the ", (fmt_int, n),
                                  " gaps at this place in each step (same kernels before and after) on their "
                                  "pooled evidence, its own being near the threshold"),
                   cat_where(ranks > 1, " (the same gap on ", (fmt_int, ranks), " ranks of the job)"))
    return text


def is_data(column: object) -> bool:
    """Whether a gaps column is evidence data (not shown as such: it makes the ``evidence`` text)."""
    return isinstance(column, str) and column.startswith(PREFIX)


def store(out: pd.DataFrame, ctx: RuleContext, cls: np.ndarray, at: np.ndarray | None = None) -> None:
    """Add to ``out`` the context fields each class's evidence reads, on that class's rows (``cls``:
    class codes in ``GAP_CLASSES`` order): numbers and flags as sparse columns (0 elsewhere), text
    as categoricals (one string per distinct value). ``at``: a field shorter than ``out`` holds the
    rows ``at`` of it (sorted positions; the other rows read 0 or '')."""
    n = len(out)
    readers: dict[str, np.ndarray] = {}  # field -> bool per class code: that class's evidence reads it
    for code, (_, reads) in _formatters().items():
        for f in reads:
            readers.setdefault(f, np.zeros(len(GAP_CLASSES) + 1, dtype=bool))[code] = True
    present = np.bincount(cls, minlength=len(GAP_CLASSES) + 1) > 0
    wants: dict[bytes, np.ndarray] = {}  # fields read by the same classes read the same rows
    for f in sorted(f for f, r in readers.items() if (r & present).any()):
        key = readers[f].tobytes()
        if key not in wants:
            wants[key] = readers[f][cls]
        want = wants[key]  # the rows whose sentence reads the field
        values = np.asarray(getattr(ctx, f))
        if len(values) == 0 and n > 0:  # a field no step set (recurring_ranks outside rules.across)
            continue
        part = at if at is not None and len(values) != n else None  # the field holds these rows only
        if values.dtype == object:
            full = np.full(n, -1, dtype=np.int32)
            if part is not None:
                keep = want[part]
                codes, uniq = textcat.factorize(values[keep])
                if np.count_nonzero(keep) < np.count_nonzero(want):  # rows outside ``at`` read ''
                    empty = np.flatnonzero(uniq == "")
                    if len(empty) == 0:
                        uniq = np.append(np.asarray(uniq, dtype=object), np.array([""], dtype=object))
                        empty = np.array([len(uniq) - 1])
                    full[want] = int(empty[0])
                full[part[keep]] = codes
            else:
                rows = np.flatnonzero(want)
                codes, uniq = textcat.factorize(values[rows])
                full[rows] = codes
            if len(uniq) <= 30_000:
                full = full.astype(np.int16)
            # (codes made here, within the categories: not checked again)
            out[PREFIX + f] = pd.Categorical.from_codes(full, categories=pd.Index(uniq, dtype=object))
        else:
            if part is not None:
                keep = want[part]
                dense = np.zeros(n, dtype=values.dtype)
                dense[part[keep]] = values[keep]
            else:
                dense = np.where(want, values, values.dtype.type(0))
            out[PREFIX + f] = pd.arrays.SparseArray(dense, fill_value=_fill(dense))


def _fill(dense: np.ndarray) -> Any:
    """The value a sparse column leaves out: 0, or True for a flag that most rows hold (``queued`` and
    ``turnaround`` are True for most gaps of a launch-bound run: leaving the common value out is what
    makes the column small)."""
    if dense.dtype == bool and 2 * np.count_nonzero(dense) > len(dense):
        return np.True_
    return dense.dtype.type(0)


def _context(gaps: Frame, idx: np.ndarray, reads: tuple[str, ...]) -> RuleContext:
    """The context of rows ``idx`` as their evidence reads it: the stored fields, zeros for the rest."""
    rows = Rows(gaps, idx)
    zeros = np.zeros(len(idx))
    values: dict[str, Any] = {f.name: (rows[PREFIX + f.name] if f.name in reads and PREFIX + f.name in gaps.columns else zeros)
              for f in dataclasses.fields(RuleContext) if f.name != "notes"}
    return RuleContext(**values)


def _class_codes(gaps: Frame, idx: np.ndarray) -> np.ndarray:
    s = frame_of(gaps)["class"]
    if isinstance(s.dtype, pd.CategoricalDtype) and tuple(s.cat.categories) == GAP_CLASSES:
        return np.asarray(s.array.codes)[idx]
    return pd.Categorical(np.asarray(s.array.take(idx), dtype=object), categories=list(GAP_CLASSES)).codes


def aligned(frames: list[pd.DataFrame | None]) -> list[pd.DataFrame | None]:
    """Per-trace gap frames given the same sparse evidence data columns before they are concatenated:
    a class absent from one trace leaves its columns out of that trace's frame, and concatenating
    would then fill them with NaN, turning a number or flag column into objects (pandas 3) or
    failing (pandas 2). A missing one is added as zeros of the others' type (as :func:`store` fills
    rows of other classes); text columns are categoricals, which concatenate with missing values. A flag
    column whose left-out value differs from the first frame's (:func:`_fill`) is stored with the first's
    (pandas would warn and convert it)."""
    kinds: dict[str, pd.SparseDtype] = {}
    for f in frames:
        if f is not None:
            for c in f.columns:
                dtype = f[c].dtype
                if is_data(c) and isinstance(dtype, pd.SparseDtype):
                    kinds.setdefault(c, dtype)
    if not kinds:
        return frames
    out: list[pd.DataFrame | None] = []
    for f in frames:
        missing = [c for c in kinds if f is not None and c not in f.columns]
        other = [c for c in kinds if f is not None and c in f.columns and _other_fill(f[c].dtype, kinds[c])]
        if f is not None and (missing or other):
            f = f.copy(deep=False)  # new columns only
            for c in missing:
                zero = np.zeros(len(f), dtype=kinds[c].subtype)
                f[c] = pd.arrays.SparseArray(zero, fill_value=kinds[c].fill_value)
            for c in other:
                f[c] = pd.arrays.SparseArray(np.asarray(f[c].array), fill_value=kinds[c].fill_value)
        out.append(f)
    return out


def _other_fill(dtype: Any, first: pd.SparseDtype) -> bool:
    """Whether a sparse column of ``dtype`` leaves out another value than the first frame's (``first``)."""
    return isinstance(dtype, pd.SparseDtype) and bool(dtype.fill_value != first.fill_value)


def evidence_text(gaps: Frame, rows: np.ndarray | None, cfg: Thresholds) -> np.ndarray:
    """The evidence sentence of each of ``rows`` (positions in ``gaps``; None: every row), as an object
    array: made from the evidence data by the rules' evidence functions (``cfg``: the thresholds the
    gaps were classified with), a class and up to ``CHUNK_ROWS`` rows at a time. Of a ``ColumnCache``,
    each column the sentences read is converted once for all of them."""
    idx = np.arange(len(gaps)) if rows is None else np.asarray(rows, dtype=np.int64)
    if "evidence" in gaps.columns:  # sentences already made (a hand-built or text=True frame)
        return np.asarray(frame_of(gaps)["evidence"].array.take(idx), dtype=object)
    out = np.full(len(idx), "", dtype=object)
    if not len(idx) or "class" not in gaps.columns:
        return out
    cls = _class_codes(gaps, idx)
    for code, (evidence, reads) in _formatters().items():
        at = np.flatnonzero(cls == code)
        for lo in range(0, len(at), CHUNK_ROWS):
            part = at[lo:lo + CHUNK_ROWS]
            sub = idx[part]
            out[part] = evidence(Rows(gaps, sub), _context(gaps, sub, reads), cfg)
    return out


def evidence_parts(gaps: pd.DataFrame, rows: np.ndarray | None, cfg: Thresholds) -> textcat.Texts:
    """:func:`evidence_text` as ``textcat.Texts`` (each sentence's distinct parts and a code per part
    per row), made by the same evidence functions inside ``textcat.as_parts()``: a writer encodes
    each part once and lays the sentences out without a str per row. Raises what
    :func:`evidence_text` would not only where a part is not text (the caller then uses it)."""
    idx = np.arange(len(gaps)) if rows is None else np.asarray(rows, dtype=np.int64)
    if "evidence" in gaps.columns:
        return textcat.texts(evidence_text(gaps, idx, cfg), len(idx))
    n = len(idx)
    if not n or "class" not in gaps.columns:
        return textcat.texts("", n)
    if n > 1 and idx[-1] - idx[0] == n - 1 and bool(np.all(np.diff(idx) == 1)):
        # A block of consecutive rows (a writer's): its columns made dense once (``column_cache``), each
        # class's rows then taken from them (pandas' take of a sparse column costs several times that).
        gaps, idx = gaps.iloc[int(idx[0]):int(idx[-1]) + 1], np.arange(n)
    with column_cache(gaps) as cols:
        return _parts(cols, idx, cfg)


def _parts(gaps: ColumnCache, idx: np.ndarray, cfg: Thresholds) -> textcat.Texts:
    n = len(idx)
    cls = _class_codes(gaps, idx)
    made: list[tuple[np.ndarray, textcat.Texts]] = []
    with textcat.as_parts():
        for code, (evidence, reads) in _formatters().items():
            at = np.flatnonzero(cls == code)
            for lo in range(0, len(at), CHUNK_ROWS):
                part = at[lo:lo + CHUNK_ROWS]
                sub = idx[part]
                made.append((part, textcat.texts(evidence(Rows(gaps, sub), _context(gaps, sub, reads), cfg), len(part))))
    k = max([t.codes.shape[1] for _, t in made], default=0)
    codes = np.zeros((n, k), dtype=np.int32)
    table: list[str] = [""]
    for part, t in made:
        codes[part, :t.codes.shape[1]] = t.codes + np.int32(len(table))
        table.extend(t.table)
    return textcat.Texts(table, codes)


def with_evidence(gaps: Frame, cfg: Thresholds) -> pd.DataFrame:
    """``gaps`` (the frame) with its ``evidence`` column (after ``class``, as ``classify`` placed it) and
    without the evidence data: a sentence per row, so for the rows a user or an output asks for."""
    data = [c for c in gaps.columns if is_data(c)]
    if not data and ("evidence" in gaps.columns or "class" not in gaps.columns):
        return frame_of(gaps)
    text = evidence_text(gaps, None, cfg)
    out = frame_of(gaps).drop(columns=data)
    if "evidence" not in out.columns:
        out.insert(out.columns.get_loc("class") + 1, "evidence", pd.Series(text, index=out.index, dtype=object))
    return out


def shown_columns(gaps: pd.DataFrame) -> list[str]:
    """The columns of :func:`with_evidence` of ``gaps``, in order, without making the sentences."""
    cols = [c for c in gaps.columns if not is_data(c)]
    if "evidence" not in cols and "class" in cols:
        cols.insert(cols.index("class") + 1, "evidence")
    return cols


class EvidenceChunks:
    """The sentences of rows ``[lo, hi)`` of ``gaps`` as ``chunks(lo, hi)``, made ``BLOCK_ROWS`` rows at
    a time, for a writer going through the rows in order (the JSON gap tables)."""

    def __init__(self, gaps: pd.DataFrame, cfg: Thresholds) -> None:
        self.gaps, self.cfg = gaps, cfg
        self._lo, self._text = 0, np.zeros(0, dtype=object)
        self._parts_lo, self._parts = 0, None  # type: int, textcat.Texts | None

    def __len__(self) -> int:
        return len(self.gaps)

    def __call__(self, lo: int, hi: int) -> np.ndarray:
        if lo < self._lo or hi > self._lo + len(self._text):
            end = min(len(self.gaps), max(hi, lo + BLOCK_ROWS))
            self._lo, self._text = lo, evidence_text(self.gaps, np.arange(lo, end), self.cfg)
        return self._text[lo - self._lo:hi - self._lo]

    def parts(self, lo: int, hi: int) -> textcat.Texts | None:
        """The sentences of rows ``[lo, hi)`` as parts (``evidence_parts``; the block's table shared by
        its chunks, so that a writer encodes it once), or None where a part is not text (the writer
        then reads the str, as :meth:`__call__` gives them)."""
        if self._parts is None or lo < self._parts_lo or hi > self._parts_lo + len(self._parts):
            end = min(len(self.gaps), max(hi, lo + BLOCK_ROWS))
            try:
                self._parts = evidence_parts(self.gaps, np.arange(lo, end), self.cfg)
            except (TypeError, ValueError):
                return None
            self._parts_lo = lo
        return self._parts.slice(lo - self._parts_lo, hi - self._parts_lo)
