"""The Python API: ``traceread.load`` and ``traceread.analyze`` (docs/api.md has the examples).

A trace can be given everywhere as a path (``str`` or ``os.PathLike``), a loaded
:class:`~traceread.trace.Trace`, a directory (every trace under it, as ``traceread analyze DIR``
reads it) or a list of any of these. :func:`analyze` returns a :class:`Report`: the analysis'
DataFrames with the input's path next to each ``trace`` index, the verdict and what it speaks for,
and ``to_markdown()`` / ``to_json()`` (the same text as ``traceread analyze`` and ``--json``).

This module is the package's facade (``tests/test_layers.py``): it may import any layer, and
imports each one only when a function needs it, so ``import traceread`` stays cheap and
``traceread.load`` never imports the analysis or the renderers.
"""

from __future__ import annotations

import contextvars
import dataclasses
import functools
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

if TYPE_CHECKING:
    import pandas as pd

    from traceread.analysis import Analysis, TraceSummary
    from traceread.analysis.scope import VerdictScope
    from traceread.attribution import Verdict
    from traceread.config import Thresholds
    from traceread.metrics.workload import Workload
    from traceread.trace import Trace

PathLike = Union[str, "os.PathLike[str]"]
Source = Union[PathLike, "Trace"]

__all__ = ["load", "analyze", "tables", "Report"]


def load(source: PathLike | Iterable[PathLike], *, step_range: str | None = None,
         progress: bool = False) -> Trace | list[Trace]:
    """Load traces into the normalized events frame (``Trace.events``, documented in ``traceread.schema``).

    One file gives one :class:`~traceread.trace.Trace`; a directory or a list gives a list of them
    (a directory: every trace file under it, sorted). ``step_range`` names an NVTX range that marks
    a step (Nsight Systems input); ``progress`` draws a progress bar on standard error.
    Unreadable input raises :class:`traceread.errors.TraceReadError`.
    """
    from traceread.runner import load as load_one

    _check_text(step_range, "step_range")
    if isinstance(source, (str, os.PathLike)) and not os.path.isdir(source):
        return load_one(source, progress=progress, step_range=step_range)
    items = _items(source, "source", traces=False)
    return [load_one(p, progress=progress, step_range=step_range) for p in _expand(items, _left_out.get())]


# What the folders of the current analyze() call held but could not read (load() alone: a warning).
_left_out: contextvars.ContextVar[list[tuple[str, str]] | None] = contextvars.ContextVar("left_out", default=None)


def _expand(items: list[Any], left_out: list[tuple[str, str]] | None) -> list[str]:
    """``loaders.expand_paths``, saying what a folder held but could not be read: a warning (the
    API's standard error), and in analyze()'s report as a note."""
    import warnings

    from traceread.loaders import expand_paths, left_out_text

    skipped: list[tuple[str, str]] = []
    try:
        return expand_paths(items, skipped)
    finally:
        if skipped:
            warnings.warn(f"traceread: left out {len(skipped)} file(s): {left_out_text(skipped)}", stacklevel=4)
            if left_out is not None:
                left_out += skipped


def _items(source: Any, what: str, traces: bool) -> list[Any]:
    """``source`` as a list of paths (and Traces, with ``traces``), refusing what is not one, as the
    CLI's arguments are always paths: bytes would be iterated as numbers, a file object read line by
    line as paths (and its content shown in the error), a DataFrame's column labels taken for paths."""
    from traceread import bounds
    from traceread.trace import Trace

    if isinstance(source, (str, os.PathLike)) or (traces and isinstance(source, Trace)):
        return [source]
    # a list, tuple, set or a generator of them; not a file (it iterates over lines), not an
    # array or a frame (they iterate over values or column labels)
    if hasattr(source, "read") or not isinstance(source, (list, tuple, set, frozenset, Iterator)):
        bounds.path_like(source, what)
    items = list(source)
    for i, item in enumerate(items):
        if not (traces and isinstance(item, Trace)):
            bounds.path_like(item, f"{what}[{i}]")
    return items


