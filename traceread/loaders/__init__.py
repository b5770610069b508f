"""Loaders: sniff a file's format and dispatch to the Kineto or Nsight Systems reader.

Every loader returns a :class:`traceread.trace.Trace` whose events frame passes
:func:`traceread.schema.validate`.
"""

from __future__ import annotations

import os
import sqlite3

from traceread import heap
from traceread.atomic import note_input
from traceread.errors import TraceReadError
from traceread.limits import TooManyEvents
from traceread.trace import Trace, shown_path

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
    try:
        with open(path, "rb") as fh:
            head = fh.read(16)
    except OSError as exc:  # no permission, an I/O error: a problem of this input, not a bug
        raise TraceReadError(path, f"cannot read ({exc.strerror or exc})") from None
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
    note_input(path)  # an output of this command never replaces it (atomic.check_not_input)
    kind = sniff(path)
    try:
        trace = _load(path, kind, progress, step_range, decoders)
        trace.meta.path = shown_path(trace.meta.path)  # a name of any bytes: reports are UTF-8
        return trace
    finally:
        heap.trim()  # a load frees its read buffers and chunk arrays: give their pages back


def _load(path: str, kind: str, progress: bool, step_range: str | None, decoders: int | None) -> Trace:
    try:
        if kind == "kineto":
            from traceread.loaders.kineto import load_kineto

            return load_kineto(path, progress=progress, workers=decoders)
        from traceread.loaders.nsys import load_nsys

        try:
            return load_nsys(path, progress=progress, step_range=step_range)
        except UnicodeDecodeError:  # SQLite's own error text quoting a damaged schema
            raise TraceReadError(path, "not a readable Nsight Systems export (damaged schema)") from None
        except (ValueError, TypeError, OverflowError) as exc:
            # SQLite columns are dynamically typed: text or blobs where the export has integers
            # (a damaged or hand-edited file) fail the integer columns here.
            raise TraceReadError(path, f"a table holds values of the wrong type ({exc})") from None
    except TooManyEvents as exc:
        raise TraceReadError(path, str(exc)) from None
    except MemoryError:
        raise TraceReadError(path, "needs more memory than this process may use (see --max-memory)") from None
    except RecursionError:
        # msgspec bounds nesting by the interpreter's recursion limit: a hostile or broken file
        # with thousands of nested lists in an event's args is refused, not a traceback.
        raise TraceReadError(path, "values nested too deeply inside an event (a hostile or corrupt trace)") from None
    except sqlite3.Error as exc:
        # Whatever the SQLite engine refuses (a malformed file, a table or column the export
        # lacks) is a problem of this input, reported on one line.
        raise TraceReadError(path, f"not a readable Nsight Systems export ({exc})") from None
    except OSError as exc:  # the file became unreadable after sniff() opened it, or the disk failed
        raise TraceReadError(path, f"cannot read ({exc.strerror or exc})") from None
