"""The Chrome-trace JSON that rocmProfileData's ``rpd2tracing.py`` writes from an RPD -> the events frame.

Its shape (``[ {}`` first, or ``{"traceEvents": [ {}``): one process per GPU (metadata ``process_name``
"GPU<gpuId>", ``pid`` the gpuId as a string), one thread per queue; GPU ops are ``X`` events on them named
by the kernel (or the op type), ``args.desc`` the op type ("KernelExecution", "CopyDeviceToHost",
"FillBuffer"); host calls are ``X`` events on the real pid/tid named by the API, ``args.desc`` its
arguments; roctx ranges are named by their message (``args.desc`` the same text), marks ``i`` events;
each call -> op link is a flow pair (``cat`` "api_op", ``s`` at the host thread, ``f`` at the op's start);
counters (``QueueDepth``, ``Idle``, ``Allocated Memory``) are ``C`` events; "UserMarker frame" rows are
marker ranges projected on GPU queues. Times are strings of whole microseconds (the RPD's ns // 1000).

Without this reader such a file reads as a Kineto trace with no GPU events ("CPU-only"). Rows: as the
RPD reader makes them (:mod:`.rpd`); a call and its op share ``correlation`` (the flow id); an op's
process is its call's. Graph rows (``args.kernels``) repeat their kernels and are not kept.
"""

from __future__ import annotations

import os
from operator import attrgetter
from typing import Any, Union

import msgspec
import numpy as np
import pandas as pd

from traceread import schema as S
from traceread.errors import TraceReadError
from traceread.loaders.detect import looks_like_rpd_trace_json  # noqa: F401 - re-exported: the reader's test
from traceread.loaders.rocprof.frame import (
    COPY_KINDS,
    LANE,
    Parts,
    block,
    build,
    copy_block,
    intern,
    kernel_lanes,
)
from traceread.note import RPD_JSON, Note
from traceread.trace import Trace

FORMAT = "rpd-json"
WHAT = "rpd2tracing JSON"




class Args(msgspec.Struct):
    desc: Any = None
    name: Any = None
    kernels: Any = None


class Ev(msgspec.Struct):
    name: Any = ""
    ph: Any = ""
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    cat: Any = ""
    id: Any = None
    args: Args = msgspec.field(default_factory=Args)


class Wrapped(msgspec.Struct):
    traceEvents: list[Ev]  # noqa: N815 - the JSON key


_DECODER = msgspec.json.Decoder(Union[list[Ev], Wrapped])  # noqa: UP007 - msgspec needs the runtime union


def load_rpd_trace_json(path: str | os.PathLike[str], progress: bool = False) -> Trace:
    """Load rpd2tracing's Chrome JSON (plain or gzip); TraceReadError naming the format on bad input (``progress``: accepted, unused)."""
    from traceread.loaders.kineto.source import read_whole

    path = os.fspath(path)
    data = read_whole(path, WHAT)
    try:
        doc = _DECODER.decode(data)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        why = " ".join(str(exc).split())
        why = "truncated" if "truncated" in why.lower() else why[:200]
        raise TraceReadError(path, f"not a readable {WHAT} file ({why})") from None
    evs = doc.traceEvents if isinstance(doc, Wrapped) else doc
    try:
        parts = _parts(evs)
    except (OverflowError, ValueError, TypeError) as exc:
        raise TraceReadError(path, f"not a readable {WHAT} file (a value out of range: "
                                   f"{' '.join(str(exc).split())[:120]})") from None
    return build(path, parts)


def _obj(evs: list[Ev], attr: str) -> pd.Series:
    return pd.Series(list(map(attrgetter(attr), evs)), dtype=object)


def _num(s: pd.Series) -> np.ndarray:
    """Integer ids written as strings or numbers; -1 where not a number."""
    v = pd.to_numeric(s, errors="coerce")
    return v.fillna(-1).to_numpy().astype(np.int64)


def _ns(s: pd.Series) -> np.ndarray:
    """Microseconds (strings or numbers) -> int64 ns; 0 where not a number."""
    v = pd.to_numeric(s, errors="coerce").fillna(0).to_numpy(dtype=np.float64)
    return np.round(v * 1000.0).astype(np.int64)


