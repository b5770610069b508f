"""The annotated Perfetto trace: ``render(analysis, out, steps="key"|"all")``.

Written packet by packet with the ``perfetto`` package's streaming builder, so memory stays bounded
by one step's events. Per rank: the CPU threads; per GPU: compute streams, the communication lane,
copies, a ``steps`` track, and a ``traceread diagnosis`` track whose slices are the classified gaps,
named by class, with the evidence as debug annotations; flow arrows from each launch call to its GPU
ops and from each gap to its evidence (:mod:`traceread.render.perfetto_flows`). Open it in ui.perfetto.dev.

Timestamps are the trace's own ns (Perfetto needs them non-negative: shifted when they are not).
Every id a trace supplies (rank, device, stream, thread) is only a label here: process ids and
track order are small sequential numbers, so any trace the analysis accepts can be written
(Perfetto's pid and sibling order are int32; ranks and nsys device ids can be far larger).
"""

from __future__ import annotations

import zlib
from typing import IO, cast

import numpy as np
import pandas as pd
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TracePacket, TrackEvent
from perfetto.trace_builder.proto_builder import StreamingTraceProtoBuilder

from traceread import schema
from traceread.analysis import Analysis
from traceread.analysis.findings import Findings
from traceread.engine.gaps import with_fractions
from traceread.render import perfetto_flows, timeline
from traceread.render.names import scrub_paths
from traceread.render.perfetto_flows import Flows

SEQ_ID = 1
DIAGNOSIS_TRACK = "traceread diagnosis"
_GAP_ANNOTATIONS = ("dur_ns", "phase", "comm_frac", "memcpy_htod_frac", "dataloader_frac", "sync_frac",
                    "cpu_runtime_frac", "launch_count", "longest_cpu_name", "python_frame", "next_kernel_name")


def _uuid(*key: object) -> int:
    """A stable 63-bit track id from a tuple key (same input, same file)."""
    text = "/".join(map(str, key)).encode()
    return (zlib.crc32(text) << 31 | zlib.adler32(text)) & 0x7FFF_FFFF_FFFF_FFFF or 1


class _Writer:
    def __init__(self, out: IO[bytes], shift: int) -> None:
        self.builder = StreamingTraceProtoBuilder(out)
        self.shift = shift
        self.first = True
        self.tracks: set[int] = set()
        self.slices = 0
        self.pids: dict[tuple[int, int], int] = {}

    def pid(self, trace: int, rank: int) -> int:
        """A small process id per (trace, rank), in the order they are written."""
        return self.pids.setdefault((trace, rank), len(self.pids) + 1)

    def _packet(self) -> TracePacket:
        p = self.builder.create_packet()
        p.trusted_packet_sequence_id = SEQ_ID
        if self.first:
            p.sequence_flags = TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
            self.first = False
        return p

    def track(self, uuid: int, name: str, parent: int | None = None, pid: int | None = None,
              order: int = 0) -> int:
        if uuid in self.tracks:
            return uuid
        p = self._packet()
        d = p.track_descriptor
        d.uuid = uuid
        if pid is not None:
            d.process.pid = pid
            d.process.process_name = name
        else:
            d.name = name
            d.sibling_order_rank = order
        if parent is not None:
            d.parent_uuid = parent
        d.child_ordering = d.EXPLICIT
        self.builder.write_packet(p)
        self.tracks.add(uuid)
        return uuid

    def _event(self, track: int, ts: int, kind: int, name: str = "", args: dict | None = None,
               flow: tuple[list[int], list[int]] | None = None) -> None:
        p = self._packet()
        p.timestamp = int(ts) + self.shift
        ev = p.track_event
        ev.type = kind
        ev.track_uuid = track
        if kind == TrackEvent.TYPE_SLICE_BEGIN:
            ev.name = name
            if flow is not None:
                ev.flow_ids.extend(flow[0])
                ev.terminating_flow_ids.extend(flow[1])
            for k, v in (args or {}).items():
                a = ev.debug_annotations.add()
                a.name = k
                if isinstance(v, (bool, np.bool_)):
                    a.bool_value = bool(v)
                elif isinstance(v, (int, np.integer)):
                    a.int_value = int(v)
                elif isinstance(v, (float, np.floating)):
                    a.double_value = float(v)
                else:
                    a.string_value = str(v)
        self.builder.write_packet(p)

    def slices_on(self, track: int, starts: np.ndarray, ends: np.ndarray, names: list[str],
                  args: list[dict] | None = None, flows: list[tuple[list[int], list[int]]] | None = None) -> None:
        """Emit slices on one track, properly nested (a child sticking out is clipped to its parent);
        ``flows``: per slice, the flow ids it starts and ends (``perfetto_flows``)."""
        order = np.lexsort((-ends, starts))
        stack: list[int] = []
        for i in order:
            s, e = int(starts[i]), int(ends[i])
            while stack and stack[-1] <= s:
                self._event(track, stack.pop(), TrackEvent.TYPE_SLICE_END)
            if stack and e > stack[-1]:
                e = stack[-1]
            self._event(track, s, TrackEvent.TYPE_SLICE_BEGIN, names[i], args[i] if args else None,
                        flows[i] if flows else None)
            stack.append(e)
            self.slices += 1
        while stack:
            self._event(track, stack.pop(), TrackEvent.TYPE_SLICE_END)


