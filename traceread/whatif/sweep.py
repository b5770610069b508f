"""The replay's sweep: one pass over the model's nodes in causal order (``_csweep.c``, compiled).

Node ``i``'s value is ``max(end[src] + delay)`` over its three edge slots (``src`` -1: no edge), its
recorded time when it has no edge; ``end = value + dur``. The compiled sweep is used when it was
built (``setup.py`` builds it like the Kineto scanner, optionally); :func:`sweep_python` is the
exact twin (same int64 arithmetic), used without a compiler or with ``TRACEREAD_NO_CSWEEP=1``; a
test compares the two.
"""

from __future__ import annotations

import numpy as np

from traceread.extensions import optional, switched_off

DISABLE_ENV = "TRACEREAD_NO_CSWEEP"


# None when built without a compiler: the Python twin replays (same results, slower)
COMPILED = optional("traceread.whatif._csweep")


def sweep(time: np.ndarray, src: np.ndarray, delay: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Each node's replayed value (module doc). ``src``/``delay`` are (n, 3) int64."""
    time, dur = np.ascontiguousarray(time, np.int64), np.ascontiguousarray(dur, np.int64)
    src, delay = np.ascontiguousarray(src, np.int64), np.ascontiguousarray(delay, np.int64)
    if COMPILED is None or switched_off(DISABLE_ENV):
        return sweep_python(time, src, delay, dur)
    out = np.zeros(len(time), dtype=np.int64)
    COMPILED.sweep(time, src, delay, dur, out)
    return out


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