def _check_text(value: Any, what: str) -> None:
    if value is not None and not isinstance(value, str):
        from traceread import bounds

        raise bounds.BadType(f"{what}: expected a str or None, got {type(value).__name__}")


def _traces(source: Source | Iterable[Source], step_range: str | None) -> list[Trace]:
    from traceread.trace import Trace

    if isinstance(source, Trace):
        return [source]
    items = _items(source, "source", traces=True)
    out: list[Trace] = []
    for item in items:
        if isinstance(item, Trace):
            out.append(item)
        else:
            got = load(item, step_range=step_range)
            out += got if isinstance(got, list) else [got]
    if not out:
        from traceread.errors import UsageError

        raise UsageError("no traces given")
    return out


def analyze(source: Source | Iterable[Source], *, job: PathLike | Mapping[str, Any] | Workload | None = None,
            thresholds: Mapping[str, Any] | Thresholds | None = None, top_gaps: int = 10,
            warmup_steps: int | None = None, step_range: str | None = None,
            rank_pattern: str | None = None) -> Report:
    """Diagnose ``source`` (a path, a :class:`~traceread.trace.Trace`, a directory, or a list of them;
    several traces are analysed together, as ``traceread analyze A B``) and return a :class:`Report`.

    ``job``: the MFU inputs, as a ``job.toml`` path, a mapping of its keys (``{"params": 7e9,
    "global_batch": 512, "seq_len": 4096, "dtype": "bf16"}``; docs/job-file.md) or a
    ``Workload``. ``thresholds``: overrides by name (``{"healthy_max_idle": 0.05}``, as ``--set``)
    or a ``traceread.config.Thresholds``. The other arguments are the ``analyze`` options.
    """
    from traceread import bounds
    from traceread.config import Thresholds
    from traceread.runner import analyze as run

    # the arguments checked as the CLI checks its options, before any trace is read
    top_gaps = bounds.integer(top_gaps, "top_gaps", 0)
    if warmup_steps is not None:
        warmup_steps = bounds.integer(warmup_steps, "warmup_steps", 0)
    _check_text(step_range, "step_range")
    _check_text(rank_pattern, "rank_pattern")
    if rank_pattern is not None:
        from traceread.ranks.identity import compile_rank_pattern

        try:
            compile_rank_pattern(rank_pattern)
        except (ValueError, re.error) as exc:
            raise bounds.BadValue(f"rank_pattern: {exc}") from None
    if not (thresholds is None or isinstance(thresholds, (Thresholds, Mapping))):
        raise bounds.BadType(f"thresholds: expected a mapping or a Thresholds, got {type(thresholds).__name__}")
    cfg = thresholds if isinstance(thresholds, Thresholds) else Thresholds().with_overrides(dict(thresholds or {}))
    workload = _workload(job)
    left_out: list[tuple[str, str]] = []
    token = _left_out.set(left_out)
    try:
        traces = _traces(source, step_range)
    finally:
        _left_out.reset(token)
    result = run(traces, workload=workload, cfg=cfg, top_gaps=top_gaps, warmup_steps=warmup_steps,
                 step_range=step_range, rank_pattern=rank_pattern)
    if left_out:  # the report says what its folders held but it could not read
        from traceread.loaders import left_out_notes

        result = dataclasses.replace(result, notes=result.notes + left_out_notes(left_out))
    return Report(result)


