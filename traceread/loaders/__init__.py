"""Loaders: sniff a file's format and dispatch to the Kineto or Nsight Systems reader.

Every loader returns a :class:`traceread.trace.Trace` whose events frame passes
:func:`traceread.schema.validate`.
"""

from __future__ import annotations

import os

from traceread.errors import TraceReadError
from traceread.trace import Trace

SQLITE_MAGIC = b"SQLite format 3\x00"
GZIP_MAGIC = b"\x1f\x8b"


def sniff(path: str) -> str:
    """Return "kineto", "nsys" or "nsys-rep" for ``path``; raise TraceReadError otherwise."""
    if not os.path.exists(path):
        raise TraceReadError(path, "no such file")
    if os.path.isdir(path):
        raise TraceReadError(path, "is a directory, not a trace file")
    if path.endswith(".nsys-rep") or path.endswith(".qdrep"):
        return "nsys-rep"
    with open(path, "rb") as fh:
        head = fh.read(16)
    if not head:
        raise TraceReadError(path, "empty file")
    if head.startswith(SQLITE_MAGIC):
        return "nsys"
    if head.startswith(GZIP_MAGIC):
        return "kineto"
    stripped = head.lstrip()
    if stripped[:1] in (b"{", b"["):
        return "kineto"
    raise TraceReadError(path, "not a trace (neither Kineto JSON, gzip, nor an Nsight Systems SQLite export)")


def load(path: str | os.PathLike[str], *, progress: bool = False, step_range: str | None = None,
         decoders: int | None = None) -> Trace:
    """Load one trace file into the normalized frame.

    ``progress`` shows a progress bar on standard error (multi-GB loads); ``step_range`` names a
    user NVTX range to use as the step marker in Nsight Systems input. ``decoders`` caps the
    Kineto decoding processes (default: the machine's cores, which may fork a second decoder or a
    pool); ``traceread scan`` passes 1 because each of its workers is already one of N processes.
    """
    path = os.fspath(path)
    kind = sniff(path)
    if kind == "kineto":
        from traceread.loaders.kineto import load_kineto

        return load_kineto(path, progress=progress, workers=decoders)
    from traceread.loaders.nsys import load_nsys

    return load_nsys(path, progress=progress, step_range=step_range)
