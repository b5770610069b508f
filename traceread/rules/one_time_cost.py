"""one-time-cost: the GPU idles while the host pays a cost it pays once per process, not every step.

::

    host     [nvrtcCompileProgram / cuLibraryLoadData... / BeginCapture..GetCaptureInfo..EndCapture]
    compute  ==k==|................................gap................................|==k==
                   ^ nothing to run: the host is compiling, loading modules or capturing a graph

Signature: one-time work on the gap's rank covers at least ``one_time_cover`` of the gap and the
next kernel was not already queued (the GPU waited for the host, not for a dependency):

* ``compile``: JIT compilation ranges (nvFuser ``compileFusion``, NVRTC, Inductor/Triton compile,
  ``nvJitLink``), from NVTX or host annotations / CPU ops;
* ``autotune``: cuDNN ``Find`` / Inductor or Triton autotuning ranges;
* ``graph-capture``: a CUDA/HIP graph being captured (``cudaStreamBeginCapture`` to
  ``cudaStreamEndCapture`` on a thread, with the ``GetCaptureInfo`` calls inside), and
  ``cudaGraphInstantiate``;
* ``module-load``: lazy module loading and driver initialization (``cuLibraryLoadData``,
  ``cuModuleLoad*``, ``hipModuleLoad*``, ``cuGetProcAddress``), merged into one run when
  consecutive calls are within ``one_time_run_gap_ns`` (the host time between them is the same
  loading); and, when longer than ``launch_call_max_ns``, a function's attribute / occupancy queries and look-ups
  (``cudaFuncGetAttributes``, ``cuFuncSetAttribute``, ``cudaOccupancy*``, ``cuModuleGetFunction``,
  ``cuLibraryGetKernel``...: ``host_calls.LAZY_LOAD_QUERY``), where CUDA lazy loading loads the module
  on the function's first use;
* ``first-launch``: a kernel's first launch whose call takes longer than ``launch_call_max_ns``
  (CUDA lazy loading loads the module inside it);
* ``lazy-init``: CUDA and math-library lazy start-up: driver/runtime initialization and library
  handle creation by name (``cuInit``, ``cudaGetDeviceCount``, ``cudnnCreate``, ``cublasCreate``...:
  ``host_calls.LAZY_INIT``), and allocator / context calls longer than ``launch_call_max_ns`` made
  inside the first call on a thread of an op that creates a library handle (a cuDNN convolution,
  a cuBLAS GEMM: ``host_calls.LIBRARY_OP``), where Kineto shows the handle's creation only as
  ``cudaFree(0)``, workspace ``cudaMalloc`` and ``cudaStreamCreate``: not allocator growth;
* ``context``: context, stream, event and pinned-host-memory setup calls longer than
  ``launch_call_max_ns``;
* ``setup-teardown``: set-up and teardown around the work: pinned host memory allocated or freed
  (``cudaHostAlloc``/``cudaFreeHost``/``cudaHostRegister``..., any length), stream and event
  destruction, and NVTX / ``record_function`` ranges named for set-up or clean-up (``init_data``,
  ``setup``, ``clean_up``, ``teardown``, ``finalize``: ``host_calls.SETUP_RANGE``); each only on a
  rank where it does not recur (same test as the allocator below);
* ``allocator-growth``: device allocator calls (``cudaMalloc``/``cudaFree``/``hipMalloc``...) on a
  rank where they do not recur: found in fewer than ``allocator_recur_presence`` of the steps (or
  in a single step). Allocator calls that recur every step are thrash: ``sync-stall`` with
  ``allocator`` evidence;
* ``host-stall``: a long child-free stretch inside a CPU op (``rules.host_stall``: no child op or
  CUDA call for ``host_stall_min_ns``) in an op whose stretches do not recur every step: the first
  call compiling (TorchScript's profiling executor, Inductor), autotuning, recording a graph or
  initializing lazily.

The fix is not in the code but in the measurement: profile steady-state steps (a ``torch.profiler``
schedule with warmup steps, or ``nsys --capture-range``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from traceread import grouped, intervals, schema
from traceread.config import Thresholds
from traceread.engine.lanes import HOST_LANES, EventView, event_view
from traceread.host_calls import (
    AUTOTUNE_RANGE,
    CAPTURE,
    CAPTURE_BEGIN,
    CAPTURE_END,
    COMPILE_RANGE,
    CONTEXT_SETUP,
    DEVICE_ALLOCATOR,
    KERNEL_LAUNCH,
    LAZY_INIT,
    LAZY_LOAD_QUERY,
    LIBRARY_OP,
    MODULE_LOAD,
    PINNED_MEMORY,
    SETUP_RANGE,
    TEARDOWN,
)
from traceread.rules import host_stall
from traceread.rules._base import Rule, RuleContext, cat, fmt_int, fmt_ns, fmt_pct, texts
from traceread.rules._calls import (
    Calls,
    Spec,
    api_calls,
    api_ranks,
    count_at_or_before,
    count_before,
    longer_than,
    matching,
    name_hits,
    select,
)
from traceread.rules._columns import Frame, Gaps, col
from traceread.trace import Trace

NAME = "one-time-cost"
KINDS: tuple[str, ...] = ("compile", "autotune", "graph-capture", "module-load", "first-launch", "lazy-init",
                          "context", "setup-teardown", "allocator-growth", "host-stall")
KIND_TEXT: dict[str, str] = {
    "compile": "JIT compilation", "autotune": "autotuning", "graph-capture": "CUDA-graph capture",
    "module-load": "module loading / driver initialization", "first-launch": "a first kernel launch (lazy module load)",
    "context": "context / stream setup", "allocator-growth": "allocator growth",
    "lazy-init": "CUDA / cuDNN / cuBLAS lazy start-up (context init, first library handle)",
    "setup-teardown": "set-up / teardown (pinned memory, stream teardown, init / clean-up ranges)",
    "host-stall": "a long host stretch inside one op, not repeated every step (compilation, graph recording, "
                  "lazy initialization)",
}

def _step_windows(steps: pd.DataFrame | None, rank: int) -> tuple[np.ndarray, np.ndarray]:
    """One window per step number of ``rank`` (its devices' steps merged), sorted."""
    if steps is None or steps.empty:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    # numpy, not a frame group-by (asked per rank and kind of call: a fixed cost on small traces)
    mine = steps["rank"].to_numpy() == rank
    code, n = grouped.codes(steps["step"].to_numpy()[mine])
    start = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    end = np.full(n, np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(start, code, steps["start_ns"].to_numpy(np.int64)[mine])
    np.maximum.at(end, code, steps["end_ns"].to_numpy(np.int64)[mine])
    return start, end


def allocator_recurs(alloc_starts: np.ndarray, steps: pd.DataFrame | None, rank: int, cfg: Thresholds) -> bool:
    """Do the rank's allocator calls recur every step (thrash) rather than only in the first steps?"""
    ws, we = _step_windows(steps, rank)
    if len(ws) < 2 or len(alloc_starts) == 0:
        return False
    with_calls = int((intervals.count_in(ws, we, np.sort(alloc_starts)) > 0).sum())
    return with_calls >= max(2, math.ceil(cfg.allocator_recur_presence * len(ws)))


def _runs(s: np.ndarray, e: np.ndarray, tid: np.ndarray, names: np.ndarray, launch_s: np.ndarray,
          launch_tid: np.ndarray, max_gap: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Merge calls on the same thread into runs when the next starts within ``max_gap`` of the run's
    end and no kernel launch on that thread lies between them (a launch means the loading ended).
    Each run is labelled with its longest call's name and the number of calls in it."""
    rs, re_, labels = [], [], []
    for t in np.unique(tid):  # loading threads are few
        m = tid == t
        o = np.argsort(s[m], kind="stable")
        ts, te, tn = s[m][o], e[m][o], names[m][o]
        reach = np.maximum.accumulate(te)
        launches = np.sort(launch_s[launch_tid == t])
        new = np.ones(len(ts), dtype=bool)
        if len(ts) > 1:
            close = ts[1:] - reach[:-1] <= max_gap
            quiet = intervals.count_in(reach[:-1], ts[1:], launches) == 0
            new[1:] = ~(close & quiet)
        first = np.flatnonzero(new)
        last = np.append(first[1:] - 1, len(ts) - 1)
        rs.append(ts[first])
        re_.append(reach[last])
        run_of = np.cumsum(new) - 1
        longest = pd.Series(te - ts).groupby(run_of).idxmax().to_numpy()
        labels.append(np.array([f"{tn[i]} ... {n} calls" for i, n in zip(longest, last - first + 1, strict=True)],
                               dtype=object))
    if not rs:
        return s[:0], e[:0], np.zeros(0, dtype=object)
    return np.concatenate(rs), np.concatenate(re_), np.concatenate(labels)


def _capture_spans(tid: np.ndarray, start: np.ndarray, end: np.ndarray, is_begin: np.ndarray,
                   thread_ends: Callable[[], dict[int, tuple[int, int]]]) -> tuple[np.ndarray, np.ndarray]:
    """BeginCapture .. EndCapture per thread (a capture cut by the trace edge runs to that edge), from
    the capture marks in frame order; ``thread_ends()``: each thread's first start and last end (asked
    only when there are marks)."""
    ss, ee = [], []
    if len(tid) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    uniq, first = np.unique(tid, return_index=True)
    for t in uniq[np.argsort(first, kind="stable")].tolist():  # capturing threads are few, in order of appearance
        m = np.flatnonzero(tid == t)
        m = m[np.argsort(start[m], kind="stable")]
        lo, hi = thread_ends()[int(t)]
        open_at = None
        for b, s, e in zip(is_begin[m].tolist(), start[m].tolist(), end[m].tolist(), strict=True):
            if b:
                open_at = s if open_at is None else open_at
            else:
                ss.append(lo if open_at is None else open_at)
                ee.append(e)
                open_at = None
        if open_at is not None:
            ss.append(open_at)
            ee.append(hi)
    return np.asarray(ss, np.int64), np.asarray(ee, np.int64)


def _inside_first_library_op(trace: Trace, c_tid: np.ndarray, c_start: np.ndarray, rank: int) -> np.ndarray:
    """Per call (thread, start): does it start inside the first op (per thread and name) of ``rank``
    that creates a math-library handle (``LIBRARY_OP``)?"""
    v = event_view(trace)
    out = np.zeros(len(c_tid), dtype=bool)
    ops = select(trace, _HOST_OPS, rank, names=(LIBRARY_OP,))
    if len(ops) == 0 or not len(c_tid):
        return out
    ops = ops[np.argsort(v.start[ops], kind="stable")]
    # the first op of each (thread, name): where a code of the pair, numbered in order of first appearance, is new
    t_code, _ = pd.factorize(v.tid[ops])
    pair, _ = pd.factorize(t_code.astype(np.int64) * (len(v.names) + 1) + v.name[ops] + 1)
    top = np.maximum.accumulate(pair)
    first = ops[np.concatenate(([True], top[1:] != top[:-1]))]
    f_tid = v.tid[first].astype(np.int64)
    for tid in pd.unique(f_tid).tolist():  # library-op threads are few
        f = first[f_tid == tid]
        us, ue = intervals.union(v.start[f].astype(np.int64), v.end[f].astype(np.int64))
        m = c_tid == tid
        i = np.searchsorted(us, c_start[m], side="right") - 1
        out[m] = (i >= 0) & (c_start[m] < ue[np.maximum(i, 0)])
    return out


# Host ranges: every host row but runtime/driver calls and Python frames (a row without a category is one).
_RANGES: Spec = tuple((lane, (schema.CAT_RUNTIME, schema.CAT_DRIVER, schema.CAT_PYTHON), True) for lane in HOST_LANES)
_HOST_OPS: Spec = tuple((lane, (schema.CAT_CPU_OP,), False) for lane in HOST_LANES)


@dataclass
class _Spans:
    """One-time intervals in the order they are found (the order decides ties between equal starts)."""

    rank: list[np.ndarray] = field(default_factory=list)
    start: list[np.ndarray] = field(default_factory=list)
    end: list[np.ndarray] = field(default_factory=list)
    kind: list[np.ndarray] = field(default_factory=list)
    label: list[np.ndarray] = field(default_factory=list)

    def add(self, rank: np.ndarray, s: np.ndarray, e: np.ndarray, kind: str, label: np.ndarray) -> None:
        if len(s):
            self.rank.append(np.asarray(rank, np.int64))
            self.start.append(np.asarray(s, np.int64))
            self.end.append(np.asarray(e, np.int64))
            self.kind.append(texts(len(s), kind))
            self.label.append(np.asarray(label, dtype=object))

    def rows(self, v: EventView, rows: np.ndarray, kind: str) -> None:
        self.add(v.rank[rows], v.start[rows], v.end[rows], kind, v.names[v.name[rows]])

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        if not self.start:
            return (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, object),
                    np.zeros(0, object))
        return (np.concatenate(self.rank), np.concatenate(self.start), np.concatenate(self.end),
                np.concatenate(self.kind), np.concatenate(self.label))


def one_time_intervals(trace: Trace | None, steps: pd.DataFrame | None, cfg: Thresholds) -> pd.DataFrame:
    """Every one-time-cost interval of the trace: ``rank, start_ns, end_ns, kind, label``."""
    cols = ["rank", "start_ns", "end_ns", "kind", "label"]
    if trace is None or trace.events.empty:
        return pd.DataFrame(columns=cols)
    spans = _one_time_spans(trace, steps, cfg)
    if not spans.start:
        return pd.DataFrame(columns=cols)
    return pd.DataFrame(dict(zip(cols, spans.arrays(), strict=True)))


def _one_time_spans(trace: Trace, steps: pd.DataFrame | None, cfg: Thresholds) -> _Spans:
    """The intervals of :func:`one_time_intervals`, read from the engine's numpy view of the events."""
    v = event_view(trace)
    out = _Spans()
    # Only the ranges some pattern below names (few): the host ranges are most of a large frame.
    ranges = select(trace, _RANGES, names=(AUTOTUNE_RANGE, COMPILE_RANGE, SETUP_RANGE, LAZY_INIT))

    def hits(rows: np.ndarray, rx: re.Pattern[str]) -> np.ndarray:
        return name_hits(trace, rx)[v.name[rows]]

    autotune = hits(ranges, AUTOTUNE_RANGE)
    out.rows(v, ranges[autotune], "autotune")
    compile_ = ~autotune & hits(ranges, COMPILE_RANGE)
    out.rows(v, ranges[compile_], "compile")
    # Set-up / clean-up ranges: annotations only (a Python frame or op named ``__init__`` is not one).
    setup = ranges[~autotune & ~compile_ & np.isin(v.cat[ranges], [v.cat_codes.get(schema.CAT_USER_ANNOTATION, -99)])
                   & hits(ranges, SETUP_RANGE)]
    if len(setup):
        r_setup = v.rank[setup]
        uniq, first = np.unique(r_setup, return_index=True)
        for rank in uniq[np.argsort(first, kind="stable")].tolist():  # ranks are few, in order of appearance
            rows = setup[r_setup == rank]
            if not allocator_recurs(v.start[rows].astype(np.int64), steps, rank, cfg):
                out.rows(v, rows, "setup-teardown")
    out.rows(v, ranges[hits(ranges, LAZY_INIT)], "lazy-init")

    ends: list[dict[int, tuple[int, int]]] = []

    def thread_ends() -> dict[int, tuple[int, int]]:  # a group-by of every event: only for captures
        if not ends:
            ev = trace.events
            ends.append({int(t): (int(a), int(b)) for t, a, b in
                         ev.groupby("tid", sort=False).agg(a=("start_ns", "min"), b=("end_ns", "max")).itertuples()})
        return ends[0]

    for rank in api_ranks(trace):  # ranks are few, in order of their first call
        calls = api_calls(trace, rank)  # sorted by start; each part below is put back in frame order
        long_here = longer_than(trace, rank, cfg.launch_call_max_ns)

        def part(keep: np.ndarray, calls: Calls = calls) -> np.ndarray:
            """Positions of the calls ``keep`` selects, in frame order."""
            at = np.flatnonzero(keep)
            return at[np.argsort(calls.rows[at], kind="stable")]

        def add(keep: np.ndarray, kind: str, calls: Calls = calls) -> None:
            out.rows(v, calls.rows[part(keep)], kind)

        kernel_launch = matching(trace, calls, KERNEL_LAUNCH)
        # Module loading and driver initialization: runs of calls.
        mod = part(matching(trace, calls, MODULE_LOAD))
        if len(mod):
            s, e, labels = _runs(calls.start[mod], calls.end_of(mod), calls.tid_of(mod), v.names[calls.name[mod]],
                                 calls.start[kernel_launch], calls.tid_of(kernel_launch), cfg.one_time_run_gap_ns)
            out.add(np.full(len(s), rank, np.int64), s, e, "module-load", labels)
        # A function's first attribute / occupancy query or look-up under lazy loading: the module loads inside
        add(long_here & matching(trace, calls, LAZY_LOAD_QUERY), "module-load")
        # Graph capture: Begin..End spans and instantiation.
        is_begin = matching(trace, calls, CAPTURE_BEGIN)
        marks = part(is_begin | matching(trace, calls, CAPTURE_END))
        cs, ce = _capture_spans(calls.tid_of(marks), calls.start[marks], calls.end_of(marks), is_begin[marks], thread_ends)
        if len(cs):
            out.add(np.full(len(cs), rank, np.int64), cs, ce, "graph-capture", np.full(len(cs), "stream capture", dtype=object))
        add(matching(trace, calls, CAPTURE), "graph-capture")
        # Lazy start-up: initialization / handle creation by name, and the long allocator and context
        # calls inside a thread's first library-handle op (its handle is created there).
        alloc_call = matching(trace, calls, DEVICE_ALLOCATOR)
        context_call = matching(trace, calls, CONTEXT_SETUP)
        lazy = matching(trace, calls, LAZY_INIT)
        long_setup = long_here & (alloc_call | context_call)
        if long_setup.any():  # the library ops are searched only for the calls they could make lazy
            at = np.flatnonzero(long_setup)
            lazy[at] |= _inside_first_library_op(trace, calls.tid_of(at), calls.start[at], rank)
        add(lazy, "lazy-init")
        # Long context / stream / pinned-memory setup calls.
        add(long_here & context_call & ~lazy, "context")
        # A kernel's first launch that takes milliseconds: lazy module loading inside the launch.
        launches = part(long_here & kernel_launch)
        if len(launches):
            out.rows(v, calls.rows[launches[_first_launch(v, calls.rows[launches], rank)]], "first-launch")
        # Allocator calls that do not recur every step: growth.
        if alloc_call.any() and not allocator_recurs(calls.start[alloc_call], steps, rank, cfg):
            add(alloc_call & ~lazy, "allocator-growth")
        # Pinned host memory and stream/event teardown: set-up and teardown unless every step does it.
        setup_calls = matching(trace, calls, PINNED_MEMORY, TEARDOWN) & ~lazy
        if setup_calls.any() and not allocator_recurs(calls.start[setup_calls], steps, rank, cfg):
            add(setup_calls, "setup-teardown")
    once = host_stall.stalls(trace, steps, cfg)
    once = once.where(~once.recurs)
    if len(once.start):
        took = [f"{(e - s) / 1e6:.1f} ms" for s, e in zip(once.start.tolist(), once.end.tolist(), strict=True)]
        out.add(once.rank, once.start, once.end, "host-stall",
                np.array([f"{op}: {t} with no child op or CUDA call" for op, t in zip(once.op.tolist(), took, strict=True)],
                         dtype=object))
    return out


def _first_launch(v: EventView, launches: np.ndarray, rank: int) -> np.ndarray:
    """Which of the ``launches`` (event rows) launched the first instance (on this rank) of their kernel's name."""
    gpu = v.rows((schema.LANE_GPU_COMPUTE, schema.LANE_GPU_COMM))
    gpu = gpu[(v.rank[gpu] == rank) & (v.corr[gpu] >= 0)]
    out = np.zeros(len(launches), dtype=bool)
    if len(gpu) == 0:
        return out
    gpu = gpu[np.argsort(v.start[gpu], kind="stable")]
    _, first = np.unique(v.name[gpu], return_index=True)  # the first op of each name (no name: one more)
    corr = v.corr[launches].astype(np.int64)
    out[:] = np.isin(corr, v.corr[gpu[first]].astype(np.int64)) & (corr >= 0)
    return out


def cover(gaps: Frame, steps: pd.DataFrame | None, trace: Trace | None, cfg: Thresholds
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per gap: ``(ns, kind, label, count)``: one-time work covering it (union, ns), the kind that
    covers the most, the longest overlapping interval's name, and how many one-time intervals start in it."""
    n = len(gaps)
    ns = np.zeros(n, dtype=np.int64)
    kind = texts(n)
    label = texts(n)
    count = np.zeros(n, dtype=np.int64)
    if trace is None or trace.events.empty or n == 0:
        return ns, kind, label, count
    iv_rank, iv_s, iv_e, iv_kind, iv_label = _one_time_spans(trace, steps, cfg).arrays()
    if len(iv_s) == 0:
        return ns, kind, label, count
    g_rank = col(gaps, "rank", dtype=np.int64)
    g_dev = col(gaps, "device", dtype=np.int64)
    gs = col(gaps, "start_ns", dtype=np.int64)
    ge = col(gaps, "end_ns", dtype=np.int64)
    for rank in np.unique(iv_rank).tolist():
        sel = np.flatnonzero(g_rank == rank)
        mine = iv_rank == rank
        s, e, r_kind = iv_s[mine], iv_e[mine], iv_kind[mine]
        # intervals overlapping each gap: started before its end, not ended by its start
        count[sel] = count_before(np.sort(s), ge[sel]) - count_at_or_before(np.sort(e), gs[sel])
        sel = sel[count[sel] > 0]  # the rest: no one-time work in the gap (one-time intervals are few)
        if len(sel) == 0:
            continue
        ns[sel] = intervals.overlap_with_union(gs[sel], ge[sel], *intervals.union(s, e))
        best = np.zeros(len(sel), dtype=np.int64)
        for k in KINDS:
            m = r_kind == k
            if m.any():
                ov = intervals.overlap_with_union(gs[sel], ge[sel], *intervals.union(s[m], e[m]))
                take = ov > best
                best[take] = ov[take]
                kind[sel[take]] = k
        names = iv_label[mine]
        for dev in np.unique(g_dev[sel]):
            q = sel[g_dev[sel] == dev]
            q = q[np.argsort(gs[q], kind="stable")]  # a device's gaps are disjoint
            _, idx = intervals.longest_overlap(gs[q], ge[q], s, e)
            label[q[idx >= 0]] = names[idx[idx >= 0]]
    return ns, kind, label, count


def mask(gaps: Frame, ctx: RuleContext, cfg: Thresholds) -> np.ndarray:
    dur = np.maximum(col(gaps, "dur_ns", dtype=np.int64), 1)
    return ctx.judged & ~ctx.queued & (ctx.one_time_ns / dur >= cfg.one_time_cover)


def evidence(gaps: Gaps, ctx: RuleContext, cfg: Thresholds) -> np.ndarray:
    dur = np.maximum(col(gaps, "dur_ns", dtype=np.int64), 1)
    what = np.array([KIND_TEXT.get(k, k) for k in ctx.one_time_kind], dtype=object)
    return cat("one-time cost: ", what, " (", ctx.one_time_label, "; ", fmt_int(ctx.one_time_count),
               " one-time call(s)/range(s) in the gap) covers ", fmt_pct(ctx.one_time_ns / dur), " of the ", fmt_ns(dur),
               " gap; paid once per process, not every step: profile steady-state steps")


# The RuleContext fields this rule reads (in mask, kind, evidence and other rules' helpers it calls).
FACTS = ("judged", "queued", "one_time_ns", "one_time_kind", "one_time_label", "one_time_count")

RULE = Rule(NAME, mask, evidence, lambda gaps, ctx: ctx.one_time_kind.astype(object),
            reads=("one_time_ns", "one_time_kind", "one_time_label", "one_time_count"), facts=FACTS)
