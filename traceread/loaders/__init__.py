"""Loaders: detect a file's format by its content and dispatch to its reader.

Every loader returns a :class:`traceread.trace.Trace` whose events frame passes
:func:`traceread.schema.validate`.

Formats are named by :mod:`traceread.loaders.detect` (``detect.FORMATS``: kineto, nsys, nsys-rep,
xplane, xplane-json, rocprofv3-json, rocpd, rpd, rocprof-v1, rpd-json, perfetto, and the refusals
traceread-perfetto, chrome-json, sqlite, json, binary). The Kineto and Nsight Systems readers are
called directly; every other reader is one line of :data:`READERS`::

    READERS = {"perfetto": "traceread.loaders.perfetto:load_perfetto", ...}

``format -> "module:function"``, imported on first use and called as ``function(path, progress=bool)``
returning a Trace whose ``meta.format`` is the key (the report and index schemas list the keys); its
errors raised as ``TraceReadError(path, "...")``, prefixed with the format's words when they do not
name it. A detected format with no entry is refused naming it ("a rocprofv3 JSON (rocprofiler-sdk): no
reader in this build", or :data:`REFUSED`'s words: a legacy rocprof v1 database, another tool's JSON).
The other readers of issue 45 register as ``"xplane"``, ``"xplane-json"``, ``"rocprofv3-json"``,
``"rocpd"``, ``"rpd"``, ``"rpd-json"`` (and may take ``"rocprof-v1"``, refused by default).
"""

from __future__ import annotations

import os
import sqlite3
import stat
import tempfile
from collections.abc import Callable
from typing import cast

from traceread.atomic import note_input
from traceread.errors import TraceReadError
from traceread.limits import TooManyEvents
from traceread.loaders import detect
from traceread.loaders.parallel import SERIAL, Parallel
from traceread.trace import Trace, shown_path

SQLITE_MAGIC = detect.SQLITE_MAGIC
GZIP_MAGIC = detect.GZIP_MAGIC

# format -> "module:function" of its reader (see the module's docstring); one line per format.
READERS: dict[str, str] = {
    "perfetto": "traceread.loaders.perfetto:load_perfetto",
    "xplane": "traceread.loaders.xplane:load_space",
    "xplane-json": "traceread.loaders.xplane:load_viewer_json",
    "rocprofv3-json": "traceread.loaders.rocprof:load_rocprofv3_json",
    "rocpd": "traceread.loaders.rocprof:load_rocpd",
    "rpd": "traceread.loaders.rocprof:load_rpd",
    "rpd-json": "traceread.loaders.rocprof:load_rpd_trace_json",
}

# Formats refused with a reason of their own (not "no reader in this build").
REFUSED: dict[str, str] = {
    detect.ROCPROF_V1: "not supported (record with rocprofv3 of rocprofiler-sdk instead)",
    detect.CHROME_JSON: "traceread has no reader for it",
    detect.UNKNOWN_JSON: "not a trace",
}


def sniff(path: str) -> str:
    """The format of ``path`` by its content (a name of ``detect.FORMATS``): raises TraceReadError
    when it is not a trace to read (missing, a directory, unreadable, empty, of no known format, or
    traceread's own Perfetto output)."""
    if not os.path.exists(path):
        raise TraceReadError(path, "no such file")
    if os.path.isdir(path):
        raise TraceReadError(path, "is a directory, not a trace file")
    try:
        found = detect.detect(path)
    except OSError as exc:  # no permission, an I/O error: a problem of this input, not a bug
        raise TraceReadError(path, f"cannot read ({exc.strerror or exc})") from None
    if found.format == detect.UNKNOWN_BINARY:
        if found.why == "empty file":
            raise TraceReadError(path, "empty file")
        raise TraceReadError(path, "not a trace (neither Kineto JSON, gzip, nor an Nsight Systems SQLite export, "
                                   "nor another format traceread knows)")
    if found.format == detect.TRACEREAD_PERFETTO:
        raise TraceReadError(path, f"not a trace: {detect.describe(found.format)}")
    if found.format == detect.UNKNOWN_SQLITE:
        return detect.NSYS  # the Nsight Systems reader says what the database lacks, as it always has
    return found.format


LeftOut = list[tuple[str, str]]  # (path, why) of what a folder expansion could not read


