"""The replay with nominal delays only: the model's honest error.

The calibrated replay reproduces the trace by construction (every binding edge gets its measured
delay, :mod:`traceread.whatif.model`), so its 0.0% error says only that no needed dependency is
missing from the calibration. Here every GPU-side edge gets the trace's *nominal* delay instead: a
launch edge the median launch latency, a stream or cross-stream edge the stream turnaround, a sync's
own edge the median cost of that call (per API name: a ``cudaFree`` costs what the trace's other
``cudaFree`` calls cost when they did not wait, a pageable ``cudaMemcpy`` what its kind costs, staging
included) and its wait edge the median return of that call after the op it waited for. The host clock keeps its measured think
time between consecutive host points (a duration the host spent, not a dependency), and a sync's
end follows from the op it waited for. What this replay gets wrong is what the dependencies alone
cannot explain: a wait the model does not hold (another thread, an event it does not read), or a
delay far from its nominal value.
"""

from __future__ import annotations

import numpy as np

from traceread.whatif.fixes import Edges
from traceread.whatif.model import RankModel

_I64 = np.int64


def _per_name(values: np.ndarray, names: np.ndarray, use: np.ndarray, fallback: int) -> np.ndarray:
    """Per item: the median of ``values`` over the items of its name where ``use``; ``fallback`` for a
    name with none."""
    out = np.full(len(values), fallback, dtype=_I64)
    for code in np.unique(names[use]):  # a loop over API names (a handful), not events
        out[names == code] = int(np.median(values[use & (names == code)]))
    return out


def nominal_edges(m: RankModel, sync_names: np.ndarray, scratch: dict[str, np.ndarray] | None = None,
                  driver_work: np.ndarray | None = None) -> Edges:
    """``m``'s edges with every GPU op's and host sync's delays set to the nominal ones (module doc).
    ``sync_names``: the name code of each host sync (``m.sync_end`` order); ``scratch``: as for
    :meth:`Edges.of`; ``driver_work``: per op node, whether its launch call did driver work (longer than
    ``launch_call_max_ns``: a lazy module load in a first launch), whose launch edge then keeps its measured
    delay (the kernel waited for that work, not for a nominal launch)."""
    e = Edges.of(m, scratch)
    nom = m.nominal
    ops = m.op_nodes.astype(np.intp)  # as numpy's indices: an int32 index is converted on each use
    # An op with no recorded launch hangs off a host point at its own start: that edge stays 0.
    lp = m.launch_point
    orphan = (lp >= 0) & (m.row[np.maximum(lp, 0)] == m.row[ops])
    has_src = e.src[ops] >= 0  # the ops' rows at once: a column at a time reads each row's cache line thrice
    for slot, key in ((0, "launch_latency_ns"), (1, "stream_turnaround_ns"), (2, "stream_turnaround_ns")):
        has = has_src[:, slot]
        if slot == 0:
            has &= ~orphan
            if driver_work is not None and len(driver_work) == len(ops):
                has &= ~driver_work
        elif slot == 1:
            # An op recorded starting before the op ahead of it on its stream ended (a profiler's stream that is
            # a line of nested or concurrent ops, an XLA module over its ops) is not queued behind it: its
            # measured overlap stays, a turnaround would serialize what the device ran together
            has &= m.delay[:, 1][ops] >= 0  # (a column's view, indexed: numpy's 2-d fancy index is slower)
        e.store("delay", (ops[has], slot), int(nom.get(key, 0)))
    # A wait on an event recorded before the capture is external (traceread.whatif.events): kept as measured
    held = m.external_ops
    for slot in range(3) if len(held) else ():
        e.store("delay", (held, slot), m.delay[held, slot].astype(_I64))
    ends = m.sync_end
    if not len(ends):
        return e
    own = m.time[ends] - m.time[m.src[ends, 0]]
    waited = m.src[ends, 1]
    waits = waited >= 0
    ret = m.time[ends] - np.where(waits, m.time[np.maximum(waited, 0)] + m.dur[np.maximum(waited, 0)], 0)
    bound_own = m.delay[ends, 0] == own  # the calibration gave the call's own edge its measured cost
    cost = _per_name(own, sync_names, bound_own, int(nom.get("sync_cost_ns", 0)))
    # A sync that waited for nothing (no op to wait for, or the op it waited for had ended before it began) keeps
    # its measured length: what it spent was its own (a cudaFree initializing the context or tearing down a
    # lazily loaded module with the GPU idle), not a wait the dependencies explain
    began = m.time[m.src[ends, 0]]
    done = m.time[np.maximum(waited, 0)] + m.dur[np.maximum(waited, 0)]
    cost = np.where(~waits | (done <= began), own, cost)
    e.store("delay", (ends, 0), cost)
    ret_nom = _per_name(ret, sync_names, waits & ~bound_own, int(nom.get("sync_return_ns", 0)))
    e.store("delay", (ends[waits], 1), ret_nom[waits])
    return e