def _parts(evs: list[Ev]) -> Parts:
    parts = Parts(fmt=FORMAT, generation="rpd2tracing Chrome-trace JSON (from an RPD)", time_base=S.TIME_RELATIVE)
    ph = _obj(evs, "ph").astype(str).to_numpy(dtype=object)
    name = _obj(evs, "name").astype(str).to_numpy(dtype=object)
    pid, tid = _num(_obj(evs, "pid")), _num(_obj(evs, "tid"))
    desc = _obj(evs, "args.desc").fillna("").astype(str).to_numpy(dtype=object)
    meta_name = _obj(evs, "args.name").fillna("").astype(str)
    is_meta = ph == "M"
    proc = is_meta & (name == "process_name")
    gpu_label = meta_name.str.fullmatch(r"GPU-?\d+").to_numpy(dtype=bool)
    gpu_pids = np.unique(pid[proc & gpu_label])
    on_gpu = np.isin(pid, gpu_pids)
    x = ph == "X"
    start = _ns(_obj(evs, "ts"))
    end = start + np.maximum(_ns(_obj(evs, "dur")), 0)
    graph = _obj(evs, "args.kernels").notna().to_numpy(dtype=bool)
    frame = pd.Series(desc, dtype=object).str.startswith("UserMarker frame").to_numpy(dtype=bool)
    ops = np.flatnonzero(x & on_gpu & ~graph & ~frame)
    host = np.flatnonzero(x & ~on_gpu)
    corr_op, corr_host, op_pid = _flows(evs, ph, pid, tid, start, end, ops, host, desc, name)
    host_pids = pd.unique(pid[host][pid[host] >= 0])
    sole = int(host_pids[0]) if len(host_pids) == 1 else S.NO_ID
    op_pid = np.where(op_pid >= 0, op_pid, sole)
    # host rows: calls, marker ranges (named and described by the same message), marks
    annot = (name[host] == desc[host]) & (name[host] != "")
    for m, lane, cat in ((~annot, S.LANE_CPU_THREAD, S.CAT_RUNTIME), (annot, S.LANE_CPU_ANNOTATION,
                                                                     S.CAT_USER_ANNOTATION)):
        if m.any():
            r = host[m]
            names, code = intern(name[r])
            parts.blocks.append(block("api", lane, cat, names, code, start[r], end[r], pid[r], tid[r],
                                      correlation=corr_host[m]))
    inst = np.flatnonzero((ph == "i") & ~on_gpu)
    if len(inst):
        names, code = intern(name[inst])
        parts.blocks.append(block("api", S.LANE_INSTANT, S.CAT_INSTANT, names, code, start[inst], start[inst],
                                  pid[inst], tid[inst]))
    _ops(parts, ops, name, desc, start, end, pid, tid, op_pid, corr_op)
    fr = np.flatnonzero(x & on_gpu & frame)
    if len(fr):
        names, code = intern(name[fr])
        parts.blocks.append(block("op", S.LANE_GPU_ANNOTATION, S.CAT_GPU_ANNOTATION, names, code, start[fr], end[fr],
                                  sole, tid[fr], pid[fr], tid[fr]))
    parts.device_pid = sole if sole >= 0 else None
    parts.extra["counter_events"] = int((ph == "C").sum())
    parts.extra["linked_ops"] = int((corr_op >= 0).sum())
    parts.warnings.append(Note.of(RPD_JSON))
    return parts


def _ops(parts: Parts, ops: np.ndarray, name: np.ndarray, desc: np.ndarray, start: np.ndarray, end: np.ndarray,
         pid: np.ndarray, tid: np.ndarray, op_pid: np.ndarray, corr: np.ndarray) -> None:
    kind = pd.Series(desc[ops], dtype=object)
    is_copy = kind.str.startswith("Copy").to_numpy(dtype=bool)
    is_fill = kind.str.startswith("Fill").to_numpy(dtype=bool)
    is_barrier = kind.str.startswith("Barrier").to_numpy(dtype=bool)
    is_kernel = ~(is_copy | is_fill | is_barrier)
    dev = pid[ops]  # a GPU process is its gpuId
    if is_kernel.any():
        r, m = ops[is_kernel], is_kernel
        names, code = intern(name[r])
        parts.blocks.append(block("op", kernel_lanes(names, code), S.CAT_KERNEL, names, code, start[r], end[r],
                                  op_pid[m], tid[r], dev[m], tid[r], corr[m]))
    if is_copy.any():
        r, m = ops[is_copy], is_copy
        direction = kind[m].str.replace("Copy", "", n=1, regex=False).map(COPY_KINDS).fillna("")
        parts.blocks.append(copy_block("op", direction.to_numpy(dtype=object), start[r], end[r], op_pid[m], tid[r],
                                       dev[m], tid[r], corr[m], -1))
    for m, lane, cat in ((is_fill, S.LANE_MEMSET, S.CAT_MEMSET), (is_barrier, S.LANE_GPU_SYNC, S.CAT_SYNC)):
        if m.any():
            r, n = ops[m], int(m.sum())
            names, code = intern(np.where(lane == S.LANE_MEMSET, "Memset", name[r]).astype(object))
            empty = np.full(n, "", dtype=object)
            side = {"copy_args": {"bytes": np.full(n, -1, dtype=np.int64), "copy_kind": empty, "src_kind": empty,
                                  "dst_kind": empty}} if lane == S.LANE_MEMSET else None
            parts.blocks.append(block("op", np.full(n, LANE[lane], dtype=np.int8), cat, names, code, start[r], end[r],
                                      op_pid[m], tid[r], dev[m], tid[r], corr[m], side))


