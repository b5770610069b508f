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
  loading);
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
  ``allocator`` evidence.

The fix is not in the code but in the measurement: profile steady-state steps (a ``torch.profiler``
schedule with warmup steps, or ``nsys --capture-range``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd

from traceread import intervals, schema
from traceread.config import Thresholds
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
    LIBRARY_OP,
    MODULE_LOAD,
    PINNED_MEMORY,
    SETUP_RANGE,
    TEARDOWN,
    calls_matching,
)
from traceread.lanes import HOST_LANES, EventView, event_view
from traceread.rules._base import (
    Rows,
    Rule,
    RuleContext,
    api_calls,
    cat,
    col,
    fmt_int,
    fmt_ns,
    fmt_pct,
)
from traceread.trace import Trace

NAME = "one-time-cost"
KINDS: tuple[str, ...] = ("compile", "autotune", "graph-capture", "module-load", "first-launch", "lazy-init",
                          "context", "setup-teardown", "allocator-growth")
KIND_TEXT: dict[str, str] = {
    "compile": "JIT compilation", "autotune": "autotuning", "graph-capture": "CUDA-graph capture",
    "module-load": "module loading / driver initialization", "first-launch": "a first kernel launch (lazy module load)",
    "context": "context / stream setup", "allocator-growth": "allocator growth",
    "lazy-init": "CUDA / cuDNN / cuBLAS lazy start-up (context init, first library handle)",
    "setup-teardown": "set-up / teardown (pinned memory, stream teardown, init / clean-up ranges)",
}

def _step_windows(steps: pd.DataFrame | None, rank: int) -> tuple[np.ndarray, np.ndarray]:
    """One window per step number of ``rank`` (its devices' steps merged), sorted."""
    if steps is None or steps.empty:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    s = steps[steps["rank"] == rank].groupby("step", sort=True).agg(start_ns=("start_ns", "min"),
                                                                      end_ns=("end_ns", "max"))
    return s["start_ns"].to_numpy(np.int64), s["end_ns"].to_numpy(np.int64)


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


def _capture_spans(calls: pd.DataFrame, thread_ends: Callable[[], dict[int, tuple[int, int]]]
                   ) -> tuple[np.ndarray, np.ndarray]:
    """BeginCapture .. EndCapture per thread (a capture cut by the trace edge runs to that edge);
    ``thread_ends()``: each thread's first start and last end (asked only when there are marks)."""
    ss, ee = [], []
    begin = calls_matching(calls["name"], CAPTURE_BEGIN)
    end = calls_matching(calls["name"], CAPTURE_END)
    marks = calls[begin | end]
    if marks.empty:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    for tid, m in marks.groupby("tid", sort=False):  # capturing threads are few
        m = m.sort_values("start_ns", kind="stable")
        is_begin = calls_matching(m["name"], CAPTURE_BEGIN)
        lo, hi = thread_ends()[int(tid)]
        open_at = None
        for b, s, e in zip(is_begin, m["start_ns"].to_numpy(np.int64), m["end_ns"].to_numpy(np.int64), strict=True):
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


def _inside_first_library_op(v: EventView, calls: pd.DataFrame, rank: int) -> np.ndarray:
    """Per call: does it start inside the first op (per thread and name) of ``rank`` that creates a
    math-library handle (``LIBRARY_OP``)?"""
    out = np.zeros(len(calls), dtype=bool)
    ops = v.rows(HOST_LANES, (schema.CAT_CPU_OP,), rank=rank)
    ops = ops[v.matching(ops, LIBRARY_OP)]
    if len(ops) == 0 or not len(calls):
        return out
    ops = ops[np.argsort(v.start[ops], kind="stable")]
    first = ops[~pd.DataFrame({"tid": v.tid[ops], "name": v.name[ops]}).duplicated().to_numpy()]
    c_tid, c_start = calls["tid"].to_numpy(np.int64), calls["start_ns"].to_numpy(np.int64)
    f_tid = v.tid[first].astype(np.int64)
    for tid in pd.unique(f_tid).tolist():  # library-op threads are few
        f = first[f_tid == tid]
        us, ue = intervals.union(v.start[f].astype(np.int64), v.end[f].astype(np.int64))
        m = c_tid == tid
        i = np.searchsorted(us, c_start[m], side="right") - 1
        out[m] = (i >= 0) & (c_start[m] < ue[np.maximum(i, 0)])
    return out


