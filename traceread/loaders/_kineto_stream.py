"""Stream a Kineto file's event array in bounded chunks, decoded in parallel worker processes.

The file (plain or gzip) is read once, front to back. The header object before ``traceEvents``
is parsed on its own; the event array is cut at guessed event boundaries into chunks of about
``CHUNK`` bytes that worker processes decode (:mod:`_kineto_decode`); the last stretch of the
stream, and anything after a chunk whose boundary guess was wrong, is scanned exactly in this
process, which also finds the end of the array, the trailing keys (``baseTimeNanoseconds`` may sit
there) or the place where a truncated file stops. Memory stays bounded by the chunks in flight.
"""

from __future__ import annotations

import collections
import gc
import multiprocessing
import os
import re
import zlib
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import orjson

from traceread.errors import TraceReadError
from traceread.loaders._kineto_decode import decode_chunk, decode_framed
from traceread.loaders._kineto_text import TRACE_EVENTS_KEY, find_boundary, top_level_key_start
from traceread.loaders._progress import Progress

try:  # isal's inflate is about twice as fast as zlib's; same API
    from isal import isal_zlib as _zlib
except ImportError:  # pragma: no cover - isal is optional
    _zlib = zlib  # type: ignore[misc]

GZIP_MAGIC = b"\x1f\x8b"
CHUNK = 4 << 20  # bytes of JSON per worker task: large enough to amortize IPC, small for memory
WINDOW = 1 << 20  # how far past a chunk's target size to look for an event boundary
LOOKAHEAD = 256 << 10  # the stream's last bytes are always scanned exactly (array end, trailer)
PARALLEL_MIN = 48 << 20  # measured: below ~50 MB forking workers costs more than it saves
HEADER_MAX = 256 << 20  # give up looking for "traceEvents" after this much text
_READ = 4 << 20
PROGRESS_MIN = 64 << 20  # smaller files load in well under a second: no bar
_BASE_TIME = re.compile(rb'"baseTimeNanoseconds"\s*:\s*(\d+)')


@dataclass
class StreamResult:
    """What the stream held: top-level keys, decoded chunks (in file order), how it ended."""

    top: dict[str, Any]
    bare_list: bool
    sink: Any = None  # receives each decoded chunk in file order: sink.add(chunk); sink.n = rows so far
    truncated: bool = False
    warnings: list[str] = field(default_factory=list)
    json_bytes: int = 0  # uncompressed bytes read


class _Source:
    """Uncompressed bytes of a plain or gzip file, read front to back."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fh: BinaryIO = open(path, "rb")  # noqa: SIM115 - closed by close()
        self.size = os.fstat(self.fh.fileno()).st_size
        self.gzip = self.fh.read(2) == GZIP_MAGIC
        self.fh.seek(0)
        self.inflater = _zlib.decompressobj(31) if self.gzip else None
        self.offset = 0  # uncompressed bytes handed out so far
        self.gzip_cut = False  # compressed stream ended before its end marker

    def read(self, n: int) -> bytes:
        """At least ``n`` bytes unless the stream ends (gzip may return more: whole inflated blocks)."""
        if not self.gzip:
            data = self.fh.read(n)
            self.offset += len(data)
            return data
        out = []
        have = 0
        while have < n and self.inflater is not None:
            raw = self.fh.read(256 << 10)
            if not raw:
                if not self.inflater.eof:
                    self.gzip_cut = True
                try:
                    tail = self.inflater.flush()
                except _zlib.error:
                    tail = b""
                out.append(tail)
                have += len(tail)
                self.inflater = None
                break
            try:
                data = self.inflater.decompress(raw)
            except _zlib.error as exc:
                raise TraceReadError(self.path, f"bad gzip data ({exc})") from None
            out.append(data)
            have += len(data)
            if self.inflater.eof:
                rest = self.inflater.unused_data + self.fh.read(2)
                self.fh.seek(self.fh.tell() - len(rest))
                if rest.startswith(GZIP_MAGIC):  # concatenated gzip members
                    self.inflater = _zlib.decompressobj(31)
                else:
                    self.inflater = None
        data = out[0] if len(out) == 1 else b"".join(out)
        self.offset += len(data)
        return data

    def json_size_estimate(self) -> int:
        """Uncompressed size: gzip's ISIZE trailer (exact below 4 GiB, one member), else a guess."""
        if not self.gzip:
            return self.size
        pos = self.fh.tell()
        self.fh.seek(max(0, self.size - 4))
        isize = int.from_bytes(self.fh.read(4), "little")
        self.fh.seek(pos)
        return isize if isize >= self.size else self.size * 8

    def progress(self) -> float:
        return self.fh.tell() / self.size if self.size else 1.0

    def close(self) -> None:
        self.fh.close()


