"""The replay's sweep: one pass over the model's nodes in causal order (``_csweep.c``, compiled).

Node ``i``'s value is ``max(end[src] + delay)`` over its three edge slots (``src`` -1: no edge), its
recorded time when it has no edge; ``end = value + dur``. The compiled sweep is used when it was
built (``setup.py`` builds it like the Kineto scanner, optionally); :func:`sweep_python` is the
exact twin (same int64 arithmetic), used without a compiler or with ``TRACEREAD_NO_CSWEEP=1``; a
test compares the two. The same module holds the host-time fixes' cut (:func:`host_cut`, one pass over
the nodes where numpy needs a dozen; :func:`host_cut_python` is its twin).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from traceread import intervals
from traceread.extensions import optional, switched_off

DISABLE_ENV = "TRACEREAD_NO_CSWEEP"
SRC = np.int32  # edge sources as the compiled loops read them (traceread.whatif.model.SRC)


# None when built without a compiler: the Python twin replays (same results, slower)
COMPILED = optional("traceread.whatif._csweep")


def _ns(a: np.ndarray) -> np.ndarray:
    """``a`` (ns) as the compiled loops read it: int32 stays (a model keeps its delays and durations at
    int32 when every value fits, ``traceread.whatif.model._put``), anything else is int64."""
    return np.ascontiguousarray(a, np.int32 if a.dtype == np.int32 else np.int64)


def fits(values: np.ndarray | int, dtype: np.dtype[Any] | type) -> bool:
    """Whether every integer of ``values`` fits ``dtype`` (an int32 model array takes them unchanged)."""
    a = np.asarray(values)
    if a.size == 0:
        return True
    info = np.iinfo(dtype)
    return bool(int(np.min(a)) >= info.min and int(np.max(a)) <= info.max)


def sweep(time: np.ndarray, src: np.ndarray, delay: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Each node's replayed value (module doc). ``src``/``delay`` are (n, 3): node indices (stored as
    :data:`SRC`, int32) and ns (int32 or int64; every sum is int64)."""
    return sweep_span(time, src, delay, dur)[0]


def sweep_span(time: np.ndarray, src: np.ndarray, delay: np.ndarray, dur: np.ndarray,
               out: np.ndarray | None = None) -> tuple[np.ndarray, tuple[int, int]]:
    """:func:`sweep`, and the replay's first start and last end (0, 0 without nodes), which the compiled
    sweep reads in the same pass. ``out``: an int64 array of the nodes' length the compiled sweep writes
    into (the Python twin returns its own)."""
    time, dur = np.ascontiguousarray(time, np.int64), _ns(dur)
    src, delay = np.ascontiguousarray(src, SRC), _ns(delay)
    if COMPILED is None or switched_off(DISABLE_ENV):
        out = sweep_python(time, src, delay, dur)
        if not len(out):
            return out, (0, 0)
        return out, (int(np.min(out)), int(np.max(out + dur.astype(np.int64))))
    if out is None or out.dtype != np.int64 or len(out) != len(time) or not out.flags.c_contiguous:
        out = np.empty(len(time), dtype=np.int64)
    first, last = COMPILED.sweep(time, src, delay, dur, out)
    return out, (int(first), int(last))


def sweep_python(time: np.ndarray, src: np.ndarray, delay: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """The compiled sweep's exact twin in Python (a loop per node: only for builds without a compiler)."""
    n = len(time)
    out = [0] * n
    t, d = time.tolist(), dur.tolist()
    s0, s1, s2 = src[:, 0].tolist(), src[:, 1].tolist(), src[:, 2].tolist()
    d0, d1, d2 = delay[:, 0].tolist(), delay[:, 1].tolist(), delay[:, 2].tolist()
    for i in range(n):
        best = None
        for s, dl in ((s0[i], d0[i]), (s1[i], d1[i]), (s2[i], d2[i])):
            if s < 0:
                continue
            if s >= i:
                raise ValueError("sweep: an edge points forward")
            v = out[s] + d[s] + dl
            if best is None or v > best:
                best = v
        out[i] = t[i] if best is None else best
    return np.asarray(out, dtype=np.int64)


def host_cut(time: np.ndarray, src: np.ndarray, delay: np.ndarray, nodes: np.ndarray, us: np.ndarray,
             ue: np.ndarray, frac: float) -> tuple[np.ndarray, np.ndarray]:
    """The host time the union ``(us, ue)`` (sorted, disjoint) covers on the slot-0 edge of each of ``nodes``
    (ascending; each has a slot-0 source), times ``frac`` truncated to int64: (the nodes with something to
    cut or a negative recorded delay, as :data:`SRC`; their cuts). ``time`` ascending; ``src``/``delay`` (n, 3) as for
    :func:`sweep`."""
    time, delay = np.ascontiguousarray(time, np.int64), _ns(delay)
    src, nodes = np.ascontiguousarray(src, SRC), np.ascontiguousarray(nodes, SRC)  # node indices at int32
    us, ue = np.ascontiguousarray(us, np.int64), np.ascontiguousarray(ue, np.int64)
    if COMPILED is None or switched_off(DISABLE_ENV):
        return host_cut_python(time, src, delay, nodes, us, ue, frac)
    out_nodes, out_cut = np.empty(len(nodes), SRC), np.empty(len(nodes), np.int64)
    kept = COMPILED.host_cut(time, src, delay, nodes, us, ue, float(frac), out_nodes, out_cut)
    if 4 * kept >= 3 * len(nodes):  # most kept (the launch-bound fix's cut): no second copy beside the first
        return out_nodes[:kept], out_cut[:kept]
    return out_nodes[:kept].copy(), out_cut[:kept].copy()


def host_cut_python(time: np.ndarray, src: np.ndarray, delay: np.ndarray, nodes: np.ndarray, us: np.ndarray,
                    ue: np.ndarray, frac: float) -> tuple[np.ndarray, np.ndarray]:
    """The compiled :func:`host_cut`'s exact twin (numpy passes)."""
    # The union's coverage before each node's time, once: the coverage of an edge's span [min(a, b), b] is
    # covered(b) - covered(min(a, b)) = max(covered(b) - covered(a), 0), coverage growing with time.
    covered = _covered(time, us, ue)
    overlap = np.maximum(covered[nodes] - covered[src[nodes, 0]], 0)
    cut = (overlap * frac).astype(np.int64)
    # Nodes with nothing to cut are left out, unless their recorded delay is negative (clock skew),
    # which shrinking raises to 0.
    keep = (cut != 0) | (delay[nodes, 0] < 0)
    return nodes[keep].astype(SRC, copy=False), cut[keep]


def _covered(time: np.ndarray, us: np.ndarray, ue: np.ndarray) -> np.ndarray:
    """:func:`intervals.covered_before` at each node time (ascending): 0 before the union, all of it after;
    searched only in between (one-time work covers the capture's first seconds only)."""
    if len(us) == 0:
        return np.zeros(len(time), dtype=np.int64)
    lo, hi = (int(k) for k in np.searchsorted(time, [us[0], ue[-1]]))
    out = np.empty(len(time), dtype=np.int64)
    out[:lo] = 0
    out[hi:] = int(np.sum(ue - us))
    out[lo:hi] = intervals.covered_before_sorted(time[lo:hi], us, ue)
    return out
