"""Output written beside its formatting: a writer's pieces go to the file on a thread of their own, and the
files the outputs replace are let go on another (:func:`replaced_released`)."""

from __future__ import annotations

import contextlib
import os
import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import IO

# Pieces made ahead of the file's writes (a writer's pieces are about 1 MB: rowjoin.PIECE_BYTES). At least a
# table block's (a block is joined at once): with fewer, the thread encoding the next block waits to hand over
# the pieces of the last, which are held in memory anyway.
WRITE_AHEAD_PIECES = 32


def write_pieces(fh: IO[bytes], pieces: Iterable[bytes]) -> None:
    """Write ``pieces`` to ``fh`` in order, each write on a thread of its own while the next pieces are
    made: a table writer's formatting (CPU) and the kernel's copying into the page cache (which holds no
    GIL; much of a big table's time) overlap. At most ``WRITE_AHEAD_PIECES`` wait. The first
    error of either side is raised here, and nothing is written after it."""
    ahead: queue.Queue[bytes | None] = queue.Queue(maxsize=WRITE_AHEAD_PIECES)
    failed: list[BaseException] = []
    stop = threading.Event()

    def write() -> None:
        while (piece := ahead.get()) is not None:
            if stop.is_set():
                continue  # drained, unwritten: the caller stops
            try:
                fh.write(piece)
            except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread
                failed.append(exc)
                stop.set()

    writer = threading.Thread(target=write, name="traceread-write", daemon=True)
    writer.start()
    try:
        for piece in pieces:
            if stop.is_set():
                break
            ahead.put(piece)
    except BaseException:
        stop.set()
        raise
    finally:
        ahead.put(None)  # the writer drains what is queued, so there is room
        writer.join()
    if failed:
        raise failed[0]


@contextlib.contextmanager
def replaced_released() -> Iterator[Callable[[int], None]]:
    """A ``release`` for :func:`traceread.atomic.atomic_open`: each descriptor it is given (a file an output
    replaced) is closed on a thread of its own, which frees that file's pages while the command goes on (the
    next output: ``analyze``'s Markdown after its JSON); every one is closed on leaving."""
    pending: queue.Queue[int | None] = queue.Queue()
    started: list[threading.Thread] = []

    def close_all() -> None:
        while (fd := pending.get()) is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def release(fd: int) -> None:
        if not started:
            thread = threading.Thread(target=close_all, name="traceread-release", daemon=True)
            try:
                thread.start()
            except RuntimeError:  # no thread: closed here
                os.close(fd)
                return
            started.append(thread)
        pending.put(fd)

    try:
        yield release
    finally:
        if started:
            pending.put(None)
            started[0].join()
