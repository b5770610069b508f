"""Flow arrows of the annotated Perfetto trace: launch -> GPU op, and gap -> its evidence.

Perfetto's TrackEvent flows: a slice whose begin event lists an id in ``flow_ids`` starts an arrow,
and the slice that lists the same id in ``terminating_flow_ids`` ends it (the protobuf form of the
JSON trace-event ``ph: s``/``f`` pair). Arrows join only slices that are written (both ends inside
the drawn steps), so none dangles.

* launch -> GPU op: a CUDA/HIP runtime or driver call and the kernels, copies and memsets with its
  correlation id (one arrow per GPU op; a graph launch has one per kernel of the graph).
* gap -> evidence: from a gap's slice on the diagnosis track to the event its class rests on: for
  comm-bound the communication kernel overlapping it longest, for data-starved the copy or memset
  overlapping it longest, otherwise (and when those have none) the launch call of the kernel that
  ended the gap (``next_launch_start_ns``: a late launch is visible as an arrow).

Pairs are found by column joins (no Python loop per event); the result maps each event row (per
trace) and each gap row to the flow ids its slice starts and ends.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import cast

import numpy as np
import pandas as pd

from traceread import causes, schema
from traceread.analysis import Analysis
from traceread.intervals import longest_overlap
from traceread.render import timeline

_LAUNCH_CATS = (schema.CAT_RUNTIME, schema.CAT_DRIVER)
# A gap class -> the GPU lanes its gaps wait on (its record's evidence_lanes): a flow arrow from that work to the gap.
_EVIDENCE_LANES = {c.name: c.evidence_lanes for c in causes.gap_classes() if c.evidence_lanes}


@dataclass
class Flows:
    """``outgoing[key]`` / ``incoming[key]``: flow ids a slice starts / ends; keys are
    ``("ev", trace, event row)`` and ``("gap", gap row)``."""

    outgoing: dict[tuple, list[int]] = field(default_factory=lambda: defaultdict(list))
    incoming: dict[tuple, list[int]] = field(default_factory=lambda: defaultdict(list))
    next_id: int = 1
    launch_pairs: int = 0
    gap_pairs: int = 0
    _rows: dict[tuple, np.ndarray] = field(default_factory=dict)

    def add(self, src: list[tuple], dst: list[tuple]) -> None:
        for s, d in zip(src, dst, strict=True):
            self.outgoing[s].append(self.next_id)
            self.incoming[d].append(self.next_id)
            self.next_id += 1

    def of_events(self, trace: int, rows: np.ndarray) -> list[tuple[list[int], list[int]]] | None:
        """Per event row of ``trace``, (ids its slice starts, ids it ends); None when none has a flow."""
        return self._of(rows, lambda r: ("ev", trace, r), ("ev", trace))

    def of_gaps(self, rows: np.ndarray) -> list[tuple[list[int], list[int]]] | None:
        """Per gap row, (ids its slice starts, ids it ends); None when none has a flow."""
        return self._of(rows, lambda r: ("gap", r), ("gap",))

    def _of(self, rows: np.ndarray, key: Callable[[int], tuple], prefix: tuple) -> list | None:
        if prefix not in self._rows:  # the rows holding a flow, per kind of slice, once
            keys = {k for k in (*self.outgoing, *self.incoming) if k[:-1] == prefix}
            self._rows[prefix] = np.fromiter((k[-1] for k in keys), dtype=np.int64, count=len(keys))
        hit = np.isin(np.asarray(rows, dtype=np.int64), self._rows[prefix])
        if not hit.any():
            return None
        none: tuple[list[int], list[int]] = ([], [])
        return [(self.outgoing.get(key(r), []), self.incoming.get(key(r), [])) if h else none
                for r, h in zip(np.asarray(rows).tolist(), hit.tolist(), strict=True)]


def _rows(a: Analysis, t: int, rank: int, dev: int | None, wins: pd.DataFrame, lanes: tuple[str, ...]) -> np.ndarray:
    """Event rows the renderer writes for this unit and these windows (each once)."""
    parts = [e.index.to_numpy() for e in timeline.window_events(a, t, rank, dev, wins, lanes)]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def build(a: Analysis, wins: pd.DataFrame) -> Flows:
    """Every flow of the trace the renderer writes for ``wins`` (``timeline.windows``)."""
    flows = Flows()
    for key, g in wins.groupby(["trace", "rank"], sort=True):
        t, rank = (int(k) for k in cast("tuple[int, int]", key))
        ev = a.inputs[t].events
        host = ev.loc[_rows(a, t, rank, None, g, timeline.HOST_LANES)]
        launches = host[host["category"].isin(_LAUNCH_CATS).to_numpy() & (host["correlation"].to_numpy() >= 0)]
        by_corr = launches[~launches["correlation"].duplicated(keep="first")]
        by_start = launches[~launches["start_ns"].duplicated(keep="first")]
        for dev_key, gd in g.groupby("device", sort=True):
            dev = int(cast(int, dev_key))
            gpu = ev.loc[_rows(a, t, rank, dev, gd, timeline.DEVICE_LANES)]
            pairs = gpu[gpu["correlation"].to_numpy() >= 0].reset_index(names="gpu_row").merge(
                by_corr.reset_index(names="host_row")[["correlation", "host_row"]], on="correlation")
            flows.add([("ev", t, int(r)) for r in pairs["host_row"].tolist()],
                      [("ev", t, int(r)) for r in pairs["gpu_row"].tolist()])
            flows.launch_pairs += len(pairs)
            _gap_flows(flows, a, t, rank, dev, gd, gpu, by_start)
    return flows


def _gap_flows(flows: Flows, a: Analysis, t: int, rank: int, dev: int, wins: pd.DataFrame, gpu: pd.DataFrame,
               launches: pd.DataFrame) -> None:
    g = a.gaps
    if g.empty:
        return
    g = g[(g["trace"] == t) & (g["rank"] == rank) & (g["device"] == dev) & g["step"].isin(wins["step"])]
    g = g.sort_values("start_ns", kind="stable")
    if g.empty:
        return
    target = np.full(len(g), -1, dtype=np.int64)  # event row of the evidence
    cls = g["class"].astype(str).to_numpy()
    for name, lanes in _EVIDENCE_LANES.items():
        m = cls == name
        cand = gpu[gpu["lane"].isin(lanes).to_numpy()]
        if m.any() and len(cand):
            length, idx = longest_overlap(g["start_ns"].to_numpy()[m], g["end_ns"].to_numpy()[m],
                                          cand["start_ns"].to_numpy(), cand["end_ns"].to_numpy())
            target[np.flatnonzero(m)] = np.where(length > 0, cand.index.to_numpy()[np.maximum(idx, 0)], -1)
    rest = target < 0
    if rest.any() and len(launches):
        nl = pd.DataFrame({"pos": np.flatnonzero(rest), "start_ns": g["next_launch_start_ns"].to_numpy()[rest]})
        hit = nl.merge(launches.reset_index(names="row")[["start_ns", "row"]], on="start_ns")
        target[hit["pos"].to_numpy()] = hit["row"].to_numpy()
    has = target >= 0
    flows.add([("gap", int(r)) for r in g.index.to_numpy()[has].tolist()],
              [("ev", t, int(r)) for r in target[has].tolist()])
    flows.gap_pairs += int(has.sum())
