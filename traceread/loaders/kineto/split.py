"""Two-way decode on two cores: a second decoder, thread or forked child, takes the second half.

Both are the caller's (a :class:`~traceread.loaders.parallel.Parallel`: the runner's threads and forks;
the default starts neither, and the load decodes alone). With the compiled scanner, which releases the GIL
while it scans, the second decoder is a thread (:class:`Half`): both halves' rows stay in this process, so none cross a pipe and
neither half pays its own page faults for a private copy. With the msgspec path, which holds
the GIL, it is a forked child, as described next.

A worker pool pays for itself only with more cores (its start-up and the chunk texts it pipes
to the workers cost too much here). In this split nothing but results crosses processes: the
child, forked before anything is read, reads the file itself (a plain file from the middle, a
gzip stream inflated up to the middle), starts at the first event boundary guessed after the
middle, decodes to the end and sends back its finished rows, whose bytes land straight in this
process's frame. This process decodes up to that same boundary, found the same way in the same
bytes. The child's rows are used only when this process's last chunk, which ends at the
boundary, decodes: that proves the guess was a real event boundary (a wrong guess makes the
chunk fail and this process simply continues alone).
"""

from __future__ import annotations

import os
import pickle
import signal
from dataclasses import dataclass
from typing import Any

import traceread.loaders.kineto.chunks as chunks
import traceread.loaders.kineto.scan as scan
from traceread.loaders.kineto.chunks import StreamResult, exact_rest, read_header, run_serial
from traceread.loaders.kineto.frame import FrameBuilder
from traceread.loaders.kineto.source import Source
from traceread.loaders.kineto.text import find_boundary
from traceread.loaders.kineto.window import MappedWindow, ReadWindow
from traceread.loaders.parallel import SERIAL, Flag, Parallel, Task
from traceread.loaders.progress import Progress

_PIPE_SIZE = 1 << 20  # Linux's default cap for an unprivileged process (/proc/sys/fs/pipe-max-size)
SPLIT_MIN = 16 << 20  # JSON bytes; below, forking and the pipe cost about what the second core saves
_COPY_SPLIT_MIN = 4 << 20  # bytes per thread below which a second copying thread is not worth starting


@dataclass
class Child:
    """A forked decoding child: its pid and the read end of its result pipe."""

    pid: int
    fd: int
    done: bool = False  # its result was taken or it was stopped


class _Stopped(Exception):
    """Raised inside a :class:`Half`'s decoding when this process no longer wants its rows."""


class Half:
    """The second half decoded by a thread of this process (the compiled scanner's GIL-free path)."""

    def __init__(self, path: str, split_at: int, parallel: Parallel) -> None:
        self.stop = parallel.flag()
        self.done = False
        self.parallel = parallel
        task = parallel.thread(lambda: self._run(path, split_at), "traceread-half")
        if task is None:
            raise RuntimeError("no thread for the second half")
        self.task: Task[dict[str, Any] | None] = task

    def _run(self, path: str, split_at: int) -> dict[str, Any] | None:
        try:
            return _child(path, split_at, self.parallel, self.stop)
        except BaseException:  # noqa: BLE001 - any failure (or a stop): this process goes on alone
            return None

    def result(self, start: int, spare_rows: Any) -> dict[str, Any] | None:
        """Wait for the thread; its rows are copied into ``spare_rows(n)`` when it began at ``start``."""
        self.done = True
        msg = self.task.result()
        if not msg or not msg.get("ok") or msg["start"] != start:
            return None
        columns = msg.pop("rows")
        copy_columns(spare_rows(msg["state"]["n"]), columns, self.parallel)
        return msg

    def cancel(self) -> None:
        if not self.done:
            self.done = True
            self.stop.set()
            self.task.result()


def copy_columns(dst: dict[str, Any], src: dict[str, Any], parallel: Parallel = SERIAL) -> None:
    """``dst[name][:] = src[name]`` for every column, on two threads when there is much to copy (the second
    one ``parallel``'s).

    The rows land on fresh pages, whose first-touch faults are most of the copy's cost, and numpy
    releases the GIL while it copies, so two threads fault in and fill the pages of their halves
    at once (split by bytes, so the halves take about as long).
    """
    a: list[str] = []
    b: list[str] = []
    size_a = size_b = 0
    for name in sorted(src, key=lambda k: -src[k].nbytes):  # two groups of about equal bytes
        if size_a <= size_b:
            a.append(name)
            size_a += src[name].nbytes
        else:
            b.append(name)
            size_b += src[name].nbytes
    failed: list[BaseException] = []

    def copy(names: list[str]) -> None:
        try:
            for name in names:
                dst[name][:] = src[name]
        except BaseException as exc:  # noqa: BLE001 - re-raised by the caller's thread below
            failed.append(exc)

    # declined (no thread: its stack does not fit under --max-memory): copied here
    helper = parallel.thread(lambda: copy(b), "traceread-copy") if size_b >= _COPY_SPLIT_MIN else None
    copy(a if helper is not None else a + b)
    if helper is not None:
        helper.result()
    if failed:
        raise failed[0]