def _worker_init() -> None:
    gc.disable()  # decoded events hold no cycles; the collector would only rescan them


def _decode_file_range(path: str, start: int, end: int) -> dict[str, Any]:
    buf = bytearray(end - start + 2)
    buf[0], buf[-1] = 91, 93  # "[" ... "]"
    with open(path, "rb") as fh:
        fh.seek(start)
        fh.readinto(memoryview(buf)[1:-1])
    return decode_framed(buf)


def read_stream(path: str, sink: Any, progress: bool = False, workers: int | None = None) -> StreamResult:
    """Read and decode every event of the Kineto file at ``path`` (see module docstring).

    Decoded chunks go to ``sink.add`` in file order as they arrive, so merging them overlaps
    with the workers' decoding and each chunk's arrays are freed once merged; ``sink.expect``
    gets the expected JSON size first.
    """
    src = _Source(path)
    bar = Progress(path, progress and src.json_size_estimate() >= PROGRESS_MIN)
    was_enabled = gc.isenabled()
    gc.disable()
    pool = None
    try:
        top, bare, rest = _read_header(src)
        res = StreamResult(top=top, bare_list=bare, sink=sink)
        if rest is None:
            res.truncated = True
            res.warnings.append("file ends before the event array: it holds no events")
            res.json_bytes = src.offset
            return res
        sink.expect(src.json_size_estimate())
        nworkers = workers if workers is not None else min(os.cpu_count() or 1, 4)
        if nworkers > 1 and src.json_size_estimate() >= PARALLEL_MIN \
                and not multiprocessing.current_process().daemon:  # daemons may not fork workers
            try:
                pool = multiprocessing.get_context("fork").Pool(nworkers, initializer=_worker_init)
            except (OSError, ValueError):  # no fork (platform, limits): decode in this process
                pool = None
        if src.gzip or pool is None:
            restart = _run_bytes(src, rest, res, pool, nworkers, bar)
        else:
            restart = _run_file(src, len(rest), res, pool, nworkers, bar)
        _exact_rest(src, restart, res)
        if src.gzip and src.gzip_cut:
            res.truncated = True
        res.json_bytes = src.offset
        bar.update(1.0, force=True)
        return res
    finally:
        if pool is not None:
            pool.terminate()
        bar.done()
        src.close()
        if was_enabled:
            gc.enable()


def _read_header(src: _Source) -> tuple[dict[str, Any], bool, bytes | None]:
    """Top-level keys before the event array, bare-list flag, and the bytes after ``[``.

    The bytes are None when the file ends inside the header (truncated before any event).
    """
    buf = b""
    while True:
        block = src.read(1 << 20)
        buf += block
        text = buf.lstrip()
        if not text:
            if block:
                continue
            raise TraceReadError(src.path, "empty file" if not src.gzip else "empty file (gzip holds no data)")
        first = text[:1]
        lead = len(buf) - len(text)
        if first == b"[":
            return {}, True, buf[lead + 1:]
        if first != b"{":
            raise TraceReadError(src.path, "not a trace: not JSON (expected '{' or '[')")
        for m in TRACE_EVENTS_KEY.finditer(buf, lead):
            if top_level_key_start(buf, lead, m.start()):
                head = buf[lead + 1: m.start()].rstrip().rstrip(b",")
                try:
                    top = orjson.loads(b"{" + head + b"}")
                except orjson.JSONDecodeError:
                    top = {}
                return top, False, buf[m.end():]
        if not block and (src.gzip_cut or b'"schemaVersion"' in buf or b'"deviceProperties"' in buf):
            return {}, False, None  # a Kineto header cut short before the event array
        if not block or len(buf) > HEADER_MAX:
            raise TraceReadError(src.path, "not a Kineto trace: no traceEvents array")


def _submit(pool: Any, task: Any) -> Any:
    if pool is None:
        return _Done(task[0](*task[1:]))
    return pool.apply_async(task[0], task[1:])


class _Done:
    def __init__(self, value: Any) -> None:
        self.value = value

    def get(self) -> Any:
        return self.value


def _run_bytes(src: _Source, first: bytes, res: StreamResult, pool: Any, nworkers: int,
               bar: Progress) -> bytes | int:
    """Chunk the decompressed stream in this process; returns the bytes left for the exact scan."""
    buf = bytearray(first)
    pending: collections.deque[tuple[Any, bytes]] = collections.deque()
    max_inflight = 2 * nworkers + 1
    eof = False
    while True:
        while len(buf) >= CHUNK + LOOKAHEAD or (eof and len(buf) > 2 * LOOKAHEAD):
            target = min(CHUNK, len(buf) - 2 * LOOKAHEAD)
            cut = find_boundary(buf, target, min(len(buf) - LOOKAHEAD, target + WINDOW))
            if cut is None:
                cut = find_boundary(buf, target, len(buf) - LOOKAHEAD)
            if cut is None:
                break
            chunk = bytes(buf[: cut[0]])
            del buf[: cut[1]]
            pending.append((_submit(pool, (decode_chunk, chunk)), chunk))
            while len(pending) > max_inflight:
                redo = _collect(pending, res)
                if redo is not None:
                    return redo + b"," + bytes(buf)
            bar.update(src.progress())
        if eof:
            break
        block = src.read(_READ)
        if not block:
            eof = True
        buf += block
    while pending:
        redo = _collect(pending, res)
        if redo is not None:
            return redo + b"," + bytes(buf)
    return bytes(buf)