def trace_files(directory: str | os.PathLike[str], left_out: LeftOut | None = None) -> list[str]:
    """Files under ``directory`` that sniff as traces, sorted (hidden files and folders skipped).

    What a directory given in place of a trace means, for ``analyze``, ``diff`` and
    ``traceread.analyze`` alike: every trace under it (a README or a job file is left out), each run
    once (a trace-viewer JSON beside the ``.xplane.pb`` it was derived from is left out).
    Only regular files are opened: a FIFO, socket or device inside the folder would block the
    sniff for ever or never end. What could not be read (no permission, an unreadable subfolder,
    a non-regular file) is appended to ``left_out`` as (path, why), for the caller's note.
    """
    skipped: LeftOut = left_out if left_out is not None else []

    def unreadable(exc: OSError) -> None:  # os.walk's error on a subfolder it cannot list
        skipped.append((str(exc.filename), f"folder not read ({exc.strerror or exc})"))

    out = []
    for root, dirs, files in os.walk(os.fspath(directory), onerror=unreadable):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found: list[tuple[str, str]] = []
        for name in sorted(files):
            if name.startswith("."):
                continue
            path = os.path.join(root, name)
            try:
                mode = os.stat(path).st_mode
            except OSError as exc:  # a dangling link, no permission on the way
                skipped.append((path, f"not read ({exc.strerror or exc})"))
                continue
            if not stat.S_ISREG(mode):
                if not stat.S_ISDIR(mode):  # a link to a folder is os.walk's (not followed)
                    skipped.append((path, "not a regular file (a FIFO, socket or device): not opened"))
                continue
            try:
                kind = sniff(path)
            except TraceReadError as exc:
                if exc.problem.startswith("cannot read"):
                    skipped.append((path, f"not read ({exc.problem})"))
                continue  # else not a trace (a README, a job file)
            why = refusal(kind)
            if why is not None:  # a JSON or database that is no trace (a run's config.json), or one of no reader
                skipped.append((path, why))
                continue
            found.append((path, kind))
        xplanes = [p for p, fmt in found if fmt == detect.XPLANE]
        out += [p for p, fmt in found
                if not (xplanes and fmt == detect.XPLANE_JSON and detect.derived_from_xplane(p, xplanes))]
    return out


def expand_paths(paths: list[str | os.PathLike[str]] | tuple[str | os.PathLike[str], ...],
                 left_out: LeftOut | None = None) -> list[str]:
    """Each input as trace files: a file stays itself, a directory becomes :func:`trace_files` of it
    (a directory with none raises TraceReadError); what a folder held but could not be read goes to
    ``left_out`` (see :func:`trace_files`)."""
    out: list[str] = []
    for item in paths:
        p = os.fspath(item)
        if os.path.isdir(p):
            skipped: LeftOut = []
            found = trace_files(p, skipped)
            if left_out is not None:
                left_out += skipped
            if not found:
                why = f" ({len(skipped)} left out: {left_out_text(skipped)})" if skipped else ""
                raise TraceReadError(p, f"no trace files in this directory{why}")
            out += found
        else:
            out.append(p)
    return out


def left_out_notes(left_out: LeftOut) -> tuple[str, ...]:
    """The report's notes for what a folder held but could not be read (one per file, the first 20)."""
    notes = tuple(f"{shown_path(p)}: left out of this analysis: {why}" for p, why in left_out[:20])
    more = (f"and {len(left_out) - 20} more files left out",) if len(left_out) > 20 else ()
    return notes + more


def left_out_text(left_out: LeftOut, most: int = 3) -> str:
    """``path: why; ...`` for the first ``most`` entries, the rest counted."""
    text = "; ".join(f"{shown_path(p)}: {why}" for p, why in left_out[:most])
    return text + (f"; and {len(left_out) - most} more" if len(left_out) > most else "")


def _nothing() -> None:
    """The default ``between`` hook: nothing between the pieces (the runner gives freed heap pages back there)."""


