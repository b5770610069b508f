"""Loaders: sniff a file's format and dispatch to the Kineto or Nsight Systems reader.

Every loader returns a :class:`traceread.trace.Trace` whose events frame passes
:func:`traceread.schema.validate`.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import tempfile
from collections.abc import Callable

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


def trace_files(directory: str | os.PathLike[str]) -> list[str]:
    """Files under ``directory`` that sniff as traces, sorted (hidden files and folders skipped).

    What a directory given in place of a trace means, for ``analyze``, ``diff`` and
    ``traceread.analyze`` alike: every trace under it (a README or a job file is left out).
    """
    out = []
    for root, dirs, files in os.walk(os.fspath(directory)):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if name.startswith("."):
                continue
            path = os.path.join(root, name)
            try:
                sniff(path)
            except TraceReadError:
                continue  # not a trace (a README, a job file)
            out.append(path)
    return out


def expand_paths(paths: list[str | os.PathLike[str]] | tuple[str | os.PathLike[str], ...]) -> list[str]:
    """Each input as trace files: a file stays itself, a directory becomes :func:`trace_files` of it
    (a directory with none raises TraceReadError)."""
    out: list[str] = []
    for item in paths:
        p = os.fspath(item)
        if os.path.isdir(p):
            found = trace_files(p)
            if not found:
                raise TraceReadError(p, "no trace files in this directory")
            out += found
        else:
            out.append(p)
    return out


def _nothing() -> None:
    """The default ``between`` hook: nothing between the pieces (the runner gives freed heap pages back there)."""


def load(path: str | os.PathLike[str], *, progress: bool = False, step_range: str | None = None,
         decoders: int | None = None, between: Callable[[], None] = _nothing) -> Trace:
    """Load one trace file into the normalized frame.

    ``progress`` shows a progress bar on standard error (multi-GB loads); ``step_range`` names a
    user NVTX range to use as the step marker in Nsight Systems input. ``decoders`` caps the
    Kineto decoding processes (default: the machine's cores, which may fork a second decoder or a
    pool); ``traceread scan`` passes 1 because each of its workers is already one of N processes.
    ``between`` is called once the load is done or failed (its read buffers and chunk arrays are freed).
    """
    path = os.fspath(path)
    note_input(path)  # an output of this command never replaces it (atomic.check_not_input)
    try:
        if _is_stream(path):
            trace = _load_stream(path, progress, step_range, decoders)
        else:
            trace = _load(path, sniff(path), progress, step_range, decoders)
        _check_span(path, trace)
        trace.meta.path = shown_path(trace.meta.path)  # a name of any bytes: reports are UTF-8
        return trace
    finally:
        between()  # a load frees its read buffers and chunk arrays: their pages can go back


def _check_span(path: str, trace: Trace) -> None:
    """Refuse a trace whose events span more nanoseconds than int64 holds (a time near -2^63 in a
    corrupt export): every length measured over them (steps, windows, unions) would overflow."""
    from traceread.limits import INT64_MAX

    ev = trace.events
    if not len(ev):
        return
    first, last = int(ev["start_ns"].min()), int(ev["end_ns"].max())
    if last - first > INT64_MAX:
        raise TraceReadError(path, f"its events span {last - first:,} ns (from {first:,} to {last:,}), more than "
                                   "2^63-1 ns: not a time (a corrupt timestamp)")


def _is_stream(path: str) -> bool:
    """Whether ``path`` is a pipe or FIFO (``<(cat t.json)``, ``/dev/stdin`` fed by a pipe).

    Devices and sockets are refused here: reading one could block forever or never end.
    """
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False  # sniff says what is wrong with it
    if stat.S_ISFIFO(mode):
        return True
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISSOCK(mode):
        raise TraceReadError(path, "is a device or socket, not a trace file")
    return False


def _load_stream(path: str, progress: bool, step_range: str | None, decoders: int | None) -> Trace:
    """A pipe is read once into a private temporary file, which is loaded like any other.

    The loaders need a seekable file (a gzip's size trailer, a plain file's map, the second
    decoder reading from the middle, SQLite). A FIFO nobody writes to reads as empty instead of
    blocking the open forever: it is opened non-blocking, then read blocking.
    """
    with tempfile.TemporaryDirectory(prefix="traceread-stream-") as tmp:
        # the same name: a rank in it (rank-3) is read from the copy's name as from the pipe's
        copy = os.path.join(tmp, os.path.basename(path) or "stream")
        _spool(path, copy)
        try:
            trace = _load(copy, sniff(copy), progress, step_range, decoders)
            for name in list(trace.side):  # tables read on first use: read now, the copy goes
                trace.side[name]
        except TraceReadError as exc:
            raise TraceReadError(path, exc.problem) from None
    trace.meta.path = path
    return trace


def _spool(path: str, copy: str) -> None:
    from traceread.limits import LIMITS, format_size

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise TraceReadError(path, f"cannot read ({exc.strerror})") from None
    try:
        os.set_blocking(fd, True)
        with open(fd, "rb", closefd=False) as src, open(copy, "xb") as dst:
            total = 0
            while block := src.read(1 << 20):
                total += len(block)
                if total > LIMITS.max_json_bytes:
                    raise TraceReadError(path, f"the stream holds more than {format_size(LIMITS.max_json_bytes)} "
                                               "(--max-json-size)")
                dst.write(block)
    except OSError as exc:
        raise TraceReadError(path, f"cannot copy the stream to a temporary file ({exc.strerror})") from None
    finally:
        os.close(fd)
    if not total:
        raise TraceReadError(path, "empty (a pipe or FIFO nothing was written to)")


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
            raise TraceReadError(path, f"a table holds values of the wrong type ({' '.join(str(exc).split())})") from None
    except TooManyEvents as exc:
        raise TraceReadError(path, str(exc)) from None
    except MemoryError:
        raise TraceReadError(path, "out of memory while loading: needs more memory than this process may use "
                                   "(--max-memory, or a machine with more memory)") from None
    except RecursionError:
        # msgspec bounds nesting by the interpreter's recursion limit: a hostile or broken file
        # with thousands of nested lists in an event's args is refused, not a traceback.
        raise TraceReadError(path, "values nested too deeply inside an event (a hostile or corrupt trace)") from None
    except sqlite3.Error as exc:
        # Whatever the SQLite engine refuses (a malformed file, a table or column the export
        # lacks) is a problem of this input, reported on one line.
        from traceread.loaders.nsys.read import one_line

        raise TraceReadError(path, f"not a readable Nsight Systems export ({one_line(exc)})") from None
    except OSError as exc:  # the file became unreadable after sniff() opened it, or the disk failed
        raise TraceReadError(path, f"cannot read ({exc.strerror or exc})") from None
