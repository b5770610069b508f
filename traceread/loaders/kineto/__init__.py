"""PyTorch profiler (Kineto) Chrome-trace JSON -> the normalized events frame.

Accepts ``.json``/``.json.gz``/``.pt.trace.json(.gz)``/``.json.tmp``, the object and the 2021 bare
list forms, every category generation 2020-2026 (see ``categories``), ROCm and MTIA
traces, string or int pid/tid, int or float timestamps. The file is streamed in bounded chunks and
decoded in parallel (``stream``); timestamps become exact int64 ns without float64.

Rows: every ``X`` (complete) and ``i`` (instant) event; flows (``s``/``f``), counters and metadata
(``M``) are not rows (thread/process names from ``M`` rows go to ``meta.extra``; counters are
counted there). "Stream Sync" rows that Kineto 2026-04+ writes at ``tid = stream + 1,000,000`` are
synchronizations of that stream (``categories.SYNC_STREAM_TID_OFFSET``). Rows keep the
file's order (Kineto groups them by producer: CPU ops, then GPU activity); sort by ``start_ns``
where order matters. Side tables (``schema.SIDE_TABLES``) hold kernel launch
configuration, copy sizes, collective args (NCCL kernels and ``record_param_comms``) and input
shapes.

The pipeline, one module per stage: ``source`` (plain or gzip bytes) -> ``stream`` (one, two or
more decoders; ``split`` runs the second half on a thread or a forked child, ``chunks`` is one
decoder's loop over a ``window`` of the text) -> ``scan`` (the compiled scanner, ``_cscan.c``) or
``decode`` (msgspec over the ``events`` structs; ``text`` does the exact byte-level work) ->
``frame`` (the rows and side tables, with ``categories``) -> ``meta`` (ranks, devices, time base).
"""

from __future__ import annotations

import traceread.loaders.kineto.meta as km
from traceread import schema
from traceread.errors import TraceReadError
from traceread.loaders.kineto.frame import FrameBuilder, profiler_steps
from traceread.loaders.kineto.stream import read_stream
from traceread.loaders.memory import load_settings
from traceread.loaders.parallel import SERIAL, Parallel
from traceread.note import EVENTS_COUNTED, EVENTS_REPAIRED, EVENTS_SKIPPED, NO_EVENTS, Note
from traceread.trace import Trace, TraceMeta


def load_kineto(path: str, progress: bool = False, workers: int | None = None,
                parallel: Parallel = SERIAL) -> Trace:
    """Load one Kineto trace. ``workers``: decoders at most (default: ``parallel.cores``); ``parallel`` starts
    the second decoder, the worker pool and the gunzip read-ahead (the default: none, one decoder inline).

    Raises :class:`TraceReadError` for files that are not traces (bad JSON at the top, no
    ``traceEvents``, empty, broken gzip). A truncated file loads every complete event before the
    cut, with ``meta.truncated`` set and a warning saying where it stopped.
    """
    builder = FrameBuilder()
    with load_settings():
        stream = read_stream(path, builder, progress=progress, workers=workers, parallel=parallel)
        if builder.n == 0 and stream.bare_list:
            raise TraceReadError(path, "not a trace: the top-level list holds no trace events")
        rank_notes: list[Note | str] = []
        rank, rank_source, world, world_source = km.rank_of(path, stream.top, rank_notes)
        events, side = builder.build(path, rank)
    wrapped = events["end_ns"].to_numpy() < events["start_ns"].to_numpy()
    if wrapped.any():  # ts + dur past int64 ns (a duration of 2^53 us on an epoch timestamp): not a time
        raise TraceReadError(path, f"{int(wrapped.sum()):,} event(s) end past 2^63-1 ns (ts + dur does not fit "
                                   "int64 nanoseconds): not a time")
    schema.validate(events)
    base, offset, base_note = km.time_base(stream.top, events)
    warnings: list[Note | str] = [*stream.warnings, *rank_notes]
    devices, device_notes = km.devices(stream.top, events, rank)
    warnings += device_notes
    warnings += _note_lines(builder.notes)
    if base_note and len(events):
        warnings.append(base_note)
    if not len(events):
        warnings.append(Note.of(NO_EVENTS))
    steps = profiler_steps(events, rank, warnings)
    extra = {
        **km.thread_names(builder.meta_rows, builder.string_ids),
        "versions": km.versions(stream.top),
        "string_ids": dict(builder.string_ids),
        "bare_list": stream.bare_list,
        "json_bytes": stream.json_bytes,
        "non_row_events": builder.other_events,
        "counter_events": builder.counter_events,  # of the non-row events, counter samples (ph C)
        "stream_sync_rows": builder.stream_sync_rows,  # Stream Sync rows at tid = stream + 1,000,000 (2026-04+)
        "raw_categories": list(builder.cat_ids),  # as written (sanity: counter-only captures)
        "kineto_decoder": builder.decoder_summary(),
        # integer-microsecond timestamps (PyTorch 1.13-2.3): a recorded duration is off by up to 1 us
        "timestamp_quantum_ns": 1 if builder.float_ts else 1_000,
    }
    meta = TraceMeta(
        path=path,
        format="kineto",
        generation=km.generation(stream.top, stream.bare_list, list(builder.cat_ids), builder.float_ts),
        time_base=base,
        epoch_offset_ns=offset,
        devices=devices,
        ranks=[km.rank_info(rank, rank_source, world, world_source, events)],
        profiler_options=km.profiler_options(stream.top),
        distributed=km.distributed(stream.top),
        steps=steps,
        warnings=warnings,
        truncated=stream.truncated,
        extra=extra,
        job=km.job(stream.top),
        trace_id=km.trace_id(stream.top),
    )
    return Trace(events=events, meta=meta, side=side)


def _note_lines(notes: dict[str, int]) -> list[Note]:
    """Per-event problems, counted, as notes (worded by ``render.notes``)."""
    out = []
    for what, count in sorted(notes.items()):
        if what.startswith("repaired: "):
            out.append(Note.of(EVENTS_REPAIRED, what=what[len("repaired: "):], count=count))
        elif what.startswith("skipped: "):
            out.append(Note.of(EVENTS_SKIPPED, what=what[len("skipped: "):], count=count))
        else:
            out.append(Note.of(EVENTS_COUNTED, what=what, count=count))
    return out
