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
import queue
import re
import threading
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
_PEEK = 64 << 10  # looked at first: events are rarely longer
LOOKAHEAD = 256 << 10  # the stream's last bytes are always scanned exactly (array end, trailer)
PARALLEL_MIN = 48 << 20  # measured: below ~50 MB forking workers costs more than it saves
HEADER_MAX = 256 << 20  # give up looking for "traceEvents" after this much text
_READ = 4 << 20
_GZ_READ = 128 << 10  # compressed bytes per inflate call: about 1-3 MB of JSON
_AHEAD = 16  # inflated blocks queued ahead of the decoder
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
    """Uncompressed bytes of a plain or gzip file, read front to back.

    Gzip is inflated ahead in a background thread (isal and zlib release the GIL while
    inflating), so decompression overlaps with decoding; at most ``_AHEAD`` blocks wait.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.fh: BinaryIO = open(path, "rb")  # noqa: SIM115 - closed by close()
        self.size = os.fstat(self.fh.fileno()).st_size
        self.gzip = self.fh.read(2) == GZIP_MAGIC
        self.isize = 0
        if self.gzip and self.size >= 4:
            self.fh.seek(self.size - 4)
            self.isize = int.from_bytes(self.fh.read(4), "little")
        self.fh.seek(0)
        self.offset = 0  # uncompressed bytes handed out so far
        self.gzip_cut = False  # compressed stream ended before its end marker
        self.consumed = 0  # compressed bytes inflated so far (progress)
        self._blocks: queue.Queue | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._pending = b""
        self._ended = False

    def read(self, n: int) -> bytes:
        """At least ``n`` bytes unless the stream ends (gzip may return more: whole inflated blocks)."""
        if not self.gzip:
            data = self.fh.read(n)
            self.offset += len(data)
            return data
        if self._thread is None:
            self._blocks = queue.Queue(_AHEAD)
            self._thread = threading.Thread(target=self._inflate, name="traceread-gunzip", daemon=True)
            self._thread.start()
        out = [self._pending] if self._pending else []
        have = len(self._pending)
        self._pending = b""
        while have < n and not self._ended:
            item = self._blocks.get()  # type: ignore[union-attr]
            if item is None:
                self._ended = True
                break
            if isinstance(item, BaseException):
                self._ended = True
                raise item
            out.append(item)
            have += len(item)
        data = out[0] if len(out) == 1 else b"".join(out)
        self.offset += len(data)
        return data

    def _put(self, item: Any) -> bool:
        while not self._stop.is_set():
            try:
                self._blocks.put(item, timeout=0.1)  # type: ignore[union-attr]
                return True
            except queue.Full:
                continue
        return False

    def _inflate(self) -> None:
        """Background thread: inflate the file (concatenated members too) into the block queue."""
        inflater = _zlib.decompressobj(31)
        try:
            while not self._stop.is_set():
                raw = self.fh.read(_GZ_READ)
                self.consumed += len(raw)
                if not raw:
                    if not inflater.eof:
                        self.gzip_cut = True
                    try:
                        tail = inflater.flush()
                    except _zlib.error:
                        tail = b""
                    if tail:
                        self._put(tail)
                    break
                try:
                    data = inflater.decompress(raw)
                except _zlib.error as exc:
                    self._put(TraceReadError(self.path, f"bad gzip data ({exc})"))
                    return
                if data and not self._put(data):
                    return
                if inflater.eof:
                    rest = inflater.unused_data + self.fh.read(2)
                    self.fh.seek(self.fh.tell() - len(rest))
                    self.consumed -= len(inflater.unused_data)
                    if not rest.startswith(GZIP_MAGIC):  # trailing garbage or end: stop here
                        break
                    inflater = _zlib.decompressobj(31)  # concatenated gzip members
        except Exception as exc:  # noqa: BLE001 - re-raised in the reading thread
            self._put(exc)
            return
        self._put(None)

    def json_size_estimate(self) -> int:
        """Uncompressed size: gzip's ISIZE trailer (exact below 4 GiB, one member), else a guess."""
        if not self.gzip:
            return self.size
        return self.isize if self.isize >= self.size else self.size * 8

    def progress(self) -> float:
        done = self.consumed if self.gzip else self.fh.tell()
        return done / self.size if self.size else 1.0

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.fh.close()


def _worker_init() -> None:
    gc.disable()  # decoded events hold no cycles; the collector would only rescan them


_range_buf = bytearray()  # a worker's read buffer, reused: fresh pages cost more than the read


def _decode_file_range(path: str, start: int, end: int) -> dict[str, Any]:
    global _range_buf
    n = end - start + 2
    if len(_range_buf) < n:
        _range_buf = bytearray(n + (n >> 3))
    view = memoryview(_range_buf)[:n]
    view[0], view[n - 1] = 91, 93  # "[" ... "]"
    with open(path, "rb") as fh:
        fh.seek(start)
        fh.readinto(view[1:-1])
    return decode_framed(view)


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
                # this process decodes too (whenever the workers are busy): nworkers - 1 helpers
                pool = multiprocessing.get_context("fork").Pool(nworkers - 1, initializer=_worker_init)
            except (OSError, ValueError):  # no fork (platform, limits): decode in this process
                pool = None
        if pool is None:
            restart = _run_serial(src, rest, res, bar)
        elif src.gzip:
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