def _flows(evs: list[Ev], ph: np.ndarray, pid: np.ndarray, tid: np.ndarray, start: np.ndarray, end: np.ndarray,
           ops: np.ndarray, host: np.ndarray, desc: np.ndarray, name: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The api_op flows as correlation ids: (per op, per host row, each op's host pid).

    An ``f`` end sits on the op's queue at the op's start; ops starting in the same microsecond on one
    queue take the flows there in order. An ``s`` start sits on the host thread at the call's end
    minus 2 us (or at the op's start when earlier): the call on that thread whose end is nearest to
    it plus 2 us (within 1 us), else the call that holds it.
    """
    n_ops, n_host = len(ops), len(host)
    corr_op = np.full(n_ops, S.NO_ID, dtype=np.int64)
    corr_host = np.full(n_host, S.NO_ID, dtype=np.int64)
    op_pid = np.full(n_ops, S.NO_ID, dtype=np.int64)
    cat = _obj(evs, "cat").astype(str).to_numpy(dtype=object)
    flow_id = _num(_obj(evs, "id"))
    fs, ff = np.flatnonzero((ph == "s") & (cat == "api_op")), np.flatnonzero((ph == "f") & (cat == "api_op"))
    if not len(fs) or not len(ff) or not n_ops:
        return corr_op, corr_host, op_pid
    # f -> op: same (pid, tid, start), matched in order within a tie
    o = pd.DataFrame({"p": pid[ops], "t": tid[ops], "ts": start[ops], "i": np.arange(n_ops)})
    o["k"] = o.groupby(["p", "t", "ts"]).cumcount()
    f = pd.DataFrame({"p": pid[ff], "t": tid[ff], "ts": start[ff], "id": flow_id[ff]}).sort_values(["id"], kind="stable")
    f["k"] = f.groupby(["p", "t", "ts"]).cumcount()
    mf = o.merge(f, on=["p", "t", "ts", "k"], how="inner")
    corr_op[mf["i"].to_numpy()] = mf["id"].to_numpy()
    # s -> host call on the same thread
    calls = host[~((name[host] == desc[host]) & (name[host] != ""))]
    h = pd.DataFrame({"p": pid[calls], "t": tid[calls], "end": end[calls], "start": start[calls],
                      "i": np.searchsorted(host, calls)}).sort_values(["p", "t", "end"], kind="stable")
    s = pd.DataFrame({"p": pid[fs], "t": tid[fs], "at": start[fs] + 2000, "id": flow_id[fs]}).drop_duplicates("id")
    s = s.sort_values("at", kind="stable")
    h = h.sort_values("end", kind="stable")
    near = pd.merge_asof(s, h, left_on="at", right_on="end", by=["p", "t"], direction="nearest",
                         tolerance=1000)
    hold = pd.merge_asof(s.assign(at2=s["at"] - 2000).sort_values("at2"), h.sort_values("start"),
                         left_on="at2", right_on="start", by=["p", "t"], direction="backward")
    hold = hold.set_index("id")["i"].where(hold.set_index("id")["end"] >= hold.set_index("id")["at2"])
    row = near.set_index("id")["i"].fillna(hold.reindex(near["id"].to_numpy()))
    row = row.dropna().astype(np.int64)
    corr_host[row.to_numpy()] = row.index.to_numpy()
    # each op's process: its call's
    spid = pd.Series(pid[fs], index=flow_id[fs])
    spid = spid[~spid.index.duplicated()]
    linked = corr_op >= 0
    op_pid[linked] = spid.reindex(corr_op[linked]).fillna(-1).to_numpy().astype(np.int64)
    return corr_op, corr_host, op_pid
