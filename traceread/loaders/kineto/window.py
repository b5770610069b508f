"""The undecoded event text that chunks are decoded from, in place.

``buf`` always starts with ``[`` just before the next undecoded event (the separator there is
overwritten), so a chunk ``buf[:end + 1]`` with ``buf[end]`` set to ``]`` is a JSON array that
msgspec decodes where it lies. Two ways to hold the text:

* :class:`ReadWindow`: blocks read (or inflated) from the stream appended to one buffer whose
  decoded prefix is dropped. Works for every input.
* :class:`MappedWindow`: a plain file mapped copy-on-write: the chunks are decoded straight from
  the page cache, with no read into a fresh block and no copy into the buffer (each a pass over
  every byte of the JSON, on fresh pages). Pages behind the decoded chunks are
  dropped, so the mapping never holds much of the file; the file itself is never written (the
  bracket bytes go to private copies of their pages). A file cut short by another process while
  mapped would kill the process with SIGBUS on the first page past its new end: the compiled
  module's guard reads zeros there instead and counts it, and the window, which checks the
  count after every chunk, stops the load with a one-line error. Without the guard (the
  extension not built, or no room in its table) files are read, never mapped.
"""

from __future__ import annotations

import mmap
from typing import Any

from traceread.errors import TraceReadError
from traceread.loaders.kineto.scan import COMPILED

_GUARD = COMPILED if hasattr(COMPILED, "guard_map") else None  # see the module docstring

MAP_MIN = 8 << 20  # plain files from this size are mapped; below, reading costs next to nothing
DROP_STEP = 8 << 20  # decoded pages are given back in steps of this much


class ReadWindow:
    """Event text read from ``src`` block by block (plain or gzip)."""

    eof = False

    def __init__(self, src: Any, first: bytes | bytearray | memoryview, read_size: int) -> None:
        self.src = src
        self.read_size = read_size
        self.buf = bytearray(b"[")
        self.buf += first

    def refill(self) -> bytearray:
        """The buffer with the next block appended (``eof`` set when the stream has ended)."""
        self.eof = not self.src.read_into(self.buf, self.read_size)
        return self.buf

    def drop(self, nxt: int) -> bytearray:
        """The buffer without its decoded prefix, starting with ``[`` before the event at ``nxt``."""
        try:
            del self.buf[: nxt - 1]
        except BufferError:  # a decoded value still views the buffer: copy instead
            self.buf = bytearray(memoryview(self.buf)[nxt - 1:])
        self.buf[0] = 91  # "["
        return self.buf

    def rest(self, k: int = 1) -> bytes | int:
        """The undecoded text from ``buf[k]`` on, for the exact scan (which reads on from ``src``)."""
        return bytes(memoryview(self.buf)[k:])

    def progress(self) -> float:
        return self.src.progress()

    def close(self) -> None:
        pass


class MappedWindow:
    """A plain file's event text from file offset ``start`` on, mapped copy-on-write."""

    eof = True  # the whole rest of the file is in view

    def __init__(self, src: Any, start: int) -> None:
        self.src = src
        self.mm = mmap.mmap(src.fh.fileno(), 0, access=mmap.ACCESS_COPY)
        self.slot = _GUARD.guard_map(self.mm) if _GUARD is not None else -1
        if self.slot < 0:
            self.mm.close()
            raise OSError("no SIGBUS guard for the map: read the file instead")
        self.faults = _GUARD.guard_faults()  # type: ignore[union-attr]  # a guarded map has _GUARD
        self.base = start - 1  # file offset of buf[0], the "[" written over the byte before the text
        self.dropped = 0  # pages before this file offset were given back
        self.mm[self.base] = 91
        self.buf = memoryview(self.mm)[self.base:]

    @classmethod
    def fits(cls, src: Any, start: int) -> bool:
        # a profiler's .tmp file may still be written (or cut back): reading a mapped page past a
        # shrunk end is a fatal signal, reading the stream only ends early
        return (_GUARD is not None and not src.gzip and src.size >= MAP_MIN and start >= 1
                and not src.path.endswith(".tmp"))

    def refill(self) -> memoryview:
        return self.buf

    def check(self) -> None:
        """Raise when a page of the map was past the file's end: the file was cut while read."""
        if _GUARD is not None and _GUARD.guard_faults() != self.faults:
            raise TraceReadError(self.src.path, "the file was cut short while it was being read (written or "
                                                "truncated by another process?); read it again once it is complete")

    def drop(self, nxt: int) -> memoryview:
        self.check()  # before anything decoded from the zeros is kept: called after every chunk
        self.buf.release()
        self.base += nxt - 1
        self.mm[self.base] = 91
        self.buf = memoryview(self.mm)[self.base:]
        done = self.base - self.base % mmap.PAGESIZE
        if done - self.dropped >= DROP_STEP and hasattr(self.mm, "madvise"):
            self.mm.madvise(mmap.MADV_DONTNEED, self.dropped, done - self.dropped)
            self.dropped = done
        return self.buf

    def rest(self, k: int = 1) -> bytes | int:
        """The file offset of ``buf[k]``; the stream is positioned there for the exact scan."""
        self.check()
        offset = self.base + k
        self.src.fh.seek(offset)
        self.src.offset = offset
        return offset

    def progress(self) -> float:
        return self.base / self.src.size if self.src.size else 1.0

    def close(self) -> None:
        self.buf.release()
        try:
            self.mm.close()
        except BufferError:  # a decoded value still views the map: it closes when collected
            return  # (and keeps its guard: its pages may still be read)
        _GUARD.guard_unmap(self.slot)  # type: ignore[union-attr]  # a map exists only with a guard


def open_window(src: Any, first: bytes | bytearray | memoryview, read_size: int) -> ReadWindow | MappedWindow:
    """The window over the text from ``first`` on (``first`` was the stream's last read)."""
    start = src.offset - len(first)
    if MappedWindow.fits(src, start):
        try:
            window = MappedWindow(src, start)
        except (OSError, ValueError):  # not mappable (a pipe, a special file): read it
            return ReadWindow(src, first, read_size)
        return window
    return ReadWindow(src, first, read_size)