class _Dispatch:
    """Runs chunk tasks in the worker pool or, while every worker has its next task queued, here.

    Results are taken in file order, as soon as the oldest one is ready; this process only
    waits when ``max_inflight`` results are outstanding (bounded memory).
    """

    def __init__(self, pool: Any, nworkers: int) -> None:
        self.pool = pool
        self.ahead = 2 * max(nworkers - 1, 1)  # per helper: one running, one queued
        self.max_inflight = 2 * nworkers + 2

    def submit(self, pending: collections.deque, task: tuple, keep: Any) -> None:
        busy = sum(1 for job, _ in pending if not isinstance(job, _Done) and not job.ready())
        if self.pool is not None and busy < self.ahead:
            job: Any = self.pool.apply_async(task[0], task[1:])
        else:
            job = _Done(task[0](*task[1:]))
        pending.append((job, keep))

    def ready(self, pending: collections.deque) -> bool:
        """Whether the oldest result should be taken now (it is ready, or too many are out)."""
        if not pending:
            return False
        job = pending[0][0]
        return len(pending) > self.max_inflight or isinstance(job, _Done) or job.ready()


class _Done:
    def __init__(self, value: Any) -> None:
        self.value = value

    def get(self) -> Any:
        return self.value


def _run_serial(src: _Source, first: bytes, res: StreamResult, bar: Progress) -> bytes:
    """No workers: decode each chunk where it lies in the read buffer (no copy of its text).

    The buffer always starts with ``[``; the separator after a chunk's last event is overwritten
    with ``]`` for its decode, and the one before the next event becomes the next ``[``.
    Returns the bytes left for the exact scan.
    """
    buf = bytearray(b"[")
    buf += first
    eof = False
    while True:
        while len(buf) >= CHUNK + LOOKAHEAD or (eof and len(buf) > 2 * LOOKAHEAD):
            target = min(CHUNK, len(buf) - 2 * LOOKAHEAD)
            cut = find_boundary(buf, target, min(len(buf) - LOOKAHEAD, target + WINDOW))
            if cut is None:
                cut = find_boundary(buf, target, len(buf) - LOOKAHEAD)
            if cut is None:
                break
            end, nxt = cut
            sep = buf[end]
            buf[end] = 93  # "]"
            out = decode_framed(memoryview(buf)[: end + 1])
            if out.get("framing_error"):
                buf[end] = sep
                return bytes(memoryview(buf)[1:])
            res.sink.add(out)
            del out
            try:
                del buf[: nxt - 1]
            except BufferError:  # a decoded value still views the buffer: copy instead
                buf = bytearray(memoryview(buf)[nxt - 1:])
            buf[0] = 91  # "["
            bar.update(src.progress())
        if eof:
            break
        block = src.read(_READ)
        if not block:
            eof = True
        buf += block
    return bytes(memoryview(buf)[1:])


def _run_bytes(src: _Source, first: bytes, res: StreamResult, pool: Any, nworkers: int,
               bar: Progress) -> bytes | int:
    """Chunk the decompressed stream in this process; returns the bytes left for the exact scan."""
    buf = bytearray(first)
    pending: collections.deque[tuple[Any, bytearray]] = collections.deque()
    run = _Dispatch(pool, nworkers)
    eof = False
    while True:
        while len(buf) >= CHUNK + LOOKAHEAD or (eof and len(buf) > 2 * LOOKAHEAD):
            target = min(CHUNK, len(buf) - 2 * LOOKAHEAD)
            cut = find_boundary(buf, target, min(len(buf) - LOOKAHEAD, target + WINDOW))
            if cut is None:
                cut = find_boundary(buf, target, len(buf) - LOOKAHEAD)
            if cut is None:
                break
            framed = _framed(buf, cut[0])
            del buf[: cut[1]]
            run.submit(pending, (decode_framed, framed), framed)
            while run.ready(pending):
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
    job, framed = pending.popleft()
    out = job.get()
    if not out.get("framing_error"):
        res.sink.add(out)
        return None
    texts = [framed[1:-1]]
    while pending:
        later_job, later_framed = pending.popleft()
        later_job.get()
        texts.append(later_framed[1:-1])
    return b",".join(texts)


def _framed(buf: bytearray, end: int) -> bytearray:
    """``[`` + ``buf[:end]`` + ``]`` in one copy (the decoder takes the array with its brackets)."""
    framed = bytearray(end + 2)
    framed[0], framed[-1] = 91, 93
    framed[1:-1] = memoryview(buf)[:end]
    return framed


def _run_file(src: _Source, head_len: int, res: StreamResult, pool: Any, nworkers: int,
              bar: Progress) -> int:
    """Plain file: workers read their own byte ranges; returns the offset for the exact scan."""
    start = src.offset - head_len  # file offset of the first event's text
    pending: collections.deque[tuple[Any, int]] = collections.deque()
    run = _Dispatch(pool, nworkers)
    with open(src.path, "rb") as fh:
        while src.size - start > 2 * LOOKAHEAD:
            target = start + min(CHUNK, src.size - start - 2 * LOOKAHEAD)
            fh.seek(target)
            window = fh.read(min(_PEEK, src.size - LOOKAHEAD - target))
            cut = find_boundary(window, 0, len(window))
            if cut is None:  # events longer than the peek: look further
                window += fh.read(min(WINDOW, src.size - LOOKAHEAD - target) - len(window))
                cut = find_boundary(window, 0, len(window))
            if cut is None:
                break
            end, nxt = target + cut[0], target + cut[1]
            run.submit(pending, (_decode_file_range, src.path, start, end), start)
            start = nxt
            while run.ready(pending):
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
