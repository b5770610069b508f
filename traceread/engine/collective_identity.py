"""Collective identity: what each communication kernel is, as the host that launched it says.

NCCL has no all-to-all primitive: PyTorch builds all-to-all (TorchRec embedding exchange, MoE
dispatch) from grouped ncclSend/ncclRecv, which run as ``ncclKernel_SendRecv`` /
``ncclDevKernel_SendRecv`` kernels. A kernel's name therefore cannot tell an all-to-all from a
pipeline's point-to-point transfer; the host op that launched it can:

::

    host   |-- c10d::alltoall_base_ --------------|      framework op (cpu_op / NVTX range)
           |   |-- record_param_comms ---------|  |      its args may carry "Collective name"
           |   |   |-- nccl:all_to_all ------| |  |      PyTorch's annotation
           |   |   |   cudaLaunchKernel ▌    | |  |      launch (correlation id ->)
    GPU                    ncclKernel_SendRecv ████      -> collective "all-to-all", by "host-range"

Sources, strongest last (a stronger one overrides a weaker one):

1. ``kernel-name``: the kernel's own name (``kernel_classes.collective_type``): the fallback when
   no host op names the collective.
2. ``nccl-range``: the innermost NCCL API range (NVTX ``ncclAllReduce``, ``ncclAllGather`` ...)
   enclosing the launch on its thread. ``ncclSend``/``ncclRecv`` never decide on their own (they
   are what an all-to-all is made of), nor does ``ncclGroupEnd``.
3. ``host-range``: the innermost framework op or annotation naming a collective (``c10d::*``,
   ``_c10d_functional::*``, ``nccl:*``, ``record_param_comms`` with a ``Collective name``,
   ``batch_isend_irecv``) enclosing the launch on its thread.
4. ``host-op``: the host op whose External id the kernel carries, when it names a collective
   (Kineto: ``record_param_comms`` with a ``Collective name``, or the op itself) and was running
   when the kernel was launched.
5. ``host-args``: the ``Collective name`` recorded on the kernel row itself (Kineto copies
   ``record_param_comms``' args onto the kernel in recent PyTorch).

Kernel -> launch is the correlation link of :mod:`traceread.engine.lanes`. Containment is vectorized
(``intervals.innermost_covering`` over the identifying ranges of each thread; the loop runs over
threads, not events). In some real traces the kernels' External id equals their correlation id and
matches no host op: containment alone answers there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from traceread import grouped, intervals, schema
from traceread import kernel_classes as kc
from traceread.engine.lanes import HOST_LANES, EventView, engine_cache, event_view
from traceread.trace import Trace

SRC_KERNEL_NAME = "kernel-name"
SRC_NCCL_RANGE = "nccl-range"
SRC_HOST_RANGE = "host-range"
SRC_HOST_OP = "host-op"
SRC_HOST_ARGS = "host-args"
SOURCES: tuple[str, ...] = (SRC_KERNEL_NAME, SRC_NCCL_RANGE, SRC_HOST_RANGE, SRC_HOST_OP, SRC_HOST_ARGS)
HOST_SOURCES: frozenset[str] = frozenset({SRC_HOST_RANGE, SRC_HOST_OP, SRC_HOST_ARGS})

# Framework-level names: PyTorch's c10d ops (eager and functional), ProcessGroupNCCL's "nccl:<op>"
# record_function ranges, the batched p2p helper. The op is the part after the namespace.
_FRAMEWORK_RE = re.compile(
    r"^(?:_?c10d(?:_functional)?::|nccl:|rccl:|gloo:)(?P<op>[A-Za-z_]+)|(?P<batch>batch_isend_irecv)")
# NCCL/RCCL API ranges (NVTX): ncclAllReduce, ncclGroupEnd, ...
_NCCL_API_RE = re.compile(r"^[nr]ccl(?P<op>[A-Z][A-Za-z]*)$")

# What a name matching either pattern above begins with (both match at the start): a name that begins otherwise
# identifies nothing, and most names are judged by this one test.
_HOST_NAME_PREFIXES = ("_c10d", "c10d", "nccl", "rccl", "gloo:", "batch_isend_irecv")

# Operation word (lower case, underscores removed, trailing "base"/"coalesced"/"single"/... kept
# out) -> collective type. Anything not listed does not identify (barrier, coalesced, wait).
_OPS: dict[str, str] = {
    "allreduce": kc.COLL_ALL_REDUCE,
    "allgather": kc.COLL_ALL_GATHER, "allgatherintotensor": kc.COLL_ALL_GATHER,
    "reducescatter": kc.COLL_REDUCE_SCATTER, "reducescattertensor": kc.COLL_REDUCE_SCATTER,
    "alltoall": kc.COLL_ALL_TO_ALL, "alltoallv": kc.COLL_ALL_TO_ALL, "alltoallsingle": kc.COLL_ALL_TO_ALL,
    "broadcast": kc.COLL_BROADCAST, "bcast": kc.COLL_BROADCAST,
    "reduce": kc.COLL_REDUCE,
    "send": kc.COLL_SEND, "recv": kc.COLL_RECV, "recvanysource": kc.COLL_RECV,
    "sendrecv": kc.COLL_SEND_RECV, "batchisendirecv": kc.COLL_SEND_RECV,
}
_OP_SUFFIX = re.compile(r"(base|coalesced|single|tensor|into|inplace)$")
# NCCL API words that never decide a kernel's collective on their own (see module docstring).
_NCCL_UNDECIDED = frozenset({"send", "recv", "groupstart", "groupend"})


def _op_type(word: str) -> str:
    """Collective type of an operation word ('' when it names none)."""
    w = word.lower().replace("_", "")
    for _ in range(3):  # all_gather_into_tensor_coalesced -> allgatherintotensor -> allgather
        if w in _OPS:
            return _OPS[w]
        stripped = _OP_SUFFIX.sub("", w)
        if stripped == w:
            break
        w = stripped
    return _OPS.get(w, "")


def host_name_type(name: str) -> tuple[str, str]:
    """``(collective type, source)`` a host op or range name gives, or ``('', '')``.

    ``c10d::alltoall_base_`` -> ('all-to-all', 'host-range'); ``nccl:send`` -> ('send', 'host-range');
    ``ncclAllReduce`` -> ('all-reduce', 'nccl-range'); ``ncclSend``, ``record_param_comms``,
    ``aten::scatter`` -> ('', '').
    """
    m = _FRAMEWORK_RE.match(name)
    if m:
        typ = _op_type(m.group("op") or m.group("batch") or "")
        return (typ, SRC_HOST_RANGE) if typ else ("", "")
    m = _NCCL_API_RE.match(name)
    if m and m.group("op").lower() not in _NCCL_UNDECIDED:
        typ = _op_type(m.group("op"))
        return (typ, SRC_NCCL_RANGE) if typ else ("", "")
    return "", ""


def recorded_type(collective: str) -> str:
    """Collective type of a recorded ``Collective name`` (allreduce, all_to_allv, send...; '' for wait)."""
    return _op_type(collective)


@dataclass(frozen=True)
class Identity:
    """Per communication kernel row (``rows``, sorted): its collective type, how it was known, and
    the host row that named it (-1 when the kernel's own name or args decided)."""

    rows: np.ndarray
    collective: np.ndarray  # object: one of kernel_classes.COLLECTIVE_TYPES
    source: np.ndarray  # object: one of SOURCES
    host_row: np.ndarray  # int64

    def of(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(collective, source)`` of comm kernel ``rows`` (each must be in ``self.rows``)."""
        k = np.searchsorted(self.rows, rows)
        return self.collective[k], self.source[k]

    def is_p2p(self, rows: np.ndarray) -> np.ndarray:
        """Bool per row: the kernel is a point-to-point transfer (send, recv, send-recv)."""
        return np.isin(self.of(rows)[0], list(kc.P2P_TYPES))


def identify(trace: Trace) -> Identity:
    """The :class:`Identity` of every ``gpu_comm`` row of ``trace`` (computed once per frame, kept in the
    engine's cache beside the frame's view)."""
    v = event_view(trace)
    derived = engine_cache(trace).derived_of(trace.events)
    ident = derived.get("collective_identity") if derived is not None else None
    if ident is not None and len(ident.rows) == len(v.rows((schema.LANE_GPU_COMM,))):
        return ident
    ident = _identify(trace, v)
    if derived is not None:
        derived["collective_identity"] = ident
    return ident


class _Words:
    """Codes for the few strings of an identification (types, sources): code 0 is ''. The rules
    below compare and gather int codes per host row instead of Python strings (an object array of
    every host row is compared a Python object at a time)."""

    def __init__(self) -> None:
        self.labels: list[str] = [""]
        self._code: dict[str, int] = {"": 0}

    def code(self, word: str) -> int:
        if word not in self._code:
            self._code[word] = len(self.labels)
            self.labels.append(word)
        return self._code[word]

    def codes(self, words) -> np.ndarray:
        return np.array([self.code(str(w)) for w in words], dtype=np.int32)

    def strings(self, codes: np.ndarray) -> np.ndarray:
        return np.array(self.labels, dtype=object)[codes]


def _recorded(trace: Trace, words: _Words) -> tuple[np.ndarray, np.ndarray]:
    """The rows whose ``collective_args`` record names a type (sorted) and that type's code: the
    record of a row listed twice is its last, as an assignment per record in table order leaves it.
    A pair of short arrays, not a code per event (an array over every event, read at every host row)."""
    args = trace.side_table("collective_args")
    if args.empty:
        return np.zeros(0, np.int64), np.zeros(0, np.int32)
    col = args["collective"]
    cat = col.cat.codes.to_numpy() if isinstance(col.dtype, pd.CategoricalDtype) else None
    if cat is not None and (len(cat) == 0 or cat.min() >= 0):  # by category: a name judged and mapped per category
        first = pd.unique(cat)  # in order of first appearance, as the names' unique() gives them
        table = np.zeros(len(col.cat.categories), dtype=np.int32)
        table[first] = words.codes(recorded_type(str(x)) for x in col.cat.categories[first])
        codes = table[cat]
    else:
        names = col.astype(str)
        distinct = names.unique()
        lut = dict(zip(distinct, words.codes(recorded_type(x) for x in distinct), strict=True))
        codes = names.map(lut).to_numpy(dtype=np.int32)
    rows = args["row"].to_numpy(np.int64)
    order = np.argsort(rows, kind="stable")
    rows, codes = rows[order], codes[order]
    last = np.ones(len(rows), dtype=bool)
    last[:-1] = rows[1:] != rows[:-1]
    keep = last & (codes != 0)
    return rows[keep], codes[keep]


def _recorded_at(recorded: tuple[np.ndarray, np.ndarray], rows: np.ndarray) -> np.ndarray:
    """Per row of ``rows``: its recorded type's code (0: none)."""
    rec_rows, rec_codes = recorded
    out = np.zeros(len(rows), dtype=np.int32)
    if len(rec_rows) and len(rows):
        k = np.minimum(np.searchsorted(rec_rows, rows), len(rec_rows) - 1)
        hit = rec_rows[k] == rows
        out[hit] = rec_codes[k[hit]]
    return out


def _identify(trace: Trace, v: EventView) -> Identity:
    comm = v.rows((schema.LANE_GPU_COMM,))
    n = len(comm)
    words = _Words()
    typ = v.map_names(comm, lambda names: words.codes(kc.collective_type(names))) if n else np.zeros(0, np.int32)
    src = np.full(n, words.code(SRC_KERNEL_NAME), dtype=np.int32)
    host = np.full(n, -1, dtype=np.int64)
    if n == 0:
        return Identity(comm, words.strings(typ), words.strings(src), host)
    recorded = _recorded(trace, words)

    # Host rows that identify a collective: by name, or record_param_comms by its recorded args.
    # Only those rows are kept (the others are never read): names are judged once per name code.
    # By name code (the last entry answers for -1); a name that begins as no pattern does gives ('', ''): code 0.
    name_types = np.zeros((len(v.names), 2), dtype=np.int32)
    for i, x in enumerate(v.names.tolist()):
        if str(x).startswith(_HOST_NAME_PREFIXES):
            name_types[i] = [words.code(w) for w in host_name_type(str(x))]
    hrows = v.rows(HOST_LANES)
    # The host rows of those names (found in the name column: a pass per name over contiguous codes, not a
    # gather of every host row's name), and the recorded ones; in row order.
    typed = np.flatnonzero(name_types[:-1, 0] != 0)
    wanted = np.flatnonzero(intervals.one_of(v.name, typed.astype(v.name.dtype))) if len(typed) else typed
    wanted = np.union1d(wanted, recorded[0])
    if len(hrows):
        pos = np.minimum(np.searchsorted(hrows, wanted), len(hrows) - 1)
        hrows = hrows[pos[hrows[pos] == wanted]]
    del typed, wanted
    by_name = name_types[v.name[hrows]]
    rec = _recorded_at(recorded, hrows)
    has_rec = rec != 0
    h_typ = np.where(has_rec, rec, by_name[:, 0])
    h_src = np.where(has_rec, words.code(SRC_HOST_RANGE), by_name[:, 1])
    del by_name, rec, has_rec

    launch = v.launch_of(comm)
    known = launch >= 0
    # 2 and 3: containment of the launch on its thread, NCCL ranges first, framework ranges over them.
    for level in (SRC_NCCL_RANGE, SRC_HOST_RANGE):
        at_level = h_src == words.code(level)
        cand = hrows[at_level]
        if len(cand) == 0 or not known.any():
            continue
        ctyp = h_typ[at_level]
        q = np.flatnonzero(known)
        key_l, key_c = _thread_keys(v, launch[q], cand)
        for k in np.unique(key_l):  # loop over threads, not events
            mine = np.flatnonzero(key_c == k)
            if len(mine) == 0:
                continue
            ql = q[key_l == k]
            idx = intervals.innermost_covering(v.start[launch[ql]], v.start[cand[mine]], v.end[cand[mine]])
            hit = idx >= 0
            typ[ql[hit]] = ctyp[mine[idx[hit]]]
            src[ql[hit]] = words.code(level)
            host[ql[hit]] = cand[mine[idx[hit]]]

    # 4: the host op of the kernel's External id (per rank), when it names a collective.
    ext = trace.events["external_id"].to_numpy()
    named = hrows[h_typ != 0]
    if len(named):
        key_h = _ext_key(v, ext, named)
        ok = ext[named] != schema.NO_ID
        key_h, named_ok = key_h[ok], named[ok]
        order = np.argsort(key_h, kind="stable")
        key_h, named_ok = key_h[order], named_ok[order]
        key_k = _ext_key(v, ext, comm)
        if len(key_h):
            k = np.minimum(np.searchsorted(key_h, key_k), len(key_h) - 1)
            hit = (key_h[k] == key_k) & (ext[comm] != schema.NO_ID)
            # The op must have been running when the kernel was launched (an External id that
            # collides with an unrelated op's, as a correlation id written in its place can, is no link).
            cand_op = named_ok[k]
            lt = v.start[np.maximum(launch, 0)]
            hit &= (launch < 0) | ((v.start[cand_op] <= lt) & (lt <= v.end[cand_op]))
            hrow = named_ok[k[hit]]
            pos = np.searchsorted(hrows, hrow)
            typ[hit] = h_typ[pos]
            src[hit] = words.code(SRC_HOST_OP)
            host[hit] = hrow

    # 5: the kernel's own recorded Collective name.
    own_typ = _recorded_at(recorded, comm)
    own = own_typ != 0
    typ[own] = own_typ[own]
    src[own] = words.code(SRC_HOST_ARGS)
    host[own] = -1
    return Identity(comm, words.strings(typ), words.strings(src), host)


def _thread_keys(v: EventView, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One int per host thread (rank, pid, tid), shared by the rows ``a`` and ``b``."""
    rows = np.concatenate([a, b])
    key = grouped.codes(v.rank[rows], v.pid[rows], v.tid[rows])[0]  # any numbering: threads are only told apart
    return key[:len(a)], key[len(a):]


def _ext_key(v: EventView, ext: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """(rank, External id) as one int64 (External ids are below 2**40)."""
    return (v.rank[rows].astype(np.int64) << 40) | (ext[rows].astype(np.int64) & ((1 << 40) - 1))


def step_p2p_counts(trace: Trace, steps_df: pd.DataFrame) -> np.ndarray:
    """Per row of ``steps_df``: point-to-point comm kernels (by identity) of that step on its (rank,
    device), the evidence of pipeline parallelism: those starting inside its device window, or
    launched inside its host window (a host running ahead launches step N's sends while the GPU is
    still in step N-1), whichever count is larger."""
    out = np.zeros(len(steps_df), dtype=np.int64)
    v = event_view(trace)
    ident = identify(trace)
    p2p = ident.rows[np.isin(ident.collective, list(kc.P2P_TYPES))]
    if len(p2p) == 0 or len(steps_df) == 0:
        return out
    ranks, devs = steps_df["rank"].to_numpy(), steps_df["device"].to_numpy()
    windows = [(steps_df["start_ns"].to_numpy(np.int64), steps_df["end_ns"].to_numpy(np.int64))]
    if "cpu_start_ns" in steps_df.columns:
        windows.append((steps_df["cpu_start_ns"].to_numpy(np.int64), steps_df["cpu_end_ns"].to_numpy(np.int64)))
    launch = v.launch_of(p2p)
    for r, d in set(zip(ranks.tolist(), devs.tolist(), strict=True)):  # devices are few
        here = (v.rank[p2p] == r) & (v.device[p2p] == d)
        if not here.any():
            continue
        sel = np.flatnonzero((ranks == r) & (devs == d))
        times = [np.sort(v.start[p2p[here]], kind="stable")]  # nearly in order: merged runs
        lh = launch[here]
        times.append(np.sort(v.start[lh[lh >= 0]], kind="stable"))
        for (ws, we), t in zip(windows, times, strict=False):
            n = np.searchsorted(t, we[sel], side="left") - np.searchsorted(t, ws[sel], side="left")
            out[sel] = np.maximum(out[sel], n)
    return out
