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

The pipeline, one module per stage: ``read`` (the export opened read-only, tables read in row
chunks by reader threads) -> ``blocks`` (each activity table as the frame's columns) -> ``frame``
(the blocks written into one preallocated frame, ranks and side tables).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Callable

import numpy as np
import pandas as pd

import traceread.loaders.nsys.blocks as B
from traceread import schema as S
from traceread.errors import TraceReadError
from traceread.limits import EPOCH_NS_MAX, int_text
from traceread.loaders.nsys.frame import FrameWriter
from traceread.loaders.nsys.read import Export, GpuRow, gpu_rows, nvtx_table, one_line, open_export
from traceread.loaders.nsys.samples import TABLE as SAMPLES
from traceread.loaders.nsys.samples import cpu_samples
from traceread.loaders.parallel import SERIAL, Parallel
from traceread.note import (
    EPOCH_OUT_OF_RANGE,
    NO_NVTX_RANGE_NAMED,
    ODD_DEVICE_IDS,
    STEP_NUMBER_PAST_INT64,
    TIME_SHIFTED_EXPORT,
    Note,
)
from traceread.trace import DeviceInfo, RankInfo, SideTables, Trace, TraceMeta

_STEP = re.compile(r"^ProfilerStep#(\d+)$")


def load_nsys(path: str | os.PathLike[str], progress: bool = False, step_range: str | None = None,
              parallel: Parallel = SERIAL) -> Trace:
    """Load an nsys SQLite export (or a ``.nsys-rep``, exported first with ``nsys`` if on PATH).

    ``step_range`` names an NVTX range (``NAME`` or ``NAME#<n>``) to use as steps instead of
    ``ProfilerStep#N``. Raises TraceReadError (one line naming the file) on unreadable input.
    Big tables are read by ``parallel``'s reader threads (the default: serially).
    """
    path = os.fspath(path)
    if path.endswith((".nsys-rep", ".qdrep")):
        return _load_report(path, progress, step_range, parallel)
    before = _stamp(path)
    ex = open_export(path, parallel)
    try:
        trace = load_export(ex, path, progress, step_range)
    finally:
        ex.close()
    if _stamp(path) != before:  # read in place without locks (immutable): a rewrite mid-read tears the counts
        raise TraceReadError(path, "changed while it was being read (written by another process?); read it again "
                                   "once it is complete")
    return trace


def _load_report(path: str, progress: bool, step_range: str | None, parallel: Parallel) -> Trace:
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
        ex = open_export(out, parallel)
        try:
            # The export is deleted with the folder: nothing can be read from it later.
            return load_export(ex, path, progress, step_range, lazy_args=False)
        finally:
            ex.close()


def _say(progress: bool, msg: str) -> None:
    # Progress lines only on a terminal: piped or captured output stays quiet.
    if progress and sys.stderr.isatty():
        print(f"traceread: {msg}", file=sys.stderr, flush=True)


def load_export(ex: Export, path: str, progress: bool, step_range: str | None, lazy_args: bool = True) -> Trace:
    """Read the open export ``ex`` (of the file ``path``) into a Trace; ``lazy_args=False`` reads the
    kernels' launch configuration now instead of on first use."""
    _say(progress, f"reading {path}")
    k_bound, rt_bound = ex.row_bound(B.K + "KERNEL"), ex.row_bound(B.K + "RUNTIME")
    bound = k_bound + rt_bound + sum(ex.row_bound(t) for t in (
        B.K + "SYNCHRONIZATION", B.K + "MEMCPY", B.K + "MEMSET", B.K + "GRAPH_TRACE", "OSRT_API")) + \
        (ex.row_bound(nvtx_table(ex)) if ex.has("NVTX_EVENTS") else 0)
    out = FrameWriter(bound)
    # Frame order: kernels, runtime calls, syncs (named from their runtime call), copies, graphs,
    # OS runtime, NVTX. Each table is read and copied in before the next one is read. The kernels'
    # launch configuration (side table kernel_args, 8 int64 per kernel) is read when first used.
    spans = [(B.K + "KERNEL", out.add(B.kernels(ex, with_args=not lazy_args), k_bound))]
    rt = out.add(B.runtime(ex), rt_bound)
    spans.append((B.K + "RUNTIME", rt))
    spans.append((B.K + "SYNCHRONIZATION", out.add(B.whole(B.syncs(ex, out.runtime_rows(*rt))))))
    for block in B.copies(ex):
        spans.append((block.raw, out.add(B.whole(block))))
    for raw, read in ((B.K + "GRAPH_TRACE", B.graphs), ("OSRT_API", B.osrt), (nvtx_table(ex), B.nvtx)):
        spans.append((raw, out.add(B.whole(read(ex)))))
    for raw, (lo, hi) in spans:
        if hi > lo:
            _say(progress, f"{raw}: {hi - lo:,} rows")
    used = out.used_pairs()
    ranks, pid_rank = _ranks(out.pids, used)
    events, side = out.finish(path, pid_rank)
    samples = _samples(ex, pid_rank)
    if samples is not None:
        side[SAMPLES] = samples
    n_kernels = spans[0][1][1]
    pending: dict[str, Callable[[], pd.DataFrame]] = \
        {"kernel_args": _KernelArgs(ex.path, n_kernels, ex.parallel)} if lazy_args and n_kernels else {}
    meta = _meta(ex, path, events, ranks, used, step_range)
    if out.odd_devices:
        meta.warnings.append(Note.of(ODD_DEVICE_IDS, count=out.odd_devices, label=B.DEVICE_LABEL))
    # kernel_args keeps its place (first: the kernels are the first rows) while it is pending.
    return Trace(events=events, meta=meta, side=SideTables({**{k: None for k in pending}, **side}, pending))


def _samples(ex: Export, pid_rank: dict[int, int]) -> pd.DataFrame | None:
    """The CPU samples (``samples.cpu_samples``); an export whose sampling tables cannot be read has none (they
    add evidence, nothing reads them to place the events)."""
    try:
        return cpu_samples(ex, pid_rank)
    except (sqlite3.Error, ValueError, TypeError, OverflowError):
        return None


class _KernelArgs:
    """Reads the kernel_args side table from the export when first asked for (picklable)."""

    def __init__(self, path: str, rows: int, parallel: Parallel = SERIAL) -> None:
        self.path, self.rows, self.stamp, self.parallel = path, rows, _stamp(path), parallel

    def __call__(self) -> pd.DataFrame:
        if _stamp(self.path) != self.stamp:
            raise TraceReadError(self.path, "changed since it was loaded; load it again to read kernel launch "
                                            "configurations")
        ex = open_export(self.path, self.parallel)
        try:
            return B.kernel_args(ex, self.rows)
        except (ValueError, TypeError, OverflowError) as exc:
            # SQLite columns are dynamically typed: text where the export has integers.
            raise TraceReadError(self.path, f"the kernel table holds values of the wrong type ({exc})") from None
        except sqlite3.Error as exc:
            raise TraceReadError(self.path, f"not a readable Nsight Systems export ({one_line(exc)})") from None
        finally:
            ex.close()


def _stamp(path: str) -> tuple[tuple[int, int, int] | None, ...]:
    """Size, mtime and inode of the export and of a -wal or -journal beside it (None: absent)."""
    out: list[tuple[int, int, int] | None] = []
    for sfx in ("", "-wal", "-journal"):
        try:
            st = os.stat(path + sfx)
        except OSError:
            out.append(None)
            continue
        out.append((st.st_size, st.st_mtime_ns, st.st_ino))
    return tuple(out)


def _ranks(pids: set[int], used: set[tuple[int, int]]) -> tuple[list[RankInfo], dict[int, int]]:
    """One rank per process with events: ordered by the first CUDA device it used, then pid."""
    first_dev: dict[int, int] = {}
    for p, d in used:
        first_dev[p] = min(first_dev.get(p, d), d)
    big = np.iinfo(np.int64).max
    order = sorted(pids, key=lambda p: (first_dev.get(p, big), p))
    ranks = [RankInfo(rank=i, rank_source="process order", world_size=None, world_size_source="unknown", pid=p)
             for i, p in enumerate(order)]
    return ranks, {p: i for i, p in enumerate(order)}


# The export metadata is free text (an export can carry input paths, host names); only the two
# version numbers reach a report, and only when they read as one ("2024.5.1.113", "3.11.1-beta").
_VERSION = re.compile(r"[0-9][0-9A-Za-z.+_-]{0,39}")


def _version(text: str) -> str:
    text = text.strip()
    return text if _VERSION.fullmatch(text) else "unrecognized"


def _meta(ex: Export, path: str, events: pd.DataFrame, ranks: list[RankInfo], used: set[tuple[int, int]],
          step_range: str | None) -> TraceMeta:
    md = ex.meta_rows()
    product = _version(md.get("EXPORT_PRODUCT_VERSION", ""))
    version = _version(md.get("EXPORT_SCHEMA_VERSION", ""))
    generation = f"nsys {product} (export schema {version})" if md else "nsys 2021-era (no export metadata)"
    warnings: list[Note | str] = []
    epoch = None
    if ex.has("TARGET_INFO_SESSION_START_TIME", "utcEpochNs"):
        row = ex.conn.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME LIMIT 1").fetchone()
        epoch = row[0] if row and isinstance(row[0], int) else None
        if row and isinstance(row[0], float) and abs(row[0]) < 2**63:  # a REAL where the export has INTEGER
            epoch = int(row[0])
        if epoch is not None and not 0 < epoch <= EPOCH_NS_MAX:  # see limits: an epoch base is a clock reading
            warnings.append(Note.of(EPOCH_OUT_OF_RANGE, epoch=epoch, max_ns=EPOCH_NS_MAX))
            epoch = None
    shift = md.get("EXPORT_PARAM_TIME_SHIFT", "0") or "0"
    if md.get("EXPORT_PARAM_TIME_NORMALIZE", "false") == "true" or shift not in ("0", ""):
        warnings.append(Note.of(TIME_SHIFTED_EXPORT))
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
    # Several rows can carry the same cuDevice (a Windows export also lists the integrated GPU and the
    # "Microsoft Basic Render Driver" with cuDevice 0): the kernels' device is the CUDA-capable row (one
    # with SMs), the one whose own id is that device id first; the last row listed must not win.
    by_cuda: dict[int, GpuRow] = {}
    for r in sorted((r for r in rows if r.pid is None),
                    key=lambda r: (not r.sm_count, r.gpu_id != r.cuda_id), reverse=True):
        by_cuda[r.cuda_id] = r
    per_pid = {(r.pid, r.cuda_id): r for r in rows if r.pid is not None}
    out: list[DeviceInfo] = []
    for rk in ranks:
        pid = rk.pid
        if pid is None:  # every nsys rank is a process; without a pid nothing below would match
            continue
        listed = {cuda for (p, cuda) in cuda_map if p == pid} | {c for (p, c) in per_pid if p == pid}
        for dev in sorted({d for (p, d) in used if p == pid} | listed):
            info = per_pid.get((pid, dev))
            if info is None and (pid, dev) in cuda_map:
                info = by_gpu.get(cuda_map[(pid, dev)])
            if info is None:
                info = by_cuda.get(dev)
            out.append(DeviceInfo(rank=rk.rank, id=int(dev), name=info.name if info else "",
                                  sm_count=int(info.sm_count) if info and info.sm_count else None,
                                  memory_bytes=int(info.memory_bytes) if info and info.memory_bytes else None,
                                  compute_capability=info.cc if info else None, used=(pid, dev) in used))
    return out


def _steps(events: pd.DataFrame, step_range: str | None, warnings: list[Note | str]) -> pd.DataFrame | None:
    """Host step ranges: rank, step, name, start_ns, end_ns (ProfilerStep#N, or the ``step_range`` NVTX name)."""
    names = pd.Series(events["name"].cat.categories)
    if step_range:
        pat = re.compile(rf"^{re.escape(step_range)}(?:[#_ ]?(\d+))?$")
    else:
        pat = _STEP
    hits = {i: m for i, nm in names.items() if (m := pat.match(str(nm)))}
    if not hits:
        if step_range:
            warnings.append(Note.of(NO_NVTX_RANGE_NAMED, pattern=step_range))
        return None
    # Rows picked by name code first: copying all host rows (millions of runtime calls) to find a
    # few step ranges would cost more memory than the rest of the load.
    host = events["lane"].isin([S.LANE_CPU_ANNOTATION, S.LANE_CPU_THREAD]).to_numpy()
    sel = events.iloc[np.flatnonzero(np.isin(events["name"].cat.codes.to_numpy(), list(hits)) & host)]
    numbers = [int_text(hits[c].group(1), 0) if hits[c].group(1) else -1 for c in range(len(names)) if c in hits]
    if None in numbers:  # past int64: only a label (see limits)
        warnings.append(Note.of(STEP_NUMBER_PAST_INT64))
    number = np.array([-1 if n is None else n for n in numbers], dtype=np.int64)
    lookup = np.full(len(names), -1, dtype=np.int64)
    lookup[list(hits)] = number
    df = pd.DataFrame({"rank": sel["rank"].to_numpy(), "step": lookup[sel["name"].cat.codes.to_numpy()],
                       "name": sel["name"].astype(str).to_numpy(), "start_ns": sel["start_ns"].to_numpy(),
                       "end_ns": sel["end_ns"].to_numpy()}).sort_values(["rank", "start_ns"], kind="stable")
    if (df["step"] < 0).any():  # some ranges carry no number: number all in time order per rank
        df["step"] = df.groupby("rank").cumcount().to_numpy().astype(np.int64)
    return df.reset_index(drop=True)