def start_half(path: str, split_at: int, parallel: Parallel) -> Child | Half | None:
    """The second decoder for the events from body offset ``split_at``: a thread where chunks go
    to the compiled scanner, else a forked child (None when ``parallel`` starts neither)."""
    if scan.enabled():
        try:
            return Half(path, split_at, parallel)
        except RuntimeError:  # no thread (its stack does not fit under --max-memory): decode alone
            return None
    return start_child(path, split_at, parallel)


def start_child(path: str, split_at: int, parallel: Parallel) -> Child | None:
    """Fork the child that decodes from the first boundary after body offset ``split_at``.

    Called before this process reads anything: the less memory the two share when forking, the
    fewer pages either copies on its first write (each copy is a page fault).
    Returns None when forking is not possible.
    """
    try:
        r, w = os.pipe()
    except OSError:
        return None
    _widen(w)
    pid = parallel.fork()
    if pid is None:
        os.close(r)
        os.close(w)
        return None
    if pid:
        os.close(w)
        return Child(pid, r)
    code = 0
    try:  # the child: never returns into the caller's code
        os.close(r)
        msg = _child(path, split_at, parallel)
        columns = msg.pop("rows", {})
        msg["layout"] = [(k, a.dtype.str, len(a)) for k, a in columns.items()]
        with os.fdopen(w, "wb") as out:
            pickle.dump(msg, out, protocol=pickle.HIGHEST_PROTOCOL)
            for a in columns.values():  # raw bytes, read straight into the frame's rows
                out.write(memoryview(a).cast("B"))
    except BaseException:  # noqa: BLE001 - any failure: the parent goes on alone
        code = 1
    finally:
        os._exit(code)


def _widen(fd: int) -> None:
    """Grow the pipe's buffer: with the default 64 KiB the rows cross in many small writes, each a
    system call and a wake-up of the reader."""
    try:
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), _PIPE_SIZE)
    except (ImportError, OSError):
        pass


def _child(path: str, split_at: int, parallel: Parallel, stop: Flag | None = None) -> dict[str, Any]:
    src = Source(path, ahead=False, parallel=parallel)  # both cores decode: inflate inline, no thread
    top, bare, rest = read_header(src)
    if rest is None:
        return {"ok": False}
    buf = bytearray(rest)
    pos = 0  # body offset of buf[0]
    want = split_at + chunks.WINDOW
    if not src.gzip and split_at > len(buf):  # a plain file: jump straight to the middle
        body_start = src.offset - len(buf)
        src.fh.seek(body_start + split_at)
        src.offset = body_start + split_at
        buf, pos = bytearray(), split_at
    while pos + len(buf) < want:
        # gzip: one inflated block, never joined; a plain file: the boundary search's window (the
        # chunks themselves come from the file map, so more read here is only copied)
        block = src.read(1 if src.gzip else chunks.WINDOW)
        if not block:
            break
        if not buf and pos + len(block) <= split_at:  # wholly before the split: dropped uncopied
            pos += len(block)
            continue
        buf += block
        drop = min(split_at - pos, len(buf))
        if drop > 0:
            del buf[:drop]
            pos += drop
    lo = split_at - pos
    if lo < 0:
        return {"ok": False}
    cut = find_boundary(buf, lo, min(len(buf), want - pos))
    if cut is None:
        return {"ok": False}
    builder = FrameBuilder() if stop is None else _stoppable_builder(stop)
    builder.expect(max(src.json_size_estimate() - src.offset + len(buf), 0))
    res = StreamResult(top={}, bare_list=bare, sink=builder)
    bar = Progress(path, False)
    restart = run_serial(src, bytes(memoryview(buf)[cut[1]:]), res, bar)
    del buf
    exact_rest(src, restart, res)
    return {"ok": True, "start": pos + cut[1], "state": builder.state(), "rows": builder.rows(), "top": res.top,
            "truncated": res.truncated, "cut_at": res.cut_at, "warnings": res.warnings,
            "json_bytes": src.offset, "gzip_cut": src.gzip_cut}


def _stoppable_builder(stop: Flag) -> Any:
    """A frame builder whose ``add`` raises once ``stop`` is set (ends a :class:`Half` early)."""
    class Builder(FrameBuilder):
        def add(self, c: dict[str, Any]) -> None:
            if stop.is_set():
                raise _Stopped
            super().add(c)

    return Builder()


