"""Stream a Kineto file's event array in bounded chunks, decoded by one, two or more processes.

The file (plain or gzip: :mod:`source`) is read once, front to back. The header object
before ``traceEvents`` is parsed on its own; the event array is cut at guessed event boundaries
into chunks that are decoded (:mod:`decode`) where they lie in a window over the text
(:mod:`window`: a read buffer, or a plain file's copy-on-write map); :mod:`chunks` holds that
one-decoder loop. On two cores, and for mid-sized files on more, a second decoder (a thread
with the compiled scanner, else a forked child) decodes the second half of the file
(:mod:`split`); with more cores, files from ``PARALLEL_MIN`` bytes go to a worker pool in
chunks of ``chunks.CHUNK`` bytes. The last stretch of the stream, and anything after a chunk
whose boundary guess was wrong, is scanned exactly in this process, which also finds the end
of the array, the trailing keys (``baseTimeNanoseconds`` may sit there) or the place where a
truncated file stops. Memory stays bounded by the chunks in flight.
"""

from __future__ import annotations

import collections
import gc
from typing import Any

import traceread.loaders.kineto.chunks as chunks
import traceread.loaders.kineto.split as split
from traceread.loaders.kineto.chunks import (
    StreamResult,
    decode_window,
    exact_rest,
    next_cut,
    read_header,
    run_serial,
)
from traceread.loaders.kineto.decode import decode_framed, guess_int_time
from traceread.loaders.kineto.source import Source
from traceread.loaders.kineto.text import find_boundary
from traceread.loaders.kineto.window import open_window
from traceread.loaders.parallel import SERIAL, Parallel
from traceread.loaders.progress import Progress
from traceread.note import CUT_IN_EVENT_ARRAY, NO_EVENT_ARRAY, Note

_PEEK = 64 << 10  # looked at first: events are rarely longer
PARALLEL_MIN = 48 << 20  # below, a worker pool's start-up and piping cost more than it saves
PROGRESS_MIN = 64 << 20  # smaller files load in well under a second: no bar


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
        got = fh.readinto(view[1:-1])
    if got != n - 2:  # the file was cut meanwhile: the exact scan goes on from here, and stops at the cut
        return {"framing_error": True}
    return decode_framed(view)


