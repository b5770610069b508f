"""What runs where: GPU-aware row selections over the events frame, shared by steps and gaps.

:func:`event_view` wraps a trace's events frame as numpy columns once (category codes, not
strings), classifies the distinct host-call names (launch, sync, allocator, data loader,
optimizer, ProfilerStep) and links every GPU op to the host call that launched it. Linking uses
``(rank, pid, correlation)``: correlation ids are per process, so never correlation alone. Kineto
writes the device index as a GPU row's pid; when a GPU row's pid is not a host pid of its rank and
the rank has a single launching process, that process is used.

The view caches its row selections and unions (:meth:`EventView.rows`, :func:`compute_union`); the
analysis drops them once its steps, gaps, rules and tables are done, but the replay's
(:meth:`EventView.keep_selections`, keyed by :func:`selection_key`).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from traceread import intervals, schema
from traceread.host_calls import DATALOADER_PREFIX, LAUNCH, MEMORY, OPTIMIZER_PREFIX, PROFILER_STEP_RE, SYNC
from traceread.limits import int_text
from traceread.trace import Trace

HOST_LANES = (schema.LANE_CPU_THREAD, schema.LANE_CPU_ANNOTATION)
OP_LANES = (schema.LANE_GPU_COMPUTE, schema.LANE_GPU_COMM, schema.LANE_MEMCPY, schema.LANE_MEMSET)
COMPUTE_CATS = (schema.CAT_KERNEL, schema.CAT_GRAPH)
API_CATS = (schema.CAT_RUNTIME, schema.CAT_DRIVER)
_PID_SHIFT = 40  # correlation ids are 32-bit (CUPTI, roctracer, nsys)


@dataclass
class EventView:
    """Numpy columns of one events frame plus name flags and launch links. Read-only."""

    rank: np.ndarray
    device: np.ndarray
    pid: np.ndarray
    tid: np.ndarray
    start: np.ndarray
    end: np.ndarray
    corr: np.ndarray
    lane: np.ndarray  # category codes
    cat: np.ndarray
    name: np.ndarray
    names: np.ndarray  # object array: name code -> str; index -1 is ""
    lane_codes: dict[str, int]
    cat_codes: dict[str, int]
    name_flags: dict[str, np.ndarray]  # flag -> bool per name code
    step_number: np.ndarray  # per name code: N of ProfilerStep#N, else -1 (index -1 too)
    link_gpu: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # sorted GPU op rows
    link_host: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # their launch rows
    _lane_rows: dict[str, np.ndarray] = field(default_factory=dict)
    _rows: dict[tuple, Any] = field(default_factory=dict)  # selection and union caches

    def lane_rows(self, lane: str) -> np.ndarray:
        """Row indices of one lane (cached)."""
        # A local, not a second read of the cache: the analysis' replay thread reads the view while the
        # main thread may replace the caches (keep_selections).
        rows = self._lane_rows.get(lane)
        if rows is None:
            code = self.lane_codes.get(lane, -99)
            rows = self._lane_rows[lane] = row_indices(np.flatnonzero(self.lane == code), len(self.lane))
        return rows

    def rows(self, lanes, cats=None, rank=None, device=None) -> np.ndarray:
        """Sorted row indices on ``lanes`` (and ``cats``, ``rank``, ``device`` when given). Cached;
        callers must not modify the result."""
        key = selection_key(lanes, cats, rank, device)
        cached = self._rows.get(key)
        if cached is not None:
            return cached
        if cats is None and rank is None and device is None:
            parts = [r for r in (self.lane_rows(x) for x in lanes) if len(r)] or [np.zeros(0, np.int64)]
            # each lane's rows are sorted: a stable sort merges the runs (in linear time)
            rows = parts[0] if len(parts) == 1 else np.sort(np.concatenate(parts), kind="stable")
        elif rank is not None and (cats is not None or device is not None) and self._constant(self.rank) is None:
            # the rank's rows first (cached): each rank's other selections start from them, not from every rank's
            rows = self.rows(lanes, rank=rank)
            rank = None
        else:  # a selection of the lanes' rows: those are merged and sorted once, not per rank/device
            rows = self.rows(lanes)
        keep = None
        if cats is not None:
            keep = self.in_cats(rows, cats)
        for col, want in ((self.rank, rank), (self.device, device)):
            if want is not None and self._constant(col) != want:
                hit = col[rows] == want
                keep = hit if keep is None else keep & hit
        if keep is not None and not keep.all():
            rows = rows[keep]
        self._rows[key] = rows
        return rows

    def keep_selections(self, keys: Collection[tuple[Any, ...]]) -> None:
        """Drop the cached selections, unions and tables but those of ``keys`` (:func:`selection_key`), once
        the steps, gaps, rules and tables are done with them: the analysis keeps only what its replay reads
        (the others, row indices of every lane and kind, would stay through the replay). What is dropped is
        made again if asked for; the launch links stay."""
        # A snapshot first (one C call under the GIL): the runner's replay thread may add a selection
        # meanwhile, which iterating the live dict would raise on; one added after the snapshot is made
        # again if asked for.
        self._rows = {k: v for k, v in tuple(self._rows.items()) if k in keys or k[0] == "constant"}
        self._lane_rows = {}

    def forget_selections(self, keys: Collection[tuple[Any, ...]]) -> None:
        """Drop the cached selections of ``keys`` (:func:`selection_key`) and the lane tables, keeping the rest
        (:meth:`keep_selections`' complement); what is dropped is made again if asked for."""
        self._rows = {k: v for k, v in tuple(self._rows.items()) if k not in keys}  # a snapshot: keep_selections
        self._lane_rows = {}

    def _constant(self, col: np.ndarray) -> Any:
        """The one value of ``col`` when every row holds it (a one-rank or one-device trace: then
        selecting by it keeps every row and needs no comparison per row), else None."""
        key = ("constant", id(col))
        value = self._rows.get(key, _UNSET)
        if value is _UNSET:
            one = len(col) > 0 and np.min(col) == np.max(col)
            value = self._rows[key] = col[0].item() if one else None
        return value

    def in_cats(self, rows: np.ndarray, cats: Collection[str]) -> np.ndarray:
        """Bool per row: is its category one of ``cats`` (a lookup per category code; its last entry answers
        for -1, a missing category)."""
        wanted = np.zeros(len(self.cat_codes) + 1, dtype=bool)
        wanted[[self.cat_codes[c] for c in cats if c in self.cat_codes]] = True
        return wanted[self.cat[rows]]

    def flag(self, name: str, rows: np.ndarray) -> np.ndarray:
        """Bool per row: does the row's name carry flag ``name``."""
        return self.name_flags[name][self.name[rows]]

    def names_of(self, rows: np.ndarray) -> np.ndarray:
        return self.names[self.name[rows]]

    @property
    def empty_code(self) -> int:
        """Name code that stands for '' (an existing '' name, else one past the last name)."""
        hit = np.flatnonzero(self.names[:-1] == "")
        return int(hit[0]) if len(hit) else len(self.names) - 1

    def name_codes_at(self, rows: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """Name codes of ``rows[idx]``; ``empty_code`` where ``idx`` is -1 (or the name is missing)."""
        out = np.full(len(idx), self.empty_code, dtype=np.int64)
        ok = idx >= 0
        codes = self.name[rows[idx[ok]]].astype(np.int64)
        out[ok] = np.where(codes >= 0, codes, self.empty_code)
        return out

    def categorical(self, codes: np.ndarray) -> pd.Categorical:
        """A categorical of name codes (from :meth:`name_codes_at`) with unused names dropped."""
        used = np.bincount(codes, minlength=len(self.names)) > 0
        remap = (np.cumsum(used) - 1).astype(np.int32)
        return pd.Categorical.from_codes(remap[codes], categories=pd.Index(self.names[used], dtype=object))

    def map_names(self, rows: np.ndarray, fn) -> np.ndarray:
        """``fn`` (array of distinct names -> array of values) applied once per distinct name of
        ``rows`` and broadcast back to the rows."""
        names, inverse = self.distinct_names(rows)
        return np.asarray(fn(names))[inverse]

    def distinct_names(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The distinct names of ``rows`` (in name-code order) and, per row, its name's position
        among them."""
        codes = self.name[rows]  # -1 (missing) indexes the trailing ''
        seen = np.zeros(len(self.names), dtype=bool)
        seen[codes] = True
        used = np.flatnonzero(seen)
        lookup = np.zeros(len(self.names), dtype=np.intp)
        lookup[used] = np.arange(len(used))
        return self.names[used], lookup[codes]

    def matching(self, rows: np.ndarray, rx: re.Pattern[str]) -> np.ndarray:
        """Bool per row: ``rx`` finds its name (``search``, as ``host_calls.calls_matching``: once per
        distinct name; a row without a name never matches)."""
        if len(rows) == 0:
            return np.zeros(0, dtype=bool)
        hit = self.map_names(rows, lambda names: np.array([bool(rx.search(str(x))) for x in names], dtype=bool))
        return hit & (self.name[rows] >= 0)

    def launch_of(self, rows: np.ndarray) -> np.ndarray:
        """The launching host row of each GPU op row (-1 when unlinked)."""
        if len(self.link_gpu) == 0:
            return np.full(len(rows), -1, dtype=np.int64)
        if rows is self.link_gpu:  # every op linked (the common case): no search
            return self.link_host
        k = intervals.sorted_positions(self.link_gpu, rows)  # one merge pass when rows are sorted
        return np.where(k >= 0, self.link_host[k], -1)


    def links_by_host(self) -> tuple[np.ndarray, np.ndarray]:
        """``(link_host, link_gpu)`` sorted by host row (stable: a host row's ops keep their order);
        sorted once per view, shared by every rank."""
        key = ("links_by_host",)
        cached = self._rows.get(key)
        if cached is None:
            lh, lg = self.link_host, self.link_gpu
            if not intervals.is_sorted(lh):
                o = np.argsort(lh, kind="stable")
                lh, lg = lh[o], lg[o]
            cached = self._rows[key] = (lh, lg)
        return cached


def selection_key(lanes, cats=None, rank=None, device=None) -> tuple[Any, ...]:
    """The cache key of :meth:`EventView.rows` of these arguments (what :meth:`EventView.keep_selections` keeps)."""
    return (tuple(lanes), tuple(cats) if cats is not None else None, rank, device)


def row_indices(rows: np.ndarray, n: int) -> np.ndarray:
    """Row numbers of a frame of ``n`` rows as int32 when they fit: the view caches many
    selections of a multi-million-row frame, and int64 doubled them (numpy indexes with either)."""
    return rows.astype(np.int32) if n < (1 << 31) else rows


def _codes(series: pd.Series) -> tuple[np.ndarray, list[str]]:
    if isinstance(series.dtype, pd.CategoricalDtype):
        return series.cat.codes.to_numpy(), [str(c) for c in series.cat.categories]
    cat = pd.Categorical(series)
    return np.asarray(cat.codes), [str(c) for c in cat.categories]


def _name_flags(names: list[str]) -> tuple[dict[str, np.ndarray], np.ndarray]:
    # The patterns of traceread.host_calls, shared with the rules (so a sync is one for both).
    flags = {
        "launch": np.array([bool(LAUNCH.match(n)) for n in names], dtype=bool),
        "sync": np.array([bool(SYNC.match(n)) for n in names], dtype=bool),
        "alloc": np.array([bool(MEMORY.match(n)) for n in names], dtype=bool),
        "dataloader": np.array([n.startswith(DATALOADER_PREFIX) for n in names], dtype=bool),
        "optimizer": np.array([n.startswith(OPTIMIZER_PREFIX) for n in names], dtype=bool),
    }
    steps = np.full(len(names), -1, dtype=np.int64)
    for i, n in enumerate(names):
        m = PROFILER_STEP_RE.match(n)
        if m:  # a number past int64 is no step number (the loader numbers such steps by time)
            number = int_text(m.group(1), 0)
            steps[i] = -1 if number is None else number
    # A trailing entry answers for code -1 (missing name), so lookups index with codes directly.
    return {k: np.append(f, False) for k, f in flags.items()}, np.append(steps, -1)


def subset(rows: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``rows[mask]`` without a copy when the mask keeps everything (the one-rank common case)."""
    return rows if mask.all() else rows[mask]


def _keys(v: EventView, rows: np.ndarray, pid_pos: np.ndarray | None) -> np.ndarray:
    """Join keys: the correlation id, with the pid's position above it when a rank has several
    processes."""
    if pid_pos is None:
        return v.corr[rows]
    key = pid_pos.astype(np.int64)
    key <<= _PID_SHIFT
    key |= v.corr[rows]
    return key


def _link_rank(v: EventView, h: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Link GPU op rows ``g`` to host API rows ``h`` of one rank by (pid, correlation)."""
    hp = np.sort(pd.unique(v.pid[h]))
    if len(hp) == 1:  # one process: every GPU op of the rank is its (Kineto writes device as pid)
        hkey, gkey = _keys(v, h, None), _keys(v, g, None)
    else:
        gp = v.pid[g]
        pos = np.minimum(np.searchsorted(hp, gp), len(hp) - 1)
        known = hp[pos] == gp
        g, pos = subset(g, known), subset(pos, known)
        hkey, gkey = _keys(v, h, np.searchsorted(hp, v.pid[h])), _keys(v, g, pos)
    # Runtime before driver on equal keys: the outer API call is the launch.
    is_driver = v.cat[h] == v.cat_codes.get(schema.CAT_DRIVER, -99)
    if is_driver.any():
        order = np.lexsort((is_driver, hkey))
        hkey, h = hkey[order], h[order]
    elif not intervals.is_sorted(hkey):
        order = np.argsort(hkey, kind="stable")
        hkey, h = hkey[order], h[order]
    k = intervals.sorted_positions(hkey, gkey)  # one merge pass when the GPU ops' keys are sorted too
    hit = k >= 0
    return subset(g, hit), h[subset(k, hit)]


def _link(v: EventView) -> None:
    """Fill ``v.link_gpu``/``v.link_host``: GPU op row -> launching runtime/driver row."""
    is_api = np.zeros(len(v.cat_codes) + 1, dtype=bool)  # by category code (the last entry answers for -1)
    is_api[[v.cat_codes[c] for c in API_CATS if c in v.cat_codes]] = True
    host = is_api[v.cat]
    host &= v.corr >= 0
    host = row_indices(np.flatnonzero(host), len(v.cat))
    gpu = v.rows(OP_LANES)
    gpu = subset(gpu, v.corr[gpu] >= 0)
    if len(host) == 0 or len(gpu) == 0:
        return
    ranks = np.sort(pd.unique(v.rank[gpu]))
    out_gpu, out_host = [], []
    for r in ranks:  # loop over ranks, not events
        h = host if len(ranks) == 1 and (v.rank[host] == r).all() else host[v.rank[host] == r]
        g = gpu if len(ranks) == 1 else gpu[v.rank[gpu] == r]
        if len(h):
            lg, lh = _link_rank(v, h, g)
            out_gpu.append(lg)
            out_host.append(lh)
    if out_gpu:
        g_all = out_gpu[0] if len(out_gpu) == 1 else np.concatenate(out_gpu)
        h_all = out_host[0] if len(out_host) == 1 else np.concatenate(out_host)
        if not intervals.is_sorted(g_all):
            o = np.argsort(g_all, kind="stable")
            g_all, h_all = g_all[o], h_all[o]
        v.link_gpu, v.link_host = g_all, h_all


_UNSET = object()  # not cached yet (None is a cached value: no constant)


class EngineCache:
    """The engine's memory: the event view of one events frame at a time (steps, gaps, rules and the replay
    share it) and what is derived from that view (``derived``: collective identity, capture edges, the rules'
    shared selections), dropped when the view is replaced. The runner makes one per analysis and every trace
    of it carries it (``Trace.cache``); a trace used outside a runner makes its own on first use
    (:func:`engine_cache`). Nothing of it is data: a pickled trace carries an empty one."""

    def __init__(self) -> None:
        self._events: Any = None  # the frame ``view`` was built from
        self.view: EventView | None = None
        self.derived: dict[str, Any] = {}
        # Held while a view is built: the runner's lock where threads may ask for one together (built once)
        self.building: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()

    def view_of(self, events: pd.DataFrame) -> EventView | None:
        """The view kept for ``events``, or None."""
        view = self.view
        if view is not None and self._events is events and view.start.shape[0] == len(events):
            return view
        return None

    def keep(self, events: pd.DataFrame, view: EventView) -> None:
        """``view`` is ``events``' view from now on (the view before it and what was derived from it go)."""
        self._events, self.view, self.derived = events, view, {}

    def derived_of(self, events: pd.DataFrame) -> dict[str, Any] | None:
        """What is derived from ``events``' view while it is the one kept, or None."""
        return self.derived if self.view_of(events) is not None else None

    def __reduce__(self) -> tuple[type[EngineCache], tuple[()]]:
        return (EngineCache, ())


def engine_cache(trace: Trace) -> EngineCache:
    """The cache ``trace`` carries (the runner's), made for it on first use outside a runner."""
    cache = trace.cache
    if cache is None:
        cache = trace.cache = EngineCache()
    return cache


def cached_view(trace: Trace) -> EventView | None:
    """The :class:`EventView` of ``trace.events`` when one is built and kept, else None (none is built)."""
    return trace.cache.view_of(trace.events) if trace.cache is not None else None


def drop_selections(trace: Trace) -> None:
    """Drop the cached selections of ``trace``'s view (:meth:`EventView.keep_selections` of none): for a
    command whose next steps read none of them (the rules read their own context; ``gaps`` after the
    engine: they hold row indices of every lane and kind)."""
    view = cached_view(trace)
    if view is not None:
        view.keep_selections(())


def event_view(trace: Trace) -> EventView:
    """The :class:`EventView` of ``trace.events`` (built once per frame, then reused)."""
    view = cached_view(trace)
    if view is not None:
        return view
    with engine_cache(trace).building:
        view = cached_view(trace)  # (built by another thread meanwhile)
        return view if view is not None else _built_view(trace)


def _built_view(trace: Trace) -> EventView:
    ev = trace.events
    lane, lanes = _codes(ev["lane"])
    cat, cats = _codes(ev["category"])
    name, names = _codes(ev["name"])
    flags, step_number = _name_flags(names)
    view = EventView(
        rank=ev["rank"].to_numpy(), device=ev["device"].to_numpy(), pid=ev["pid"].to_numpy(),
        tid=ev["tid"].to_numpy(), start=ev["start_ns"].to_numpy(), end=ev["end_ns"].to_numpy(),
        corr=ev["correlation"].to_numpy(), lane=lane, cat=cat, name=name,
        names=np.array(names + [""], dtype=object),
        lane_codes={n: i for i, n in enumerate(lanes)}, cat_codes={n: i for i, n in enumerate(cats)},
        name_flags=flags, step_number=step_number,
    )
    _link(view)
    engine_cache(trace).keep(ev, view)
    return view


def compute_rows(v: EventView, rank: int, device: int) -> np.ndarray:
    """Rows of compute work (kernels and whole CUDA graphs on compute lanes) of one device."""
    return v.rows((schema.LANE_GPU_COMPUTE,), COMPUTE_CATS, rank=rank, device=device)


def compute_union(v: EventView, rank: int, device: int) -> tuple[np.ndarray, np.ndarray]:
    """The device's compute busy time: union of :func:`compute_rows` intervals (cached)."""
    key = ("compute_union", rank, device)
    cached = v._rows.get(key)  # read once: the replay's thread may meet keep_selections replacing the cache
    if cached is None:
        cached = v._rows[key] = intervals.rows_union(v.start, v.end, compute_rows(v, rank, device))
    return cached


def rank_devices(v: EventView) -> list[tuple[int, int]]:
    """Sorted (rank, device) pairs that carry any GPU op."""
    rows = v.rows(OP_LANES)
    rows = rows[v.device[rows] >= 0]
    if len(rows) == 0:
        return []
    key = np.sort(pd.unique((v.rank[rows].astype(np.int64) << 32) | (v.device[rows].astype(np.int64) & 0xFFFFFFFF)))
    return [(int(k >> 32), int(np.int32(k & 0xFFFFFFFF))) for k in key]