def tables(source: Source | Iterable[Source], *, step_range: str | None = None) -> dict[str, pd.DataFrame]:
    """The tables ``traceread kernels`` prints, as DataFrames: ``ops`` (GPU time per launching op),
    ``modules`` (per ``nn.Module``), ``ranges`` (annotation/NVTX summary), ``copies`` (by kind, bytes,
    GB/s), ``host_api`` (CUDA API summary), ``collectives`` (bus bandwidth) and ``mem_bandwidth``
    (achieved TB/s of memory-bound kernels with recorded bytes); ``traceread.metrics.tables`` documents
    the columns.

    ``source`` as for :func:`analyze`; every frame starts with ``trace`` (the input's index) and ``path``.
    A table a trace cannot give is empty, never invented: ``frame.attrs["note"]`` says why (one line per
    input, ``path: note``, when several were given).
    """
    import pandas as pd

    from traceread.metrics.tables import TABLES, kernel_tables
    from traceread.render.notes import text_or_empty

    traces = _traces(source, step_range)
    parts: dict[str, list[pd.DataFrame]] = {name: [] for name in TABLES}
    notes: dict[str, list[str]] = {name: [] for name in TABLES}
    for i, tr in enumerate(traces):
        got = kernel_tables(tr)
        for name in TABLES:
            frame = got.frames[name]
            frame.insert(0, "trace", i)
            frame.insert(1, "path", tr.meta.path)
            parts[name].append(frame)
            note = text_or_empty(got.notes[name])
            if note:
                notes[name].append(note if len(traces) == 1 else f"{tr.meta.path}: {note}")
    out = {}
    for name in TABLES:
        frame = pd.concat(parts[name], ignore_index=True) if len(parts[name]) > 1 else parts[name][0]
        frame.attrs["note"] = "\n".join(notes[name])
        out[name] = frame
    return out


def _workload(job: PathLike | Mapping[str, Any] | Workload | None) -> Workload | None:
    from traceread.metrics.workload import Workload, coerce_field, make_workload, read_workload_file

    if job is None or isinstance(job, Workload):
        return job
    from traceread import bounds

    if isinstance(job, (str, os.PathLike)):
        return make_workload(read_workload_file(os.fspath(job)), {})
    if not isinstance(job, Mapping):
        raise bounds.BadType(f"job: expected a path, a mapping or a Workload, got {type(job).__name__}")
    known = {f.name for f in dataclasses.fields(Workload)}
    values = {}
    for key, value in job.items():
        if not isinstance(key, str):
            raise bounds.BadType(f"job: keys are str, got {key!r}")
        name = key.replace("-", "_")
        if name not in known:
            raise bounds.BadValue(f"job: unknown key {key!r}; known: {', '.join(sorted(known))}")
        values[name] = value
    return make_workload({k: coerce_field(k, v, "job: ") for k, v in values.items()}, {})


