"""A Perfetto protobuf trace -> its tracks and slices, with the ``perfetto`` package's protobuf classes.

The file is a ``Trace``: repeated ``packet`` (field 1) records, decoded at once; a file that does not
decode whole (cut mid-packet, damaged) is split into its packets, each decoded alone, so every packet
before the damage is kept. Per packet sequence (``trusted_packet_sequence_id``)
the incremental state is kept as Perfetto defines it: interned event names, categories, debug
annotation names and string values (cleared by ``SEQ_INCREMENTAL_STATE_CLEARED``), the packet
defaults (default track, timestamp clock), and sequence-scoped clocks from ``clock_snapshot``
(incremental clocks add each packet's timestamp to the previous one; each is mapped to the trace
clock by its snapshot). Slices: ``TYPE_SLICE_BEGIN``/``TYPE_SLICE_END`` pairs per track, legacy
complete events (phase ``X`` with a duration), instants; counters are counted, not kept.

The trace processor of the ``perfetto`` package is never used (it downloads a binary at first use).
"""

from __future__ import annotations

import zlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import DecodeError
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace as PbTrace
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TracePacket, TrackEvent

from traceread.errors import TraceReadError
from traceread.loaders.detect import read_varint

SEQ_CLEARED = TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
BOOTTIME = 6  # Perfetto's default trace clock
SEQ_SCOPED_CLOCKS = range(64, 128)
_ANN_VALUES = ("int_value", "uint_value", "double_value", "bool_value", "string_value", "pointer_value",
               "legacy_json_value")


@dataclass
class Track:
    uuid: int
    parent: int = 0
    name: str = ""
    pid: int | None = None  # a process or thread descriptor's pid
    tid: int | None = None  # a thread descriptor's tid
    kind: str = "track"  # "process", "thread", "counter" or "track"


@dataclass
class Slices:
    """Decoded slices as columns (one entry per slice, in the order they ended)."""

    track: list[int] = field(default_factory=list)
    start: list[int] = field(default_factory=list)
    end: list[int] = field(default_factory=list)
    name: list[str] = field(default_factory=list)
    category: list[str] = field(default_factory=list)
    args: list[dict[str, Any]] = field(default_factory=list)
    flows: list[tuple[int, ...]] = field(default_factory=list)  # flow ids it starts, continues or ends
    correlation: list[int] = field(default_factory=list)  # TrackEvent.correlation_id, -1 when absent
    instant: list[bool] = field(default_factory=list)


@dataclass
class Decoded:
    tracks: dict[int, Track]
    slices: Slices
    notes: Counter[str]
    packets: int
    sequences: int
    truncated: bool = False


@dataclass
class _Sequence:
    names: dict[int, str] = field(default_factory=dict)
    categories: dict[int, str] = field(default_factory=dict)
    ann_names: dict[int, str] = field(default_factory=dict)
    ann_strings: dict[int, str] = field(default_factory=dict)
    default_track: int | None = None
    default_clock: int | None = None
    thread_track: int | None = None  # legacy packet-level thread_descriptor
    # sequence-scoped clock -> [current value, snapshot value, multiplier, trace-clock value at snapshot, incremental]
    clocks: dict[int, list[int]] = field(default_factory=dict)

    def clear(self) -> None:
        self.names.clear()
        self.categories.clear()
        self.ann_names.clear()
        self.ann_strings.clear()
        self.default_track = self.default_clock = None


def packets(path: str, data: bytes, notes: Counter[str]) -> tuple[list[bytes], bool]:
    """The packets' bytes (compressed packets inflated) and whether the file ends mid-packet."""
    out: list[bytes] = []
    cut = _split(path, data, out, notes)
    return out, cut


def _split(path: str, data: bytes, out: list[bytes], notes: Counter[str]) -> bool:
    i, n = 0, len(data)
    view = memoryview(data)
    while i < n:
        try:
            key, j = read_varint(data, i)
            wire = key & 7
            if wire == 2:
                size, j = read_varint(data, j)
            elif wire == 0:
                _, j = read_varint(data, j)
                size = 0
            else:
                raise TraceReadError(path, f"not a readable Perfetto trace (byte {i:,}: wire type {wire} where "
                                           "trace packets are expected)")
        except IndexError:
            return True
        if j + size > n:
            return True
        if key >> 3 == 1 and wire == 2:
            out.append(bytes(view[j:j + size]))
        elif key >> 3 != 1:
            notes["top-level fields other than packets (skipped)"] += 1
        i = j + size
    return False



