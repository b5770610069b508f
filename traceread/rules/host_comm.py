"""Host-side communication: ranges of a host communication library (MPI, Gloo, UCX) over a gap.

::

    host     |cudaMemcpy D2H|..MPI_Send..|..MPI_Recv (waits for the peer)..|cudaMemcpy H2D|launch
    compute  ==k==|....................................gap.....................................|==k==

The data moves between processes on the host (an MPI+CUDA exchange staged through host memory, a Gloo
collective of CPU tensors): nothing shows on the GPU's communication lane, yet the GPU waits for it.
Ranges (NVTX, ``record_function``, CPU ops) named for such a library (``HOST_COMM``) on the gap's rank
are communication (``comm_bound``), their union over the gap measured here. NCCL/RCCL and ``c10d``
ranges are not: their data moves in GPU kernels, read on the communication lane.
"""

from __future__ import annotations

import re

import numpy as np

from traceread import intervals, schema
from traceread.engine.lanes import HOST_LANES, event_view
from traceread.rules._base import texts
from traceread.rules._calls import Spec, distinct, select
from traceread.rules._columns import Frame, col
from traceread.trace import Trace

# Host communication libraries' calls and ranges (MPI, its profiling interface, Gloo, UCX/UCC, OpenSHMEM).
HOST_COMM = re.compile(r"^(?:P?MPI_[A-Z][A-Za-z_]*|gloo[:_].*|ucp_\w+|ucc_\w+|shmem_\w+)$")
_RANGES: Spec = tuple((lane, (schema.CAT_RUNTIME, schema.CAT_DRIVER, schema.CAT_PYTHON), True) for lane in HOST_LANES)


def host_comm(gaps: Frame, trace: Trace | None) -> tuple[np.ndarray, np.ndarray]:
    """Per gap: ``(ns, name)``: host communication ranges of its rank covering it (union, ns) and the name
    of the longest one overlapping it ('' when none)."""
    n = len(gaps)
    ns = np.zeros(n, dtype=np.int64)
    name = texts(n)
    if trace is None or n == 0:
        return ns, name
    rows = select(trace, _RANGES, names=(HOST_COMM,))
    if len(rows) == 0:
        return ns, name
    v = event_view(trace)
    r_rank = v.rank[rows].astype(np.int64)
    g_rank = col(gaps, "rank", dtype=np.int64)
    g_dev = col(gaps, "device", dtype=np.int64)
    gs = col(gaps, "start_ns", dtype=np.int64)
    ge = col(gaps, "end_ns", dtype=np.int64)
    for rank in distinct(r_rank):  # ranks and devices are few
        mine = rows[r_rank == rank]
        s, e = v.start[mine].astype(np.int64), v.end[mine].astype(np.int64)
        sel = np.flatnonzero(g_rank == rank)
        if len(sel) == 0:
            continue
        ns[sel] = intervals.overlap_with_union(gs[sel], ge[sel], *intervals.union(s, e))
        sel = sel[ns[sel] > 0]
        for dev in distinct(g_dev[sel]):
            q = sel[g_dev[sel] == dev]
            q = q[np.argsort(gs[q], kind="stable")]  # a device's gaps are disjoint
            _, idx = intervals.longest_overlap(gs[q], ge[q], s, e)
            hit = idx >= 0
            name[q[hit]] = np.asarray(v.names_of(mine[idx[hit]]), dtype=object)
    return ns, name