def load(path: str | os.PathLike[str], *, progress: bool = False, step_range: str | None = None,
         decoders: int | None = None, between: Callable[[], None] = _nothing, parallel: Parallel = SERIAL) -> Trace:
    """Load one trace file into the normalized frame.

    ``progress`` shows a progress bar on standard error (multi-GB loads); ``step_range`` names a
    user NVTX range to use as the step marker in Nsight Systems input. ``decoders`` caps the
    Kineto decoders (default: ``parallel.cores``); ``traceread scan`` passes 1 because each of its workers is
    already one of N processes. ``between`` is called once the load is done or failed (its read buffers and
    chunk arrays are freed). ``parallel`` runs what may run beside the load (:mod:`traceread.loaders.parallel`:
    the runner's threads and forks; the default runs nothing beside it).
    """
    path = os.fspath(path)
    note_input(path)  # an output of this command never replaces it (atomic.check_not_input)
    try:
        if _is_stream(path):
            trace = _load_stream(path, progress, step_range, decoders, parallel)
        else:
            kind = sniff(path)
            check_extent(path)
            trace = _load(path, kind, progress, step_range, decoders, parallel)
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


def _load_stream(path: str, progress: bool, step_range: str | None, decoders: int | None,
                 parallel: Parallel) -> Trace:
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
            trace = _load(copy, sniff(copy), progress, step_range, decoders, parallel)
            for name in list(trace.side):  # tables read on first use: read now, the copy goes
                trace.side[name]
        except TraceReadError as exc:
            raise TraceReadError(path, exc.problem) from None
    trace.meta.path = path
    return trace


# What a stream may copy into TMPDIR beyond --max-json-size: the free space of its folder less this
# margin (the copy never fills the disk other programs write to).
SPOOL_FREE_MARGIN = 1 << 30
SPOOL_BLOCK = 1 << 20
# A run of NUL bytes as long as a file system block: never in JSON text, even a damaged writer's
# (a stray control character is repaired; a block of zeros is a hole or /dev/zero).
NUL_RUN = bytes(4096)


def _spool(path: str, copy: str) -> None:
    """Copy the stream at ``path`` to ``copy``, bounded: its first block is sniffed before anything
    is kept (``cat /dev/zero`` is refused at once, not after 64 GiB), the copy stops at
    ``--max-json-size`` or at the free space of the temporary folder less SPOOL_FREE_MARGIN, and a
    plain JSON stream holding a run of NUL_RUN bytes (never in JSON text) stops where it does."""
    from traceread.limits import LIMITS, format_size

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise TraceReadError(path, f"cannot read ({exc.strerror})") from None
    try:
        os.set_blocking(fd, True)
        with open(fd, "rb", closefd=False) as src, open(copy, "xb") as dst:
            total, plain = 0, None
            cap = LIMITS.max_json_bytes
            try:
                vfs = os.statvfs(os.path.dirname(copy))
                cap = min(cap, max(vfs.f_bavail * vfs.f_frsize - SPOOL_FREE_MARGIN, SPOOL_BLOCK))
            except OSError:
                pass
            while block := src.read(SPOOL_BLOCK):
                total += len(block)
                if total > cap:
                    raise TraceReadError(path, f"the stream holds more than {format_size(cap)} (--max-json-size, "
                                               "or the free space of the temporary folder, TMPDIR)")
                dst.write(block)
                if plain is None:  # the first block: is this a trace at all?
                    dst.flush()
                    try:
                        plain = sniff(copy) == "kineto" and not block.startswith(GZIP_MAGIC)
                    except TraceReadError as exc:
                        raise TraceReadError(path, exc.problem) from None
                if plain and (nul := block.find(NUL_RUN)) >= 0:
                    raise TraceReadError(path, f"not a trace: a run of NUL bytes at byte {total - len(block) + nul:,} "
                                               "(JSON text holds none)")
    except OSError as exc:
        raise TraceReadError(path, f"cannot copy the stream to a temporary file ({exc.strerror})") from None
    finally:
        os.close(fd)
    if not total:
        raise TraceReadError(path, "empty (a pipe or FIFO nothing was written to)")


# The least share of an SQLite file's size that must be stored for it to be read when it has holes.
SQLITE_MIN_STORED = 0.5