def one_time_intervals(trace: Trace | None, steps: pd.DataFrame | None, cfg: Thresholds) -> pd.DataFrame:
    """Every one-time-cost interval of the trace: ``rank, start_ns, end_ns, kind, label``."""
    cols = ["rank", "start_ns", "end_ns", "kind", "label"]
    if trace is None or trace.events.empty:
        return pd.DataFrame(columns=cols)
    ev = trace.events
    parts: list[pd.DataFrame] = []

    def add(rows: pd.DataFrame, kind: str) -> None:
        add_spans(rows["rank"].to_numpy(np.int64), rows["start_ns"].to_numpy(np.int64),
                  rows["end_ns"].to_numpy(np.int64), kind, rows["name"].astype(str).to_numpy())

    def add_spans(rank: np.ndarray, s: np.ndarray, e: np.ndarray, kind: str, label: np.ndarray) -> None:
        if len(s):
            parts.append(pd.DataFrame({"rank": rank, "start_ns": s, "end_ns": e, "kind": kind, "label": label}))

    # Host ranges (every host row but runtime/driver calls and Python frames), selected from the
    # events in one step: the host rows alone are most of a large frame (a copy of every column).
    ranges = ev[(ev["lane"].isin(HOST_LANES) & ~ev["category"].isin([schema.CAT_RUNTIME, schema.CAT_DRIVER,
                                                                      schema.CAT_PYTHON])).to_numpy()]
    autotune = calls_matching(ranges["name"], AUTOTUNE_RANGE)
    add(ranges[autotune], "autotune")
    compile_ = ~autotune & calls_matching(ranges["name"], COMPILE_RANGE)
    add(ranges[compile_], "compile")
    # Set-up / clean-up ranges: annotations only (a Python frame or op named ``__init__`` is not one).
    setup = ranges[~autotune & ~compile_ & (ranges["category"] == schema.CAT_USER_ANNOTATION).to_numpy()
                   & calls_matching(ranges["name"], SETUP_RANGE)]
    for _, r_setup in setup.groupby("rank", observed=True, sort=False):  # ranks are few
        rank = int(r_setup["rank"].iloc[0])
        if not allocator_recurs(r_setup["start_ns"].to_numpy(np.int64), steps, rank, cfg):
            add(r_setup, "setup-teardown")
    add(ranges[calls_matching(ranges["name"], LAZY_INIT)], "lazy-init")

    api = api_calls(ev)
    if api.empty:
        return pd.concat(parts, ignore_index=True)[cols] if parts else pd.DataFrame(columns=cols)
    dur = (api["end_ns"] - api["start_ns"]).to_numpy(np.int64)
    long_call = dur > cfg.launch_call_max_ns
    ends: list[dict[int, tuple[int, int]]] = []

    def thread_ends() -> dict[int, tuple[int, int]]:  # a group-by of every event: only for captures
        if not ends:
            ends.append({int(t): (int(a), int(b)) for t, a, b in
                         ev.groupby("tid", sort=False).agg(a=("start_ns", "min"), b=("end_ns", "max")).itertuples()})
        return ends[0]

    for _, calls in api.groupby("rank", observed=True, sort=False):  # ranks are few
        rank = int(calls["rank"].iloc[0])  # the group's key, typed
        sel = (api["rank"] == rank).to_numpy()
        long_here = long_call[sel]
        # Module loading and driver initialization: runs of calls.
        mod = calls[calls_matching(calls["name"], MODULE_LOAD)]
        if len(mod):
            launch = calls[calls_matching(calls["name"], KERNEL_LAUNCH)]
            s, e, labels = _runs(mod["start_ns"].to_numpy(np.int64), mod["end_ns"].to_numpy(np.int64),
                                 mod["tid"].to_numpy(np.int64), mod["name"].astype(str).to_numpy(),
                                 launch["start_ns"].to_numpy(np.int64), launch["tid"].to_numpy(np.int64),
                                 cfg.one_time_run_gap_ns)
            add_spans(np.full(len(s), int(rank), np.int64), s, e, "module-load", labels)
        # Graph capture: Begin..End spans and instantiation.
        cs, ce = _capture_spans(calls, thread_ends)
        if len(cs):
            add_spans(np.full(len(cs), int(rank), np.int64), cs, ce, "graph-capture",
                      np.full(len(cs), "stream capture", dtype=object))
        add(calls[calls_matching(calls["name"], CAPTURE)], "graph-capture")
        # Lazy start-up: initialization / handle creation by name, and the long allocator and context
        # calls inside a thread's first library-handle op (its handle is created there).
        alloc_call = calls_matching(calls["name"], DEVICE_ALLOCATOR)
        context_call = calls_matching(calls["name"], CONTEXT_SETUP)
        lazy = calls_matching(calls["name"], LAZY_INIT)
        long_setup = long_here & (alloc_call | context_call)
        if long_setup.any():  # the library ops are searched only for the calls they could make lazy
            lazy |= long_setup & _inside_first_library_op(event_view(trace), calls, rank)
        add(calls[lazy], "lazy-init")
        # Long context / stream / pinned-memory setup calls.
        add(calls[long_here & context_call & ~lazy], "context")
        # A kernel's first launch that takes milliseconds: lazy module loading inside the launch.
        launches = calls[long_here & calls_matching(calls["name"], KERNEL_LAUNCH)]
        if len(launches):
            add(launches[_first_launch(ev, launches, int(rank))], "first-launch")
        # Allocator calls that do not recur every step: growth.
        alloc = calls[alloc_call]
        if len(alloc) and not allocator_recurs(alloc["start_ns"].to_numpy(np.int64), steps, int(rank), cfg):
            add(calls[alloc_call & ~lazy], "allocator-growth")
        # Pinned host memory and stream/event teardown: set-up and teardown unless every step does it.
        setup_calls = calls[(calls_matching(calls["name"], PINNED_MEMORY) | calls_matching(calls["name"], TEARDOWN))
                            & ~lazy]
        if len(setup_calls) and not allocator_recurs(setup_calls["start_ns"].to_numpy(np.int64), steps, int(rank), cfg):
            add(setup_calls, "setup-teardown")
    return pd.concat(parts, ignore_index=True)[cols] if parts else pd.DataFrame(columns=cols)