def decode(path: str, data: bytes) -> Decoded:
    """Every track and slice of the Perfetto trace ``data`` (the bytes of ``path``)."""
    notes: Counter[str] = Counter()
    cut = False
    try:  # the whole message at once (decoded in C); a damaged file is read packet by packet
        queue: list[Any] = list(reversed(PbTrace.FromString(data).packet))
    except DecodeError:
        raw, cut = packets(path, data, notes)
        queue = list(reversed(raw))
    if not queue:
        raise TraceReadError(path, "not a readable Perfetto trace (no complete trace packet)")
    st = _State()
    count = 0
    while queue:
        p = queue.pop()
        if isinstance(p, bytes):
            try:
                p = TracePacket.FromString(p)
            except DecodeError:
                if count == 0:
                    raise TraceReadError(path, "not a readable Perfetto trace (its first packet does not decode)") \
                        from None
                notes["packets that do not decode (skipped)"] += 1
                continue
        count += 1
        data_field = p.WhichOneof("data")
        if data_field == "compressed_packets":
            try:
                inner = zlib.decompress(p.compressed_packets)
            except zlib.error:
                notes["compressed packets that do not inflate (skipped)"] += 1
                continue
            more: list[bytes] = []
            _split(path, inner, more, notes)
            queue.extend(reversed(more))
            continue
        seq = st.seqs.get(p.trusted_packet_sequence_id)
        if seq is None:
            seq = st.seqs[p.trusted_packet_sequence_id] = _Sequence()
        if p.sequence_flags & SEQ_CLEARED or p.incremental_state_cleared:
            seq.clear()
        if p.HasField("trace_packet_defaults"):
            d = p.trace_packet_defaults
            if d.HasField("timestamp_clock_id"):
                seq.default_clock = d.timestamp_clock_id
            if d.HasField("track_event_defaults") and d.track_event_defaults.HasField("track_uuid"):
                seq.default_track = d.track_event_defaults.track_uuid
        if p.HasField("interned_data"):
            _intern(seq, p)
        if data_field == "track_event":
            _event(p, seq, st, notes)
        elif data_field == "track_descriptor":
            _track(st.tracks, p.track_descriptor)
        elif data_field == "clock_snapshot":
            _snapshot(seq, p)
        elif data_field == "thread_descriptor":  # the legacy form: the sequence's events are this thread's
            td = p.thread_descriptor
            uuid = -(td.pid << 32 | td.tid) - 1  # a key no descriptor uses (uuids are positive)
            st.tracks.setdefault(uuid, Track(uuid, 0, text(td.thread_name), td.pid, td.tid, "thread"))
            seq.thread_track = uuid
    for stack in st.open.values():
        if stack:
            notes["slices begun and never ended (the capture stopped inside them; dropped)"] += len(stack)
    cols = [list(c) for c in zip(*st.rows, strict=True)] if st.rows else [[] for _ in range(9)]
    return Decoded(st.tracks, Slices(*cols), notes, count, len(st.seqs), cut)


@dataclass
class _State:
    tracks: dict[int, Track] = field(default_factory=dict)
    # slices as rows (track, start, end, name, category, args, flows, correlation, instant)
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    seqs: dict[int, _Sequence] = field(default_factory=dict)
    open: dict[int, list[tuple[Any, ...]]] = field(default_factory=dict)  # (start, name, ..., correlation)


def _snapshot(seq: _Sequence, p: TracePacket) -> None:
    snap = p.clock_snapshot
    values = {c.clock_id: c for c in snap.clocks}
    ref_id = snap.primary_trace_clock if snap.primary_trace_clock in values else BOOTTIME
    ref = values.get(ref_id)
    if ref is None:
        ref = next((c for c in snap.clocks if c.clock_id not in SEQ_SCOPED_CLOCKS), None)
    for c in snap.clocks:
        if c.clock_id in SEQ_SCOPED_CLOCKS:
            mult = c.unit_multiplier_ns or 1
            seq.clocks[c.clock_id] = [c.timestamp, c.timestamp, mult, ref.timestamp if ref is not None else 0,
                                      int(c.is_incremental)]