def check_extent(path: str) -> None:
    """Refuse a sparse input: one with a hole (a run of NUL bytes the file system does not store)
    before its end. JSON text, gzip data and the protobuf traces never hold a block of NUL bytes, and
    reading or hashing the holes of a large sparse file would take minutes and gigabytes for nothing. An
    SQLite database (nsys, RPD, rocpd) may hold zeroed pages a file system stores as a hole, so it is
    refused only when most of it is holes (less than ``SQLITE_MIN_STORED`` of its size stored). The
    file system says where the first hole is (SEEK_HOLE), so the answer takes no read; a file whose
    allocated blocks cover its size (the usual case) is not even asked."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return  # the load says what is wrong with it
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_blocks * 512 >= st.st_size or not hasattr(os, "SEEK_HOLE"):
            return
        try:
            hole = os.lseek(fd, 0, os.SEEK_HOLE)
        except OSError:  # a file system without hole reporting
            return
        if hole < st.st_size:
            from traceread.limits import format_size

            if os.pread(fd, len(SQLITE_MAGIC), 0) == SQLITE_MAGIC:
                if st.st_blocks * 512 >= SQLITE_MIN_STORED * st.st_size:
                    return  # zeroed pages of a database stored as holes: read as any database
                raise TraceReadError(path, f"a sparse SQLite file: {format_size(st.st_size)} long, only "
                                           f"{format_size(st.st_blocks * 512)} stored: not an export a profiler wrote")

            raise TraceReadError(path, f"a sparse file: {format_size(st.st_size)} long, {format_size(st.st_blocks * 512)} "
                                       f"stored, with a hole of NUL bytes at byte {hole:,}: not a trace "
                                       "(JSON and gzip hold no run of NUL bytes)")
    finally:
        os.close(fd)


def _load(path: str, kind: str, progress: bool, step_range: str | None, decoders: int | None,
          parallel: Parallel = SERIAL) -> Trace:
    if kind not in (detect.KINETO, detect.NSYS, detect.NSYS_REP):
        return _load_other(path, kind, progress)
    try:
        if kind == "kineto":
            from traceread.loaders.kineto import load_kineto

            return load_kineto(path, progress=progress, workers=decoders, parallel=parallel)
        from traceread.loaders.nsys import load_nsys

        try:
            return load_nsys(path, progress=progress, step_range=step_range, parallel=parallel)
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


def refusal(kind: str) -> str | None:
    """Why a file of format ``kind`` is not read ("a JSON file of no known trace format: not a trace"), or
    None when a reader of this build takes it."""
    if kind in (detect.KINETO, detect.NSYS, detect.NSYS_REP) or kind in READERS:
        return None  # a registered reader wins over REFUSED's default words
    if kind == detect.UNKNOWN_JSON:  # said as the Kineto reader said it, which scan counts as "not a trace"
        return "not a trace: a JSON file with no traceEvents array, of no known trace format"
    return f"{detect.describe(kind)}: {REFUSED.get(kind, 'no reader in this build')}"


def _load_other(path: str, kind: str, progress: bool) -> Trace:
    """Read ``path`` of format ``kind`` with its entry of READERS, or refuse it naming the format."""
    what = detect.describe(kind)
    target = READERS.get(kind)
    if target is None:
        raise TraceReadError(path, refusal(kind) or what)
    import importlib

    module, _, func = target.partition(":")
    reader = getattr(importlib.import_module(module), func)
    try:
        return cast(Trace, reader(path, progress=progress))
    except TraceReadError as exc:
        if named(kind, exc.problem):
            raise
        raise TraceReadError(path, f"{what}: {exc.problem}") from None  # every refusal names the format
    except TooManyEvents as exc:
        raise TraceReadError(path, str(exc)) from None
    except MemoryError:
        raise TraceReadError(path, "out of memory while loading: needs more memory than this process may use "
                                   "(--max-memory, or a machine with more memory)") from None
    except RecursionError:
        raise TraceReadError(path, f"{what} nested too deeply (a hostile or corrupt file)") from None
    except sqlite3.Error as exc:
        from traceread.loaders.nsys.read import one_line

        raise TraceReadError(path, f"not a readable {what.split(' ', 1)[1]} ({one_line(exc)})") from None
    except OSError as exc:
        raise TraceReadError(path, f"cannot read ({exc.strerror or exc})") from None


def named(kind: str, problem: str) -> bool:
    """Whether ``problem`` names format ``kind`` ("rocprofv3", "xplane", "Perfetto"... or its words)."""
    return kind.split("-")[0].lower() in problem.lower() or detect.describe(kind) in problem