def _gap_args(g: pd.DataFrame, findings: Findings) -> list[dict]:
    g = findings.with_evidence(with_fractions(g))
    cols = ["evidence"] + [c for c in _GAP_ANNOTATIONS if c in g.columns]
    data = {c: g[c].tolist() for c in cols}
    out = []
    for i in range(len(g)):
        d = {}
        for c in cols:
            v = data[c][i]
            if isinstance(v, str):
                v = scrub_paths(v)
                if not v:
                    continue
            d[c] = v
        out.append(d)
    return out


def _emit_unit(w: _Writer, a: Analysis, t: int, rank: int, dev: int, slot: int, wins: pd.DataFrame,
               flows: Flows) -> None:
    """One GPU's tracks; ``slot`` is the GPU's place among its rank's GPUs (orders its tracks)."""
    proc = w.track(_uuid("rank", t, rank), a.unit_label(t, rank, dev).split(" / ")[0], pid=w.pid(t, rank))
    steps_track = w.track(_uuid("steps", t, rank, dev), f"GPU {dev} steps", proc, order=100 + 10 * slot)
    diag = w.track(_uuid("diag", t, rank, dev), f"{DIAGNOSIS_TRACK} GPU {dev}", proc, order=101 + 10 * slot)
    labels = [f"step {s}" + (f" ({lab})" if lab else "")
              for s, lab in zip(wins["step"], wins["label"], strict=True)]
    w.slices_on(steps_track, wins["start_ns"].to_numpy(), wins["end_ns"].to_numpy(), labels)
    g = a.gaps
    if len(g):
        g = g[(g["trace"] == t) & (g["rank"] == rank) & (g["device"] == dev) & g["step"].isin(wins["step"])]
        w.slices_on(diag, g["start_ns"].to_numpy(), g["end_ns"].to_numpy(), g["class"].astype(str).tolist(),
                    _gap_args(g, a.findings), flows.of_gaps(g.index.to_numpy()))
    for gpu in timeline.window_events(a, t, rank, dev, wins, timeline.DEVICE_LANES):
        for (lane_key, stream), e in gpu.groupby([gpu["lane"].astype(str), "stream"], sort=True):
            lane = str(lane_key)  # grouped by the lane as text
            kind = {schema.LANE_GPU_COMPUTE: "stream", schema.LANE_GPU_COMM: "comm stream"}.get(lane, lane)
            trk = w.track(_uuid("gpu", t, rank, dev, lane, stream), f"GPU {dev} {kind} {stream}", proc,
                          order=110 + 10 * slot + list(timeline.DEVICE_LANES).index(lane))
            w.slices_on(trk, e["start_ns"].to_numpy(), e["end_ns"].to_numpy(), e["name"].astype(str).tolist(),
                        flows=flows.of_events(t, e.index.to_numpy()))


def host_track_name(tid: int, lanes: pd.Series) -> str:
    """``CPU thread 1234``; a negative tid is no OS thread (the profiler's own rows, such as Kineto's
    user annotations, or an id it could not record), so the track says what its events are instead."""
    if tid >= 0:
        return f"CPU thread {tid}"
    annotations = bool((lanes.astype(str) == schema.LANE_CPU_ANNOTATION).all())
    return f"host {'annotations' if annotations else 'thread'} (unknown tid: recorded as {tid})"


def _emit_host(w: _Writer, a: Analysis, t: int, rank: int, wins: pd.DataFrame, flows: Flows) -> None:
    proc = _uuid("rank", t, rank)
    for host in timeline.window_events(a, t, rank, None, wins, timeline.HOST_LANES):
        for tid, e in host.groupby("tid", sort=True):
            trk = w.track(_uuid("cpu", t, rank, tid), host_track_name(int(cast(int, tid)), e["lane"]), proc,
                          order=int(cast(int, tid)) % 100)
            names = [scrub_paths(n) for n in e["name"].astype(str).tolist()]
            w.slices_on(trk, e["start_ns"].to_numpy(), e["end_ns"].to_numpy(), names,
                        flows=flows.of_events(t, e.index.to_numpy()))


def render(a: Analysis, out: IO[bytes], steps: str = "key") -> None:
    """Stream the annotated trace into ``out`` (binary). ``steps``: ``key`` (median, worst) or ``all``."""
    wins = timeline.windows(a, steps)
    # Events overlapping a window may start before it (a host op a millisecond before the first
    # kernel of a trace whose time base starts there): the shift covers every event, not the windows.
    starts = [int(x) for x in wins["start_ns"]] + [int(t.events["start_ns"].min()) for t in a.inputs
                                                  if len(t.events)]
    lo = min([0] + starts)
    w = _Writer(out, shift=-lo if lo < 0 else 0)
    flows = perfetto_flows.build(a, wins)
    slots: dict[tuple[int, int], int] = {}
    for key, g in wins.groupby(["trace", "rank", "device"], sort=True):
        t, rank, dev = cast("tuple[int, int, int]", key)
        slot = slots[(int(t), int(rank))] = slots.get((int(t), int(rank)), -1) + 1
        _emit_unit(w, a, int(t), int(rank), int(dev), slot, g, flows)
    # Host threads once per rank (several GPUs share them), over the union of that rank's windows.
    for key, g in wins.groupby(["trace", "rank"], sort=True):
        t, rank = cast("tuple[int, int]", key)
        _emit_host(w, a, int(t), int(rank), g, flows)
