"""``traceread info TRACE...``: what each trace holds (format, devices, ranks, time, event counts)."""

from __future__ import annotations

import datetime as dt

import click

from traceread.cli.output import emit, json_option
from traceread.frame.summary import TraceSummary, summarize
from traceread.render.notes import text as note_text
from traceread.runner import load
from traceread.trace import Trace


def _dur(ns: int) -> str:
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3f} {unit}"
    return f"{ns} ns"


def _when(s: TraceSummary, ns: int | None) -> str:
    if ns is None or s.epoch_offset_ns is None:
        return ""
    t = dt.datetime.fromtimestamp((ns + s.epoch_offset_ns) / 1e9, tz=dt.timezone.utc)
    return t.strftime("%Y-%m-%d %H:%M:%S UTC")


def _device(d: dict) -> str:
    bits = [f"{d['sm_count']} SMs" if d["sm_count"] else "", f"{d['memory_bytes'] / 2**30:.1f} GiB"
            if d["memory_bytes"] else "", f"cc {d['compute_capability']}" if d["compute_capability"] else ""]
    extra = ", ".join(b for b in bits if b)
    return f"device {d['id']}: {d['name'] or '(unnamed)'}" + (f" ({extra})" if extra else "")


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k or '(none)'} {v:,}" for k, v in counts.items()) or "(none)"


def loaded_by(trace: Trace) -> dict | None:
    """Which decoder read a Kineto file (None for other formats): the compiled scanner, msgspec."""
    dec = trace.meta.extra.get("kineto_decoder")
    if dec is None:
        return None
    from traceread.loaders.kineto import scan

    return {**dec, "installation": scan.status()}


def _decoder_line(dec: dict) -> str:
    share = dec["scanner_share"]
    if dec["scanner_chunks"] == 0:
        reasons = set(dec["fallback_reasons"])
        if reasons <= {"scanner not built", "scanner switched off"}:
            return dec["installation"]
        return f"msgspec (the compiled scanner refused: {', '.join(sorted(reasons))})"
    if dec["msgspec_chunks"] == 0:
        return f"compiled scanner ({dec['scanner_chunks']:,} chunks)"
    return (f"compiled scanner for {share:.1%} of the JSON, msgspec for {dec['msgspec_chunks']:,} chunk(s) "
            f"({', '.join(sorted(dec['fallback_reasons']))})")


def _table(s: TraceSummary, dec: dict | None = None) -> str:
    rows = [("format", f"{s.format}: {s.generation}")]
    if dec is not None:
        rows.append(("loaded by", _decoder_line(dec)))
    devs = [_device(d) for d in s.devices_used] or ["(no GPU events)"]
    if s.devices_listed_unused:
        devs.append(f"{s.devices_listed_unused} more listed, unused")
    rows += [("devices" if i == 0 else "", d) for i, d in enumerate(devs)]
    for r in s.ranks:
        world = f"{r['world_size']} ({r['world_size_source']})" if r["world_size"] else "unknown"
        rows.append(("rank", f"{r['rank']} ({r['rank_source']}); world size {world}"))
    rows.append(("time base", s.time_base + (" (Unix epoch known)" if s.epoch_offset_ns is not None else "")))
    when = _when(s, s.start_ns)
    rows.append(("time span", _dur(s.span_ns) + (f", from {when}" if when else "")))
    rows.append(("events", f"{s.events:,}" + (" (file truncated: events before the cut)" if s.truncated else "")))
    rows.append(("per lane", _counts(s.events_per_lane)))
    rows.append(("per category", _counts(s.events_per_category)))
    rows.append(("raw categories", _counts(s.events_per_raw_category)))
    if s.counter_events:
        rows.append(("counters", f"{s.counter_events:,} counter events (ph C): samples, not rows of the timeline"))
    steps = f"{s.profiler_steps}" + (f" (#{s.step_range[0]}..#{s.step_range[1]})" if s.step_range else "")
    rows.append(("profiler steps", steps))
    if s.job_digest:
        rows.append(("job", f"named by the file (PT_PROFILER_JOB_*), digest {s.job_digest} (values not shown)"))
    if s.profiler_options:
        rows.append(("options", ", ".join(f"{k}={v}" for k, v in s.profiler_options.items())))
    rows += [("warnings" if i == 0 else "", w) for i, w in enumerate([note_text(w) for w in s.warnings] or ["(none)"])]
    width = max(len(k) for k, _ in rows)
    return "\n".join([f"== {s.path}"] + [f"  {k:<{width}}  {v}" for k, v in rows])


@click.command("info")
@click.argument("traces", nargs=-1, required=True, type=click.Path(dir_okay=False))
@json_option
def command(traces: tuple[str, ...], json_path: str | None) -> None:
    """Show what each trace holds: format, devices, ranks, time base and span, event counts, steps."""
    loaded = [load(path, progress=True) for path in traces]
    summaries = [summarize(t) for t in loaded]
    decoders = [loaded_by(t) for t in loaded]
    del loaded
    emit("\n\n".join(_table(s, d) for s, d in zip(summaries, decoders, strict=True)),
         {"traces": [{**s.to_dict(), "warnings": [note_text(w) for w in s.warnings], **({"loaded_by": d} if d is not None else {})}
                     for s, d in zip(summaries, decoders, strict=True)]}, json_path)