def text(value: Any) -> str:
    """A string field as text: a damaged file's invalid UTF-8 comes back as bytes from the decoder."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _intern(seq: _Sequence, p: TracePacket) -> None:
    d = p.interned_data
    for e in d.event_names:
        seq.names[e.iid] = text(e.name)
    for c in d.event_categories:
        seq.categories[c.iid] = text(c.name)
    for a in d.debug_annotation_names:
        seq.ann_names[a.iid] = text(a.name)
    for s in d.debug_annotation_string_values:
        seq.ann_strings[s.iid] = text(s.str)


def _track(tracks: dict[int, Track], d: Any) -> None:
    t = tracks.get(d.uuid) or Track(d.uuid)
    tracks[d.uuid] = t
    if d.HasField("parent_uuid"):
        t.parent = d.parent_uuid
    if d.HasField("name") or d.HasField("static_name"):
        t.name = text(d.name if d.HasField("name") else d.static_name)
    if d.HasField("process"):
        t.kind, t.pid = "process", d.process.pid
        t.name = t.name or text(d.process.process_name)
    if d.HasField("thread"):
        t.kind, t.pid, t.tid = "thread", d.thread.pid, d.thread.tid
        t.name = t.name or text(d.thread.thread_name)
    if d.HasField("counter"):
        t.kind = "counter"


def _timestamp(p: TracePacket, seq: _Sequence) -> int:
    ts = int(p.timestamp)
    if not seq.clocks:
        return ts
    clock = p.timestamp_clock_id if p.HasField("timestamp_clock_id") else seq.default_clock
    if clock is None or clock not in seq.clocks:
        return ts
    c = seq.clocks[clock]
    if c[4]:  # incremental: the packet holds the delta from the previous one on this clock
        c[0] += ts
        ts = c[0]
    return (ts - c[1]) * c[2] + c[3]


def _event(p: TracePacket, seq: _Sequence, st: _State, notes: Counter[str]) -> None:
    ev = p.track_event
    ts = _timestamp(p, seq)
    if ev.HasField("track_uuid"):
        track = ev.track_uuid
    elif seq.default_track is not None:
        track = seq.default_track
    elif seq.thread_track is not None:
        track = seq.thread_track
    else:
        track = 0
    kind = ev.type
    dur = None
    if kind == TrackEvent.TYPE_SLICE_END:
        stack = st.open.get(track)
        if not stack:
            notes["slice ends without a begin on their track (skipped)"] += 1
            return
        o = stack.pop()
        st.rows.append((track, o[0], max(ts, o[0]), *o[1:], False))
        return
    if kind == TrackEvent.TYPE_UNSPECIFIED and ev.HasField("legacy_event"):
        phase = chr(ev.legacy_event.phase) if 0 < ev.legacy_event.phase < 128 else ""
        if phase == "X":
            dur = int(ev.legacy_event.duration_us) * 1000
        kind = {"B": TrackEvent.TYPE_SLICE_BEGIN, "E": TrackEvent.TYPE_SLICE_END, "X": TrackEvent.TYPE_SLICE_BEGIN,
                "I": TrackEvent.TYPE_INSTANT, "i": TrackEvent.TYPE_INSTANT}.get(phase, 0)
        if kind == TrackEvent.TYPE_SLICE_END:
            stack = st.open.get(track)
            if stack:
                o = stack.pop()
                st.rows.append((track, o[0], max(ts, o[0]), *o[1:], False))
            return
    if kind == TrackEvent.TYPE_COUNTER:
        notes["counter values (not events)"] += 1
        return
    if kind not in (TrackEvent.TYPE_SLICE_BEGIN, TrackEvent.TYPE_INSTANT):
        notes["track events of no slice type (skipped)"] += 1
        return
    which = ev.WhichOneof("name_field")
    name = text(ev.name) if which == "name" else seq.names.get(ev.name_iid, "") if which == "name_iid" else ""
    if ev.categories:
        cat = text(ev.categories[0])
    elif ev.category_iids:
        cat = seq.categories.get(ev.category_iids[0], "")
    else:
        cat = ""
    args = _annotations(ev, seq) if ev.debug_annotations else {}
    flows = tuple(ev.flow_ids)
    if ev.terminating_flow_ids or ev.flow_ids_old or ev.terminating_flow_ids_old:
        flows += tuple(ev.flow_ids_old) + tuple(ev.terminating_flow_ids) + tuple(ev.terminating_flow_ids_old)
    corr = int(ev.correlation_id) if ev.WhichOneof("correlation_id_field") == "correlation_id" else -1
    if kind == TrackEvent.TYPE_INSTANT:
        st.rows.append((track, ts, ts, name, cat, args, flows, corr, True))
    elif dur is not None:
        st.rows.append((track, ts, ts + max(dur, 0), name, cat, args, flows, corr, False))
    else:
        st.open.setdefault(track, []).append((ts, name, cat, args, flows, corr))


# The annotations the frame reads (correlation, the agent, Kineto's metadata); others are not kept.
USED_ANNOTATIONS = frozenset({"corr_id", "correlation_id", "correlation", "agent", "dst_agent", "metadata"})


def _annotations(ev: Any, seq: _Sequence) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for a in ev.debug_annotations:
        which = a.WhichOneof("name_field")
        key = text(a.name) if which == "name" else seq.ann_names.get(a.name_iid, "") if which == "name_iid" else ""
        if key not in USED_ANNOTATIONS:
            continue
        kind = a.WhichOneof("value")
        if kind == "string_value_iid":
            out[key] = seq.ann_strings.get(a.string_value_iid, "")
        elif kind in _ANN_VALUES:
            v = getattr(a, kind)
            out[key] = text(v) if isinstance(v, (str, bytes)) else v
    return out
