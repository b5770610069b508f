"""Loading an XSpace or its trace-viewer JSON into a Trace (see the package doc)."""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from traceread import schema
from traceread.errors import TraceReadError
from traceread.loaders.xplane import meta as xm
from traceread.loaders.xplane import model as M
from traceread.loaders.xplane.decode import Damaged, decode
from traceread.loaders.xplane.frame import HOST_PLANE, build, kernel_args
from traceread.loaders.xplane.sniff import FORMAT, FORMAT_VIEWER, looks_like_xplane
from traceread.note import NO_EVENTS, NO_HOST_PLANE, TPU_NO_LAUNCHES, VIEWER_DROPPED_EVENTS, Note
from traceread.trace import RankInfo, SideTables, Trace, TraceMeta


def load_xplane(path: str | os.PathLike[str]) -> Trace:
    """Load an ``.xplane.pb``; raises TraceReadError naming the format for a damaged file."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise TraceReadError(path, f"cannot read ({exc.strerror or exc})") from None
    if not looks_like_xplane(data[:64]):
        raise TraceReadError(path, "not an XSpace protobuf (.xplane.pb): its first bytes are no XPlane")
    try:
        d = decode(data)
    except Damaged as exc:
        raise TraceReadError(path, f"a damaged XSpace protobuf: {_one_line(str(exc))}") from None
    if not d.planes:
        raise TraceReadError(path, "a damaged XSpace protobuf: no plane")
    return to_trace(d, path, "xplane.pb (XSpace protobuf)", FORMAT)


def load_viewer(path: str | os.PathLike[str]) -> Trace:
    """Load the trace-viewer JSON derived from an xplane (see module doc)."""
    from traceread.loaders.xplane.viewer import read_viewer

    path = os.fspath(path)
    d = read_viewer(path)
    return to_trace(d, path, "trace-viewer JSON derived from an xplane", FORMAT_VIEWER)


def _one_line(text: str) -> str:
    return " ".join(text.split())[:200] or "malformed"


def to_trace(d: M.Decoded, path: str, generation: str, fmt: str) -> Trace:
    events, side = build(d, path)
    schema.validate(events)
    devices, peaks, notes = xm.devices(d, events)
    base, offset, base_note = xm.time_base(d)
    warnings: list[Note | str] = [*d.notes, *notes]
    if base_note and len(events):
        warnings.append(base_note)
    if d.truncated:
        warnings.append(Note.of(VIEWER_DROPPED_EVENTS))
    tpus = [dv.id for dv in devices if dv.used and dv.name.upper().startswith("TPU")]
    if tpus:
        warnings.append(Note.of(TPU_NO_LAUNCHES))
    if not len(events):
        warnings.append(Note.of(NO_EVENTS))
    elif not any(p.name == HOST_PLANE for p in d.planes) and any(dv.used for dv in devices):
        warnings.append(Note.of(NO_HOST_PLANE))
    steps, step_source, step_note = xm.steps(d, events)
    if step_note:
        warnings.append(step_note)
    extra: dict[str, Any] = {
        "planes": [p.name for p in d.planes if p.name.isprintable() and len(p.name) < 80],
        "lines": len(d.lines),
        "device_peaks": peaks,
        "step_source": step_source,
        "raw_categories": list(events["raw_category"].cat.categories),
    }
    meta = TraceMeta(path=path, format=fmt, generation=generation, time_base=base, epoch_offset_ns=offset,
                     devices=devices,
                     ranks=[RankInfo(rank=0, rank_source="default", world_size=None, world_size_source="unknown")],
                     steps=steps, warnings=warnings, truncated=d.truncated, extra=extra)
    # launch configurations are parsed when first asked for (the roofline and kernel tables read them)
    kernels = np.flatnonzero(events["category"].to_numpy() == schema.CAT_KERNEL)
    pending: dict[str, Callable[[], pd.DataFrame]] = {}
    if M.KERNEL_DETAILS in d.texts and len(kernels):
        pending["kernel_args"] = partial(kernel_args, d.texts[M.KERNEL_DETAILS], kernels)
    return Trace(events=events, meta=meta, side=SideTables(dict(side), pending))
