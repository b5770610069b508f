"""Output written beside its formatting: a writer's pieces go to the file on a thread of their own."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable
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