def half_result(half: Child | Half, start: int, spare_rows: Any, parallel: Parallel = SERIAL) -> dict[str, Any] | None:
    """The second decoder's result when it started at body offset ``start`` (None when it failed)."""
    if isinstance(half, Half):
        return half.result(start, spare_rows)
    return child_result(half, start, spare_rows, parallel)


def stop_half(half: Child | Half) -> None:
    if isinstance(half, Half):
        half.cancel()
    else:
        stop_child(half)


def child_result(child: Child, start: int, spare_rows: Any, parallel: Parallel = SERIAL) -> dict[str, Any] | None:
    """The child's result when it started at body offset ``start`` (None when it failed).

    Its column bytes are read straight into ``spare_rows(n)`` (the receiving builder's next
    rows): no unpickled copy, no second copy into the frame.
    """
    child.done = True
    msg = None
    try:
        with os.fdopen(child.fd, "rb") as fh:
            msg = pickle.load(fh)
            if msg and msg.get("ok") and msg["start"] == start:
                rows = spare_rows(msg["state"]["n"])
                for name, dtype, length in msg["layout"]:
                    view = rows[name]
                    if view.dtype.str != dtype or len(view) != length or not _read_exact(fh, view):
                        msg = None
                        break
    except (OSError, pickle.UnpicklingError, EOFError, ValueError, KeyError):
        msg = None
    _reap(child.pid, parallel)
    return msg if msg and msg.get("ok") and msg["start"] == start else None


def _reap(pid: int, parallel: Parallel) -> None:
    """Collect the exited child in a thread: its teardown (freeing its memory) need not hold this one up
    (here, when ``parallel`` declines)."""
    if parallel.thread(lambda: _wait(pid), "traceread-reap") is None:
        _wait(pid)


def _wait(pid: int) -> None:
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def _read_exact(fh: Any, array: Any) -> bool:
    view = memoryview(array).cast("B")
    got = 0
    while got < len(view):
        k = fh.readinto(view[got:])
        if not k:
            return False
        got += k
    return True


def stop_child(child: Child) -> None:
    if child.done:
        return
    child.done = True
    try:
        os.kill(child.pid, signal.SIGKILL)
    except OSError:
        pass
    os.close(child.fd)
    os.waitpid(child.pid, 0)


def run_head(window: ReadWindow | MappedWindow, res: StreamResult, split_at: int, bar: Progress | None = None) -> tuple[str, int]:
    """Decode the events of ``window`` before the boundary guessed after body offset ``split_at``.

    Returns (status, start): "split" (every chunk up to the boundary decoded; the window now
    starts there, at body offset ``start``), "nosplit" (no boundary where the child looks: the
    window starts at an event, undecoded) or "framing" (a chunk failed: the window's rest goes
    to the exact scan). Body offsets count from the window's first byte after ``[``.
    """
    chunk, span = chunks.serial_chunk(), chunks.WINDOW
    buf = window.buf
    pos = 0  # body offset of buf[1]
    split: tuple[int, int] | None = None  # body offsets: end of the last event, start of the next
    while True:
        if split is None and (pos + len(buf) - 1 >= split_at + span or window.eof):
            lo = split_at - pos + 1
            cut = find_boundary(buf, lo, min(len(buf), split_at + span - pos + 1)) if lo >= 1 else None
            if cut is None:
                return "nosplit", pos
            split = (pos + cut[0] - 1, pos + cut[1] - 1)
        if split is not None:
            end_idx = split[0] - pos + 1
            if end_idx <= chunk + span:
                cut = (end_idx, split[1] - pos + 1)
            else:
                cut = find_boundary(buf, chunk, min(chunk + span, end_idx))
        elif len(buf) >= chunk + span:
            cut = find_boundary(buf, chunk, min(chunk + span, split_at - pos + 1))
        else:
            cut = None
        if cut is None and split is not None:  # no boundary in the usual window: one longer chunk
            cut = (split[0] - pos + 1, split[1] - pos + 1)
        if cut is None:
            if window.eof or (split is None and len(buf) > chunks.NO_BOUNDARY_MAX):  # see decode_window
                return "nosplit", pos
            buf = window.refill()
            continue
        end, nxt = cut
        if not chunks.decode_in_place(buf, end, res):
            return "framing", pos
        at_split = split is not None and end == split[0] - pos + 1
        buf = window.drop(nxt)
        pos += nxt - 1
        if at_split:
            return "split", pos
        if bar is not None:  # the child keeps pace: this half's progress is half the whole
            bar.update(min(pos / split_at, 1.0) / 2)
