"""Perfetto protobuf traces (``.pftrace``) -> the normalized events frame.

Written by rocprofv3 (``--output-format pftrace``) and by PyTorch's Kineto Perfetto output. The
pipeline: ``decode`` (the packets, with the ``perfetto`` package's protobuf classes: tracks, slices,
interned names, annotations, flows, clocks) -> ``frame`` (places, lanes, correlation). One rank per
file (from the file name, ``rank3``/``worker3``, as for Kineto; else 0); times are the trace clock's ns (time base ``relative``: a Perfetto trace clock,
boot time by default, has no known epoch). Nothing is downloaded or run: Perfetto's trace processor
is not used.
"""

from __future__ import annotations

import os

from traceread import schema
from traceread.errors import TraceReadError
from traceread.limits import check_events
from traceread.loaders.detect import DIAGNOSIS_TRACK, FORMATS, TRACEREAD_PERFETTO
from traceread.loaders.kineto.frame import profiler_steps
from traceread.loaders.kineto.meta import rank_of
from traceread.loaders.perfetto.decode import decode
from traceread.loaders.perfetto.frame import build, device_names
from traceread.note import PACKET_CUT, PACKETS_COUNTED, Note
from traceread.trace import DeviceInfo, RankInfo, Trace, TraceMeta


def load_perfetto(path: str | os.PathLike[str], progress: bool = False) -> Trace:
    """Load one Perfetto protobuf trace; TraceReadError (one line) when it cannot be read."""
    path = os.fspath(path)
    with open(path, "rb") as fh:
        data = fh.read()
    d = decode(path, data)
    del data
    if any(t.name.startswith(DIAGNOSIS_TRACK) for t in d.tracks.values()):
        raise TraceReadError(path, f"not a trace: {FORMATS[TRACEREAD_PERFETTO]}")
    if not d.slices.start:  # a system trace (ftrace, counters), or one whose events were lost: nothing to read
        why = ", ".join(f"{what}: {count:,}" for what, count in sorted(d.notes.items()))
        raise TraceReadError(path, f"a Perfetto protobuf trace holding no track-event slice ({d.packets:,} packets"
                                   + (f"; {why}" if why else "") + ")")
    check_events(len(d.slices.start))
    warnings: list[Note | str] = []
    rank, rank_source, world, world_source = rank_of(path, {}, warnings)  # a rank in the file name
    try:
        events, facts = build(path, d, rank)
    except ValueError as exc:
        raise TraceReadError(path, f"not a readable Perfetto trace ({exc})") from None
    schema.validate(events)
    warnings += [Note.of(PACKETS_COUNTED, what=what, count=count) for what, count in sorted(d.notes.items())]
    if d.truncated:
        warnings.append(Note.of(PACKET_CUT))
    steps = profiler_steps(events, rank, warnings)
    names = device_names(d.tracks)
    devices = [DeviceInfo(rank=rank, id=dev, name=names.get(dev, ""), used=True) for dev in facts["devices"]]
    writer = "rocprofv3" if any(t.name.startswith(("COMPUTE ", "COPY to AGENT")) for t in d.tracks.values()) \
        else "kineto" if any(t.name == "Kineto Trace" for t in d.tracks.values()) else "unknown writer"
    meta = TraceMeta(
        path=path,
        format="perfetto",
        generation=f"perfetto protobuf ({writer})",
        time_base=schema.TIME_RELATIVE,
        devices=devices,
        ranks=[RankInfo(rank=rank, rank_source=rank_source, world_size=world, world_size_source=world_source,
                        pid=facts["pid"])],
        steps=steps,
        warnings=warnings,
        truncated=d.truncated,
        extra={"packets": d.packets, "sequences": d.sequences, "tracks": len(d.tracks), "writer": writer,
               # events that are not rows (counter values, unmatched ends...): a count, as Kineto's
               "non_row_events": sum(d.notes.values()), "notes": dict(d.notes)},
    )
    return Trace(events=events, meta=meta)