def _collect(pending: collections.deque, res: StreamResult) -> bytes | None:
    """Take the oldest result; on a framing error return the text of it and all later chunks."""
    job, chunk = pending.popleft()
    out = job.get()
    if not out.get("framing_error"):
        res.sink.add(out)
        return None
    texts = [chunk]
    while pending:
        later_job, later_chunk = pending.popleft()
        later_job.get()
        texts.append(later_chunk)
    return b",".join(texts)


def _run_file(src: _Source, head_len: int, res: StreamResult, pool: Any, nworkers: int,
              bar: Progress) -> int:
    """Plain file: workers read their own byte ranges; returns the offset for the exact scan."""
    start = src.offset - head_len  # file offset of the first event's text
    pending: collections.deque[tuple[Any, int]] = collections.deque()
    max_inflight = 2 * nworkers + 1
    with open(src.path, "rb") as fh:
        while src.size - start > 2 * LOOKAHEAD:
            target = start + min(CHUNK, src.size - start - 2 * LOOKAHEAD)
            fh.seek(target)
            window = fh.read(min(WINDOW, src.size - LOOKAHEAD - target))
            cut = find_boundary(window, 0, len(window))
            if cut is None:
                break
            end, nxt = target + cut[0], target + cut[1]
            pending.append((_submit(pool, (_decode_file_range, src.path, start, end)), start))
            start = nxt
            while len(pending) > max_inflight:
                job, job_start = pending.popleft()
                out = job.get()
                if out.get("framing_error"):
                    _drain(pending)
                    return _restart_file(src, job_start)
                res.sink.add(out)
            bar.update(start / src.size)
    while pending:
        job, job_start = pending.popleft()
        out = job.get()
        if out.get("framing_error"):
            _drain(pending)
            return _restart_file(src, job_start)
        res.sink.add(out)
    return _restart_file(src, start)


def _drain(pending: collections.deque) -> None:
    while pending:
        pending.popleft()[0].get()


def _restart_file(src: _Source, offset: int) -> int:
    src.fh.seek(offset)
    src.offset = offset
    return offset


def _exact_rest(src: _Source, restart: bytes | int, res: StreamResult) -> None:
    """Scan the rest of the stream exactly: last events, the array's end, trailing keys."""
    buf = b"" if isinstance(restart, int) else restart
    base = (restart if isinstance(restart, int) else src.offset - len(buf))
    while True:
        block = src.read(CHUNK)
        buf += block
        if block and len(buf) < CHUNK:
            continue
        out = decode_chunk(buf, final=True)
        if out["n"] or out["meta_rows"] or out["notes"]:
            res.sink.add(out)
        if out["array_end"] is not None:
            trailer = buf[out["array_end"] + 1:] + _read_all(src)
            if not res.bare_list:
                _parse_trailer(trailer, res)
            return
        if not block:
            res.truncated = True
            kept = res.sink.n
            res.warnings.append(
                f"file ends inside the event array at byte {base + out['tail_offset']:,} of the JSON "
                f"text; kept the {kept:,} complete events before the cut")
            return
        base += out["tail_offset"]
        buf = buf[out["tail_offset"]:]


def _read_all(src: _Source) -> bytes:
    parts = []
    while True:
        block = src.read(_READ)
        if not block:
            return b"".join(parts)
        parts.append(block)


def _parse_trailer(trailer: bytes, res: StreamResult) -> None:
    """Keys after the event array (traceName, baseTimeNanoseconds in 2024-25 files, logs)."""
    text = trailer.strip()
    if not text or text == b"}":
        return
    body = text[1:] if text.startswith(b",") else text
    try:
        extra = orjson.loads(b"{" + body) if body.rstrip().endswith(b"}") else None
    except orjson.JSONDecodeError:
        extra = None
    if not isinstance(extra, dict):
        res.warnings.append("the keys after the event array are incomplete or not valid JSON")
        m = _BASE_TIME.search(body)
        extra = {"baseTimeNanoseconds": int(m.group(1))} if m else {}
    for k, v in extra.items():
        res.top.setdefault(k, v)