def _first_launch(ev: pd.DataFrame, launches: pd.DataFrame, rank: int) -> np.ndarray:
    """Which of ``launches`` launched the first instance (on this rank) of their kernel's name."""
    gpu = ev[(ev["rank"] == rank) & ev["lane"].isin([schema.LANE_GPU_COMPUTE, schema.LANE_GPU_COMM])
             & (ev["correlation"] >= 0)]
    out = np.zeros(len(launches), dtype=bool)
    if gpu.empty:
        return out
    first = gpu.sort_values("start_ns", kind="stable").drop_duplicates("name")
    out[:] = np.isin(launches["correlation"].to_numpy(np.int64), first["correlation"].to_numpy(np.int64)) \
        & (launches["correlation"].to_numpy(np.int64) >= 0)
    return out


def cover(gaps: pd.DataFrame, steps: pd.DataFrame | None, trace: Trace | None, cfg: Thresholds
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per gap: ``(ns, kind, label, count)``: one-time work covering it (union, ns), the kind that
    covers the most, the longest overlapping interval's name, and how many one-time intervals start in it."""
    n = len(gaps)
    ns = np.zeros(n, dtype=np.int64)
    kind = np.full(n, "", dtype=object)
    label = np.full(n, "", dtype=object)
    count = np.zeros(n, dtype=np.int64)
    iv = one_time_intervals(trace, steps, cfg) if n else pd.DataFrame()
    if iv.empty:
        return ns, kind, label, count
    g_rank = col(gaps, "rank", dtype=np.int64)
    g_dev = col(gaps, "device", dtype=np.int64)
    gs = col(gaps, "start_ns", dtype=np.int64)
    ge = col(gaps, "end_ns", dtype=np.int64)
    for rank, r_iv in iv.groupby("rank", sort=False):
        sel = np.flatnonzero(g_rank == rank)
        if len(sel) == 0:
            continue
        s, e = r_iv["start_ns"].to_numpy(np.int64), r_iv["end_ns"].to_numpy(np.int64)
        ns[sel] = intervals.overlap_with_union(gs[sel], ge[sel], *intervals.union(s, e))
        best = np.zeros(len(sel), dtype=np.int64)
        for k in KINDS:
            m = (r_iv["kind"] == k).to_numpy()
            if m.any():
                ov = intervals.overlap_with_union(gs[sel], ge[sel], *intervals.union(s[m], e[m]))
                take = ov > best
                best[take] = ov[take]
                kind[sel[take]] = k
        names = r_iv["label"].to_numpy(dtype=object)
        for dev in np.unique(g_dev[sel]):
            q = sel[g_dev[sel] == dev]
            q = q[np.argsort(gs[q], kind="stable")]  # a device's gaps are disjoint
            _, idx = intervals.longest_overlap(gs[q], ge[q], s, e)
            label[q[idx >= 0]] = names[idx[idx >= 0]]
            # intervals overlapping each gap: started before its end, not ended by its start
            count[q] = np.searchsorted(np.sort(s), ge[q], side="left") - np.searchsorted(np.sort(e), gs[q], side="right")
    return ns, kind, label, count


def mask(gaps: pd.DataFrame, ctx: RuleContext, cfg: Thresholds) -> np.ndarray:
    dur = np.maximum(col(gaps, "dur_ns", dtype=np.int64), 1)
    return ctx.judged & ~ctx.queued & (ctx.one_time_ns / dur >= cfg.one_time_cover)


def evidence(gaps: pd.DataFrame | Rows, ctx: RuleContext, cfg: Thresholds) -> np.ndarray:
    dur = np.maximum(col(gaps, "dur_ns", dtype=np.int64), 1)
    what = np.array([KIND_TEXT.get(k, k) for k in ctx.one_time_kind], dtype=object)
    return cat("one-time cost: ", what, " (", ctx.one_time_label, "; ", fmt_int(ctx.one_time_count),
               " one-time call(s)/range(s) in the gap) covers ", fmt_pct(ctx.one_time_ns / dur), " of the ", fmt_ns(dur),
               " gap; paid once per process, not every step: profile steady-state steps")


RULE = Rule(NAME, mask, evidence, lambda gaps, ctx: ctx.one_time_kind.astype(object),
            reads=("one_time_ns", "one_time_kind", "one_time_label", "one_time_count"))