@dataclass(frozen=True, eq=False)
class Report:
    """The result of :func:`analyze`: DataFrames, the verdict, and the report as Markdown or JSON.

    Every frame has a ``trace`` column (the input's index in :attr:`traces`, in the order given)
    followed by ``path`` (that input's file). Times are int64 ns in each trace's own time base.

    * :attr:`steps`: one row per trace, rank, device and step (``busy_ns``, ``idle_ns``, ``warmup``,
      ``outlier``, ``<class>_ns`` idle by gap class).
    * :attr:`gaps`: every compute-idle gap with its ``class``, ``evidence`` (the sentence) and
      ``evidence_kind``, and what overlapped it (``comm_ns``, ``sync_ns``...). The analysis keeps the
      evidence as data: the sentences are made the first time :attr:`gaps` is read (seconds for
      millions of gaps), then kept with the report.
    * :attr:`kernels`: the kernel table (name, class, count, total and mean ns) per trace.
    * :attr:`attribution`: one row per rank/GPU: ``step_ns`` and ``<part>_ns`` for every part of step
      time (busy and idle by class; they sum to ``step_ns``).
    * :attr:`collectives`: the collective table per trace.
    * :attr:`verdict` and :attr:`scope`: the dominant cause and what it speaks for (one trace, one
      job, or several inputs together); :meth:`rank_verdicts` gives each rank/GPU's own.
    * :attr:`whatif`: the what-if predictions when this traceread has them, else None.

    Anything else of the underlying :class:`~traceread.analysis.Analysis` (``mfu``, ``removal``,
    ``notes``, ``job``...) is reachable as an attribute of the report, or as :attr:`analysis`.
    """

    analysis: Analysis

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.analysis, name)

    # --- frames ------------------------------------------------------------------------------------
    def _with_path(self, df: pd.DataFrame) -> pd.DataFrame:
        if "trace" not in df.columns or "path" in df.columns:
            return df
        paths = {t.index: t.path for t in self.analysis.traces}
        out = df.copy()
        out.insert(out.columns.get_loc("trace") + 1, "path", out["trace"].map(paths))
        return out

    @property
    def traces(self) -> tuple[TraceSummary, ...]:
        """One entry per input (index, path, format, devices, ranks, time base...)."""
        return self.analysis.traces

    @property
    def steps(self) -> pd.DataFrame:
        return self._with_path(self.analysis.steps)

    @functools.cached_property
    def gaps(self) -> pd.DataFrame:
        # The analysis keeps the evidence as data; the sentences are made here, once, when asked for.
        return self._with_path(self.analysis.findings.with_evidence(self.analysis.gaps))

    @property
    def kernels(self) -> pd.DataFrame:
        return self._with_path(self.analysis.kernels)

    @property
    def attribution(self) -> pd.DataFrame:
        return self._with_path(self.analysis.attribution)

    @property
    def collectives(self) -> pd.DataFrame:
        return self._with_path(self.analysis.collectives)

    @property
    def whatif(self) -> Any:
        """The what-if predictions (``Analysis.whatif``) when this version computes them, else None."""
        return getattr(self.analysis, "whatif", None)

    # --- verdict -----------------------------------------------------------------------------------
    @property
    def verdict(self) -> Verdict:
        """The dominant cause and its share of step time, and the runner-up (``attribution.Verdict``)."""
        from traceread.attribution import Verdict

        a = self.analysis
        return Verdict(a.dominant_cause, a.dominant_cost_share, a.second_cause, a.second_cost_share)

    @property
    def scope(self) -> VerdictScope:
        """What :attr:`verdict` speaks for: ``kind`` trace, job or inputs, its ``name``, traces and units."""
        from traceread.analysis.scope import analysis_scope

        return analysis_scope(self.analysis)

    def rank_verdicts(self) -> pd.DataFrame:
        """Each rank/GPU's own verdict, by the rule that gives the run's: ``trace, path, rank, device,
        cause, share``."""
        import pandas as pd

        paths = self.attribution["path"].tolist() if len(self.attribution) else []
        rows = [{"trace": v.trace, "path": path, "rank": v.rank, "device": v.device, "cause": v.cause,
                 "share": v.share} for v, path in zip(self.analysis.findings.unit_verdicts(), paths, strict=True)]
        return pd.DataFrame(rows, columns=["trace", "path", "rank", "device", "cause", "share"])

    # --- text --------------------------------------------------------------------------------------
    def to_markdown(self, verbose: bool = False) -> str:
        """The Markdown report, as ``traceread analyze`` prints it (``verbose``: as ``--verbose`` does)."""
        from traceread.render.markdown import to_markdown

        return to_markdown(self.analysis, verbose=verbose)

    def to_dict(self) -> dict[str, Any]:
        """The JSON report as plain data (``traceread/data/report.schema.json``)."""
        from traceread.render.jsonout import to_report

        return to_report(self.analysis)

    def to_json(self) -> str:
        """The JSON report, as ``traceread analyze --json`` writes it."""
        from traceread.render.jsonout import dumps

        return dumps(self.analysis).decode("utf-8")

    def __repr__(self) -> str:
        v, s = self.verdict, self.scope
        return f"<traceread.Report {v.cause} {v.share:.0%} {s.text()}>"
