"""XSpace profiles (``*.xplane.pb``, written by JAX and TensorFlow) -> the normalized events frame.

Two inputs, one reading:

* the XSpace protobuf itself (``decode``: the planes by the protobuf runtime, the events in numpy);
* the trace-viewer JSON xprof derives from one (``*.trace.json.gz``, JAX's ``perfetto_trace.json.gz``;
  ``viewer``): a process per plane (``process_name`` ``/device:GPU:0``), a thread per line. The viewer
  may have dropped events past its size limit (``filteredByVisibility``): such a file is read with a
  truncation note; the ``.xplane.pb`` of the same run is the complete record.

Both become a :class:`model.Decoded`, which ``frame`` turns into lanes, devices and streams and
``meta`` into devices, peaks, time base and steps. Times are int64 ns from the profile's start; the
time base is ``epoch`` with the start (``Task Environment``'s ``profile_start_time``) as
``epoch_offset_ns`` when the file records it, else ``session``.

A TPU has no kernel launches: its ops are issued by the device's own program, so no GPU op links to a
host call and launch-bound is never judged there (a note says so). One process wrote an XSpace: it is
one rank (rank 0) with all its devices. Nothing is written beside the input.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from traceread.loaders.xplane.sniff import (
    FORMAT,
    FORMAT_VIEWER,
    is_trace_viewer,
    looks_like_trace_viewer,
    looks_like_xplane,
)

if TYPE_CHECKING:
    from traceread.trace import Trace

__all__ = ["FORMAT", "FORMAT_VIEWER", "is_trace_viewer", "load", "load_space", "load_viewer_json",
           "looks_like_trace_viewer", "looks_like_xplane"]


def load(path: str | os.PathLike[str], kind: str = FORMAT) -> Trace:
    """Load an ``.xplane.pb`` (``kind`` "xplane") or its trace-viewer JSON ("xplane-json")."""
    from traceread.loaders.xplane.reader import load_viewer, load_xplane

    return load_viewer(path) if kind == FORMAT_VIEWER else load_xplane(path)


def load_space(path: str | os.PathLike[str], progress: bool = False) -> Trace:
    """An ``.xplane.pb`` as ``traceread.loaders.READERS`` calls it (``progress``: none is shown)."""
    return load(path, FORMAT)


def load_viewer_json(path: str | os.PathLike[str], progress: bool = False) -> Trace:
    """A trace-viewer JSON as ``traceread.loaders.READERS`` calls it (``progress``: none is shown)."""
    return load(path, FORMAT_VIEWER)
