"""The uncompressed bytes of a Kineto file (plain or gzip), read front to back."""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterator
from typing import BinaryIO, cast

from traceread.errors import TraceReadError
from traceread.limits import check_inflated
from traceread.loaders.parallel import SERIAL, Ahead, Parallel

try:  # isal's inflate is about twice as fast as zlib's; same API
    from isal import isal_zlib as _zlib
except ImportError:  # pragma: no cover - isal is optional
    _zlib = zlib  # type: ignore[misc]  # zlib stands in for isal_zlib: the same API, another module
# isal's stub declares ``error`` as an exception instance; it is the exception class
_INFLATE_ERROR = cast("type[Exception]", _zlib.error)

GZIP_MAGIC = b"\x1f\x8b"
_GZ_READ = 128 << 10  # compressed bytes per inflate call: about 1-3 MB of JSON
_AHEAD = 16  # inflated blocks queued ahead of the decoder
_TRAILER = 8  # a gzip member's CRC-32 and length


class Source:
    """Uncompressed bytes of a plain or gzip file, read front to back.

    Gzip is inflated ahead by ``parallel`` (:meth:`~traceread.loaders.parallel.Parallel.ahead`: a
    thread; isal and zlib release the GIL while inflating), so decompression overlaps with decoding;
    at most ``_AHEAD`` blocks wait. With ``ahead`` False, or a ``parallel`` that declines, it is
    inflated on demand in the reading thread: when every core is already decoding, inflating ahead
    only inflates text this process will never decode.
    """

    def __init__(self, path: str, ahead: bool = True, parallel: Parallel = SERIAL) -> None:
        self.path = path
        self.fh: BinaryIO = open(path, "rb")  # noqa: SIM115 - closed by close()
        self.size = os.fstat(self.fh.fileno()).st_size
        self.gzip = self.fh.read(2) == GZIP_MAGIC
        self.isize = 0
        if self.gzip and self.size >= 4:
            self.fh.seek(self.size - 4)
            self.isize = int.from_bytes(self.fh.read(4), "little")
        self.fh.seek(0)
        self.ahead = ahead
        self.offset = 0  # uncompressed bytes handed out so far
        self.gzip_cut = False  # compressed stream ended before its end marker
        self.gzip_bad_check = False  # a member's CRC or length trailer does not match its data
        self.consumed = 0  # compressed bytes inflated so far (progress)
        self.inflated = 0  # uncompressed bytes produced so far (the gzip-bomb limits)
        self._parallel = parallel
        self._ahead: Ahead[bytes] | None = None
        self._inflated: Iterator[bytes] | None = None
        self._ended = False

    def read(self, n: int) -> bytes:
        """At least ``n`` bytes unless the stream ends (gzip may return more: whole inflated blocks)."""
        if not self.gzip:
            return self._read_plain(n)
        blocks = self._take(n)
        return blocks[0] if len(blocks) == 1 else b"".join(blocks)

    def read_into(self, buf: bytearray, n: int) -> int:
        """Append at least ``n`` bytes (unless the stream ends) to ``buf``; returns how many.

        Inflated blocks go straight into ``buf``: no joined copy in between.
        """
        blocks = [self._read_plain(n)] if not self.gzip else self._take(n)
        for block in blocks:
            buf += block
        return sum(map(len, blocks))

    def _read_plain(self, n: int) -> bytes:
        data = self.fh.read(n)
        self.offset += len(data)
        return data

    def _take(self, n: int) -> list[bytes]:
        """Inflated blocks adding up to at least ``n`` bytes, unless the stream ends first."""
        out: list[bytes] = []
        have = 0
        while have < n and not self._ended:
            item = self._next_block()
            if item is None:
                self._ended = True
                break
            out.append(item)
            have += len(item)
        self.offset += have
        return out

    def _next_block(self) -> bytes | None:
        if self.ahead and self._ahead is None:
            # goes on where on-demand reads stopped
            self._ahead = self._parallel.ahead(self._inflated or self._inflate(), _AHEAD, "traceread-gunzip")
            if self._ahead is None:  # declined: inline
                self.ahead = False
        if not self.ahead or self._ahead is None:
            if self._inflated is None:
                self._inflated = self._inflate()
            try:
                return next(self._inflated)
            except StopIteration:
                return None
            except BaseException:
                self._ended = True
                raise
        try:
            return self._ahead.next()
        except BaseException:
            self._ended = True
            raise

    def _inflate(self) -> Iterator[bytes]:
        """Inflated blocks of the file (concatenated members too); raises on bad gzip data.

        The last ``_TRAILER`` bytes read are held back until more follow (or the file ends): a
        member's CRC and length trailer is then checked in a call of its own, so a trailer that
        does not match loses no data with the error. Such a file loads, with a warning
        (``gzip_bad_check``), as a gzip cut short does.
        """
        inflater = _zlib.decompressobj(31)
        held = b""
        while True:
            raw = self.fh.read(_GZ_READ)
            self.consumed += len(raw)
            feed = held + raw
            feed, held = (feed[:-_TRAILER], feed[-_TRAILER:]) if raw else (feed, b"")
            try:
                data = inflater.decompress(feed) if feed else b""
            except _INFLATE_ERROR as exc:
                if "check" not in str(exc).lower():  # zlib: incorrect data/length check; isal: checksum
                    raise TraceReadError(self.path, f"bad gzip data ({exc})") from None
                self.gzip_bad_check = True
                return
            if data:
                self.inflated += len(data)
                check_inflated(self.path, self.inflated, self.consumed)
                yield data
            if inflater.eof:
                rest = inflater.unused_data + held + self.fh.read(2)
                self.fh.seek(self.fh.tell() - len(rest))
                self.consumed -= len(inflater.unused_data) + len(held)
                held = b""
                if not rest.startswith(GZIP_MAGIC):  # trailing garbage or end: stop here
                    return
                inflater = _zlib.decompressobj(31)  # concatenated gzip members
                continue
            if not raw:
                self.gzip_cut = True
                try:
                    tail = inflater.flush()
                except _INFLATE_ERROR:
                    tail = b""
                if tail:
                    yield tail
                return

    def json_size_estimate(self) -> int:
        """Uncompressed size: gzip's ISIZE trailer (exact below 4 GiB, one member), else a guess."""
        if not self.gzip:
            return self.size
        return self.isize if self.isize >= self.size else self.size * 8

    def progress(self) -> float:
        done = self.consumed if self.gzip else self.fh.tell()
        return done / self.size if self.size else 1.0

    def close(self) -> None:
        if self._ahead is not None:
            self._ahead.close()
        self.fh.close()


def read_whole(path: str, what: str) -> bytes:
    """The whole JSON text of ``path`` (plain or gzip, under the gzip limits :class:`Source` enforces), for a
    reader that decodes a document at once; a gzip stream that ends early is refused naming ``what``."""
    from traceread.errors import TraceReadError

    src = Source(path, ahead=False)
    try:
        chunks = []
        while block := src.read(64 << 20):
            chunks.append(block)
        cut = src.gzip_cut
    finally:
        src.close()
    if cut:
        raise TraceReadError(path, f"not a readable {what} file (the gzip stream ends early: truncated)")
    return b"".join(chunks)
