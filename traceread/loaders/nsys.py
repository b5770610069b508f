"""Nsight Systems SQLite export (``nsys export --type sqlite``) -> the normalized events frame.

Produces the same lanes, categories and units as the Kineto loader (schema.EVENT_COLUMNS):

* kernels (``CUPTI_ACTIVITY_KIND_KERNEL``) -> ``gpu_compute`` / ``gpu_comm`` (by kernel name,
  demangled name preferred), ``tid`` = stream, ``pid`` = the owning process;
* runtime/driver calls (``CUPTI_ACTIVITY_KIND_RUNTIME``, ``eventClass`` 0/1 only, ``_vNNNN``
  stripped) -> ``cpu_thread`` with category ``runtime``/``driver``; a kernel and its launch share
  ``correlation`` and ``pid`` (correlation ids repeat across processes, so link on both);
* memcpy/memset -> ``memcpy``/``memset`` lanes named as Kineto names them, side table ``copy_args``;
* synchronization records -> ``gpu_sync``, named from the correlated API call;
* whole-graph executions (``CUPTI_ACTIVITY_KIND_GRAPH_TRACE``) -> ``gpu_compute``, category
  ``cuda_graph``, name ``CUDA graph <graphId>``;
* OS runtime calls -> ``cpu_thread``/``os_runtime``;
* NVTX: PyTorch emit_nvtx op ranges (``aten::mm, seq = 4, op_id = 9``) -> ``cpu_thread``/``cpu_op``
  named without the suffix; other ranges -> ``cpu_annotation``/``user_annotation``; marks -> ``instant``.

Each process with events is a rank, in process order (by the first CUDA device it used, then pid).
Times are the export's int64 session ns; time base ``epoch`` with ``epoch_offset_ns`` =
``TARGET_INFO_SESSION_START_TIME.utcEpochNs`` when present, else ``session``. Rows are grouped by
source table, each group in the export's row order (nsys writes them in time order). The file is opened read-only and nothing is written beside it.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import pandas as pd

from traceread import schema as S
from traceread.errors import TraceReadError
from traceread.loaders import _nsys_blocks as B
from traceread.loaders._nsys_read import Export, gpu_rows, open_export
from traceread.trace import DeviceInfo, RankInfo, Trace, TraceMeta

_STEP = re.compile(r"^ProfilerStep#(\d+)$")
# Lanes whose rows say a process ran work on a device (sync records can name another device).
_WORK_LANES = (S.LANE_GPU_COMPUTE, S.LANE_GPU_COMM, S.LANE_MEMCPY, S.LANE_MEMSET)
_WORK_CODES = [S.LANES.index(lane) for lane in _WORK_LANES]
_DEV_SPAN = 1 << 16  # device ids below this pack with the pid into one hash key


def load_nsys(path: str | os.PathLike[str], progress: bool = False, step_range: str | None = None) -> Trace:
    """Load an nsys SQLite export (or a ``.nsys-rep``, exported first with ``nsys`` if on PATH).

    ``step_range`` names an NVTX range (``NAME`` or ``NAME#<n>``) to use as steps instead of
    ``ProfilerStep#N``. Raises TraceReadError (one line naming the file) on unreadable input.
    """
    path = os.fspath(path)
    if path.endswith((".nsys-rep", ".qdrep")):
        return _load_report(path, progress, step_range)
    ex = open_export(path)
    try:
        return _load(ex, path, progress, step_range)
    finally:
        ex.conn.close()


def _load_report(path: str, progress: bool, step_range: str | None) -> Trace:
    stem = os.path.splitext(path)[0]
    hint = f"nsys export --type sqlite -o {shlex.quote(stem + '.sqlite')} {shlex.quote(path)}"
    nsys = shutil.which("nsys")
    if nsys is None:
        raise TraceReadError(path, f"is an Nsight Systems report and no 'nsys' is on PATH; run: {hint}")
    with tempfile.TemporaryDirectory(prefix="traceread-nsys-") as tmp:
        out = os.path.join(tmp, "export.sqlite")
        proc = subprocess.run([nsys, "export", "--type", "sqlite", "-o", out, path],
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0 or not os.path.exists(out):
            last = (proc.stderr or proc.stdout or "").strip().splitlines()
            why = last[-1] if last else f"exit code {proc.returncode}"
            raise TraceReadError(path, f"'nsys export' failed ({why}); try: {hint}")
        ex = open_export(out)
        try:
            return _load(ex, path, progress, step_range)
        finally:
            ex.conn.close()


def _say(progress: bool, msg: str) -> None:
    # Progress lines only on a terminal: piped or captured output stays quiet.
    if progress and sys.stderr.isatty():
        print(f"traceread: {msg}", file=sys.stderr, flush=True)


def _load(ex: Export, path: str, progress: bool, step_range: str | None) -> Trace:
    _say(progress, f"reading {path}")
    rt = B.runtime(ex)
    read = (B.kernels(ex), rt, B.syncs(ex, rt), *B.copies(ex), B.graphs(ex), B.osrt(ex), B.nvtx(ex))
    blocks: list[B.Block | None] = [b for b in read if b is not None and len(b)]
    for b in blocks:
        _say(progress, f"{b.raw}: {len(b):,} rows")
    used = _used_pairs(blocks)
    ranks, pid_rank = _ranks(blocks, used)
    events, side = _assemble(path, blocks, pid_rank)
    meta = _meta(ex, path, events, ranks, used, step_range)
    return Trace(events=events, meta=meta, side=side)


def _used_pairs(blocks: list[B.Block]) -> set[tuple[int, int]]:
    """(pid, device) pairs with GPU work, by hashing (no sort over the 10M-row columns)."""
    keys = [pd.unique(b.pid[m] * _DEV_SPAN + b.device[m]) for b in blocks
            if (m := np.isin(b.lane, _WORK_CODES) & (b.pid >= 0) & (b.device >= 0) & (b.device < _DEV_SPAN)).any()]
    uniq = pd.unique(np.concatenate(keys)) if keys else np.zeros(0, dtype=np.int64)
    return {(int(k // _DEV_SPAN), int(k % _DEV_SPAN)) for k in uniq}


def _ranks(blocks: list[B.Block], used: set[tuple[int, int]]) -> tuple[list[RankInfo], dict[int, int]]:
    """One rank per process with events: ordered by the first CUDA device it used, then pid."""
    pids = set()
    for b in blocks:
        pids.update(int(p) for p in pd.unique(b.pid) if p >= 0)
    first_dev: dict[int, int] = {}
    for p, d in used:
        first_dev[p] = min(first_dev.get(p, d), d)
    big = np.iinfo(np.int64).max
    order = sorted(pids, key=lambda p: (first_dev.get(p, big), p))
    ranks = [RankInfo(rank=i, rank_source="process order", world_size=None, world_size_source="unknown", pid=p)
             for i, p in enumerate(order)]
    return ranks, {p: i for i, p in enumerate(order)}


def _assemble(path: str, blocks: list[B.Block | None], pid_rank: dict[int, int]) -> tuple[
        pd.DataFrame, dict[str, pd.DataFrame]]:
    """Concatenate the blocks into the events frame and side tables.

    Output columns are allocated once and filled block by block; each block is released (its
    list slot set to None) as soon as it is copied, so peak memory stays near the final frame.
    """
    if not blocks:
        ev = S.empty_events()
        ev["trace"] = pd.Categorical([], categories=[path])
        return ev, {}
    sizes = [len(b) for b in blocks]
    offsets = np.cumsum([0, *sizes])
    n = int(offsets[-1])
    # Names: each block's distinct names, offset into one list, then deduplicated across blocks.
    name_off = np.cumsum([0] + [len(b.names) for b in blocks])
    ucode, uniq = pd.factorize(np.concatenate([b.names for b in blocks]).astype(object))
    raws = list(dict.fromkeys(b.raw for b in blocks))
    keys = np.array(sorted(pid_rank), dtype=np.int64)
    vals = np.array([pid_rank[int(k)] for k in keys] + [0], dtype=np.int32)  # unknown pid -> rank 0
    out = {c: np.empty(n, dtype=d) for c, d in (
        ("rank", np.int32), ("lane", np.int8), ("device", np.int32), ("stream", np.int64), ("pid", np.int64),
        ("tid", np.int64), ("name", np.int64), ("category", np.int8), ("raw", np.int16), ("start_ns", np.int64),
        ("end_ns", np.int64), ("correlation", np.int64))}
    side_parts: dict[str, list[dict[str, np.ndarray]]] = {}
    for i in range(len(blocks)):
        b, lo, hi = blocks[i], offsets[i], offsets[i + 1]
        pos = np.searchsorted(keys, b.pid)
        known = (pos < len(keys)) & (keys[np.minimum(pos, max(len(keys) - 1, 0))] == b.pid) if len(keys) else \
            np.zeros(len(b), dtype=bool)
        out["rank"][lo:hi] = vals[np.where(known, pos, len(keys))]
        for col, src in (("lane", b.lane), ("device", b.device), ("stream", b.stream), ("pid", b.pid),
                         ("tid", b.tid), ("category", b.category), ("start_ns", b.start), ("end_ns", b.end),
                         ("correlation", b.correlation)):
            out[col][lo:hi] = src
        out["name"][lo:hi] = ucode[b.name_code + name_off[i]]
        out["raw"][lo:hi] = raws.index(b.raw)
        for table, cols in b.side.items():
            side_parts.setdefault(table, []).append({"row": np.arange(lo, hi, dtype=np.int64), **cols})
        blocks[i] = None  # release the block's arrays
    ev = pd.DataFrame({
        "trace": pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), categories=[path]),
        "rank": out["rank"],
        "lane": pd.Categorical.from_codes(out["lane"], categories=list(S.LANES)),
        "device": out["device"], "stream": out["stream"], "pid": out["pid"], "tid": out["tid"],
        "name": pd.Categorical.from_codes(out["name"], categories=pd.Index(uniq, dtype=object)),
        "category": pd.Categorical.from_codes(out["category"], categories=list(S.CATEGORIES)),
        "raw_category": pd.Categorical.from_codes(out["raw"], categories=raws),
        "start_ns": out["start_ns"], "end_ns": out["end_ns"], "correlation": out["correlation"],
        "external_id": np.full(n, S.NO_ID, dtype=np.int64),
    }, copy=False)  # columns are fresh arrays: skip pandas' consolidating copy
    side: dict[str, pd.DataFrame] = {}
    for table, parts in side_parts.items():
        spec = S.SIDE_TABLES[table]
        cols = {c: np.concatenate([p[c] for p in parts]) for c in spec}
        side_parts[table] = []
        df = pd.DataFrame(cols, copy=False)
        side[table] = df.astype({c: d for c, (d, _) in spec.items() if d == "category"})
    return ev, side


def _meta(ex: Export, path: str, events: pd.DataFrame, ranks: list[RankInfo], used: set[tuple[int, int]],
          step_range: str | None) -> TraceMeta:
    md = ex.meta_rows()
    product = md.get("EXPORT_PRODUCT_VERSION", "")
    version = md.get("EXPORT_SCHEMA_VERSION", "")
    generation = f"nsys {product} (export schema {version})" if md else "nsys 2021-era (no export metadata)"
    warnings: list[str] = []
    epoch = None
    if ex.has("TARGET_INFO_SESSION_START_TIME", "utcEpochNs"):
        row = ex.conn.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME LIMIT 1").fetchone()
        epoch = int(row[0]) if row and row[0] is not None else None
    shift = md.get("EXPORT_PARAM_TIME_SHIFT", "0") or "0"
    if md.get("EXPORT_PARAM_TIME_NORMALIZE", "false") == "true" or shift not in ("0", ""):
        warnings.append("export was written with a time normalize/shift option; times are as exported")
    captured = sorted(t for t in ex.columns if t.startswith(("CUPTI_ACTIVITY_KIND_", "NVTX_EVENTS", "OSRT_API"))
                      and not t.startswith("__"))
    meta = TraceMeta(
        path=path, format="nsys", generation=generation,
        time_base=S.TIME_EPOCH if epoch is not None else S.TIME_SESSION, epoch_offset_ns=epoch,
        devices=_devices(ex, ranks, used), ranks=ranks, warnings=warnings,
        extra={"export_schema_version": version, "product_version": product, "tables": captured},
    )
    meta.profiler_options = {"nvtx": ex.has("NVTX_EVENTS"), "osrt": ex.has("OSRT_API"),
                             "cuda": ex.has("CUPTI_ACTIVITY_KIND_RUNTIME") or ex.has("CUPTI_ACTIVITY_KIND_KERNEL")}
    meta.steps = _steps(events, step_range, warnings)
    return meta


def _devices(ex: Export, ranks: list[RankInfo], used: set[tuple[int, int]]) -> list[DeviceInfo]:
    """Devices per rank: those it ran GPU work on (used) plus those listed for its pid."""
    rows, cuda_map = gpu_rows(ex)
    by_gpu = {r.gpu_id: r for r in rows if r.pid is None}
    by_cuda = {r.cuda_id: r for r in rows if r.pid is None}
    per_pid = {(r.pid, r.cuda_id): r for r in rows if r.pid is not None}
    out: list[DeviceInfo] = []
    for rk in ranks:
        listed = {cuda for (p, cuda) in cuda_map if p == rk.pid} | {c for (p, c) in per_pid if p == rk.pid}
        for dev in sorted({d for (p, d) in used if p == rk.pid} | listed):
            info = per_pid.get((rk.pid, dev))
            if info is None and (rk.pid, dev) in cuda_map:
                info = by_gpu.get(cuda_map[(rk.pid, dev)])
            if info is None:
                info = by_cuda.get(dev)
            out.append(DeviceInfo(rank=rk.rank, id=int(dev), name=info.name if info else "",
                                  sm_count=int(info.sm_count) if info and info.sm_count else None,
                                  memory_bytes=int(info.memory_bytes) if info and info.memory_bytes else None,
                                  compute_capability=info.cc if info else None, used=(rk.pid, dev) in used))
    return out


def _steps(events: pd.DataFrame, step_range: str | None, warnings: list[str]) -> pd.DataFrame | None:
    """Host step ranges: rank, step, name, start_ns, end_ns (ProfilerStep#N, or the ``step_range`` NVTX name)."""
    ann = events[events["lane"].isin([S.LANE_CPU_ANNOTATION, S.LANE_CPU_THREAD])]
    names = pd.Series(ann["name"].cat.categories)
    if step_range:
        pat = re.compile(rf"^{re.escape(step_range)}(?:[#_ ]?(\d+))?$")
    else:
        pat = _STEP
    hits = {i: pat.match(str(nm)) for i, nm in names.items()}
    hits = {i: m for i, m in hits.items() if m}
    if not hits:
        if step_range:
            warnings.append(f"no NVTX range named {step_range!r}; steps will be inferred")
        return None
    code = ann["name"].cat.codes.to_numpy()
    sel = ann[np.isin(code, list(hits))]
    number = np.array([int(hits[c].group(1)) if hits[c].group(1) else -1 for c in range(len(names))
                       if c in hits], dtype=np.int64)
    lookup = np.full(len(names), -1, dtype=np.int64)
    lookup[list(hits)] = number
    df = pd.DataFrame({"rank": sel["rank"].to_numpy(), "step": lookup[sel["name"].cat.codes.to_numpy()],
                       "name": sel["name"].astype(str).to_numpy(), "start_ns": sel["start_ns"].to_numpy(),
                       "end_ns": sel["end_ns"].to_numpy()}).sort_values(["rank", "start_ns"], kind="stable")
    if (df["step"] < 0).any():  # some ranges carry no number: number all in time order per rank
        df["step"] = df.groupby("rank").cumcount().to_numpy().astype(np.int64)
    return df.reset_index(drop=True)