def read_stream(path: str, sink: Any, progress: bool = False, workers: int | None = None,
                parallel: Parallel = SERIAL) -> StreamResult:
    """Read and decode every event of the Kineto file at ``path`` (see module docstring).

    ``workers`` decoders at most (default: ``parallel.cores``); the second decoder, the worker pool and the
    gunzip read-ahead are ``parallel``'s to start (the default starts none: one decoder, inline).

    Decoded chunks go to ``sink.add`` in file order as they arrive, so merging them overlaps
    with the workers' decoding and each chunk's arrays are freed once merged; ``sink.expect``
    gets the expected JSON size first.
    """
    src = Source(path, parallel=parallel)
    bar = Progress(path, progress and src.json_size_estimate() >= PROGRESS_MIN)
    nworkers = workers if workers is not None else parallel.cores
    size = src.json_size_estimate()
    # two cores: two halves beat a pool at every size (no chunk texts or results through
    # pipes, no pool threads); more cores: a pool of them for large files
    halves = nworkers > 1 and size >= split.SPLIT_MIN and (nworkers == 2 or size < PARALLEL_MIN)
    guess_int_time()
    was_enabled = gc.isenabled()
    gc.disable()  # decoded events hold no cycles (also in the child: disabled before forking)
    # the header is small next to the body: half of the file is half of the events
    split_at = max(size // 2, chunks.CHUNK)
    child = split.start_half(path, split_at, parallel) if halves else None
    src.ahead = child is None  # both cores decode: this process inflates only the text it decodes
    pool = None
    try:
        top, bare, rest = read_header(src)
        res = StreamResult(top=top, bare_list=bare, sink=sink)
        if rest is None:
            res.truncated = True
            res.warnings.append(Note.of(NO_EVENT_ARRAY))
            res.json_bytes = src.offset
            return res
        sink.expect(size)
        if nworkers > 1 and size >= PARALLEL_MIN and not halves:
            pool = parallel.fork_pool(nworkers, _worker_init)  # None: decode in this process
        parallel.beside_decode()  # the decode below runs with the GIL released; no fork from here on
        if child is not None:
            restart = _run_halves(src, rest, res, bar, child, split_at, parallel)
        elif pool is None:
            restart = run_serial(src, rest, res, bar)
        elif src.gzip:
            restart = _run_bytes(src, rest, res, pool, nworkers, bar)
        else:
            restart = _run_file(src, len(rest), res, pool, nworkers, bar)
        if restart is not None:
            exact_rest(src, restart, res)
            if src.gzip and src.gzip_cut:
                res.truncated = True
            res.json_bytes = src.offset
        if res.cut_at is not None:
            res.warnings.append(Note.of(CUT_IN_EVENT_ARRAY, cut_at=res.cut_at, kept=sink.n))
        bar.update(1.0, force=True)
        return res
    finally:
        if child is not None:
            split.stop_half(child)  # not taken: an error or a file that ended early
        if pool is not None:
            pool.terminate()
        bar.done()
        src.close()
        if was_enabled:
            gc.enable()


class _Dispatch:
    """Runs chunk tasks in the worker pool (or here, without one); results are taken in file
    order as soon as the oldest is ready, and this process waits only when ``max_inflight``
    are outstanding (bounded memory).

    This process does not decode while it has workers: a long decode call here holds the GIL
    the pool's threads need to move results, and the workers then stall.
    """

    def __init__(self, pool: Any, nworkers: int) -> None:
        self.pool = pool
        self.max_inflight = 2 * nworkers + 1

    def submit(self, pending: collections.deque, task: tuple, keep: Any) -> None:
        if self.pool is not None:
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


def _run_halves(src: Source, first: bytes | memoryview, res: StreamResult, bar: Progress,
                child: split.Child | split.Half,
                split_at: int, parallel: Parallel = SERIAL) -> bytes | int | None:
    """This process decodes up to body offset ``split_at``, the second decoder ``child`` the rest (see
    ``split``).

    Returns None when the child's rows completed the stream, else what the exact scan goes on
    from (see :func:`run_serial`).
    """
    window = open_window(src, first, chunks.READ)
    try:
        status, start = split.run_head(window, res, split_at, bar)
        if status == "split":
            msg = split.half_result(child, start, res.sink.spare_rows, parallel)
        else:
            split.stop_half(child)
            msg = None
        if msg is None:  # alone again (from the boundary, or where no boundary was found)
            src.ahead = True  # inflate ahead in a thread
            return window.rest() if status == "framing" else decode_window(window, res, bar)
    finally:
        window.close()
    res.sink.extend(msg["state"])
    for k, v in msg["top"].items():
        res.top.setdefault(k, v)
    res.warnings += msg["warnings"]
    res.truncated = msg["truncated"] or (src.gzip and msg["gzip_cut"])
    res.cut_at = msg["cut_at"]
    res.json_bytes = msg["json_bytes"]
    return None


def _run_bytes(src: Source, first: bytes | memoryview, res: StreamResult, pool: Any, nworkers: int,
               bar: Progress) -> bytes | int:
    """Chunk the decompressed stream in this process; returns the bytes left for the exact scan."""
    buf = bytearray(first)
    pending: collections.deque[tuple[Any, bytearray]] = collections.deque()
    run = _Dispatch(pool, nworkers)
    eof = False
    searched = 0
    while True:
        while len(buf) >= chunks.CHUNK + chunks.LOOKAHEAD or (eof and len(buf) > 2 * chunks.LOOKAHEAD):
            cut = next_cut(buf, chunks.CHUNK, searched)
            if cut is None:
                searched = chunks.searched_to(buf)
                break
            framed = _framed(buf, cut[0])
            del buf[: cut[1]]
            searched = 0
            run.submit(pending, (decode_framed, framed), framed)
            while run.ready(pending):
                redo = _collect(pending, res)
                if redo is not None:
                    return redo + b"," + bytes(buf)
            bar.update(src.progress())
        if eof or len(buf) > chunks.NO_BOUNDARY_MAX:  # a long stretch without a boundary: scanned exactly
            break
        eof = not src.read_into(buf, chunks.READ)
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


def _run_file(src: Source, head_len: int, res: StreamResult, pool: Any, nworkers: int,
              bar: Progress) -> int:
    """Plain file: workers read their own byte ranges; returns the offset for the exact scan."""
    start = src.offset - head_len  # file offset of the first event's text
    pending: collections.deque[tuple[Any, int]] = collections.deque()
    run = _Dispatch(pool, nworkers)
    with open(src.path, "rb") as fh:
        while src.size - start > 2 * chunks.LOOKAHEAD:
            target = start + min(chunks.CHUNK, src.size - start - 2 * chunks.LOOKAHEAD)
            fh.seek(target)
            window = fh.read(min(_PEEK, src.size - chunks.LOOKAHEAD - target))
            cut = find_boundary(window, 0, len(window))
            if cut is None:  # events longer than the peek: look further
                window += fh.read(min(chunks.WINDOW, src.size - chunks.LOOKAHEAD - target) - len(window))
                cut = find_boundary(window, 0, len(window))
            if cut is None:
                break
            end, nxt = target + cut[0], target + cut[1]
            run.submit(pending, (_decode_file_range, src.path, start, end), start)
            start = nxt
            while run.ready(pending):
                redo = _take_range(pending, res, src)
                if redo is not None:
                    return redo
            bar.update(start / src.size)
    while pending:
        redo = _take_range(pending, res, src)
        if redo is not None:
            return redo
    return _restart_file(src, start)


def _take_range(pending: collections.deque, res: StreamResult, src: Source) -> int | None:
    """Add the oldest file range's result; on a framing error, the offset to rescan it from."""
    job, job_start = pending.popleft()
    out = job.get()
    if out.get("framing_error"):
        _drain(pending)
        return _restart_file(src, job_start)
    res.sink.add(out)
    return None


def _drain(pending: collections.deque) -> None:
    while pending:
        pending.popleft()[0].get()


def _restart_file(src: Source, offset: int) -> int:
    src.fh.seek(offset)
    src.offset = offset
    return offset


