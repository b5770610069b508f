"""One decoder's work on the event array: cut it into chunks at event boundaries, decode each
where it lies, then scan the rest of the stream exactly.

Both decoders of a load run this: :mod:`stream` in this process (alone, or for the first half),
and :mod:`split`'s second decoder for the second half. The header object before
``traceEvents`` is parsed on its own (:func:`read_header`); chunks are decoded
(:mod:`decode`) where they lie in a window over the text (:mod:`window`: a read buffer, or a
plain file's copy-on-write map); the last stretch of the stream, and anything after a chunk
whose boundary guess was wrong, is scanned exactly (:func:`exact_rest`), which also finds the
end of the array, the trailing keys (``baseTimeNanoseconds`` may sit there) or the place where
a truncated file stops. The sizes below are read at call time (tests shrink them).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

import traceread.loaders.kineto.scan as scan
from traceread.errors import TraceReadError
from traceread.limits import bounded_int
from traceread.loaders.kineto.decode import decode_chunk, decode_framed
from traceread.loaders.kineto.source import Source
from traceread.loaders.kineto.text import (
    TRACE_EVENTS_KEY,
    ArrayScanner,
    blank,
    find_boundary,
    top_level_key_start,
)
from traceread.loaders.kineto.window import MappedWindow, ReadWindow, open_window
from traceread.loaders.progress import Progress
from traceread.note import GZIP_CHECK_MISMATCH, TRAILER_NOT_JSON, Note

CHUNK = 4 << 20  # bytes of JSON per worker task: large enough to amortize IPC, small for memory
SERIAL_CHUNK: int | None = None  # in-process chunk bytes; None: by decoder (serial_chunk), tests set it
MSGSPEC_CHUNK = 1 << 20  # msgspec chunks: smaller than the scanner's (fewer fresh pages, warm caches)
SCANNER_CHUNK = 4 << 20  # compiled-scanner chunks: the per-chunk Python work (value tables, merging)
# is amortized over 4x the rows of a 1 MB chunk
WINDOW = 1 << 20  # how far past a chunk's target size to look for an event boundary
LOOKAHEAD = 256 << 10  # the stream's last bytes are always scanned exactly (array end, trailer)
HEADER_MAX = 256 << 20  # give up looking for "traceEvents" after this much text
READ = 4 << 20  # bytes per read of the stream
NO_BOUNDARY_MAX = 16 << 20  # undecoded text without an event boundary past this goes to the exact scan
_OVERLAP = 4 << 10  # a boundary search that found nothing is resumed this far before where it ended
_NON_SPACE = re.compile(rb"[^ \t\r\n]")
_BASE_TIME = re.compile(rb'"baseTimeNanoseconds"\s*:\s*([0-9]+)')


@dataclass
class StreamResult:
    """What the stream held: top-level keys, decoded chunks (in file order), how it ended."""

    top: dict[str, Any]
    bare_list: bool
    sink: Any = None  # receives each decoded chunk in file order: sink.add(chunk); sink.n = rows so far
    truncated: bool = False
    warnings: list[Note | str] = field(default_factory=list)
    json_bytes: int = 0  # uncompressed bytes read
    cut_at: int | None = None  # where a truncated event array stops (uncompressed offset)


def serial_chunk() -> int:
    """Bytes per in-process chunk: larger for the compiled scanner, whose per-row cost is small."""
    return min(CHUNK, SERIAL_CHUNK or (SCANNER_CHUNK if scan.enabled() else MSGSPEC_CHUNK))


def read_header(src: Source) -> tuple[dict[str, Any], bool, memoryview | None]:
    """Top-level keys before the event array, bare-list flag, and the bytes after ``[``.

    The bytes (a view: the first block is MBs, not copied) are None when the file ends inside
    the header (truncated before any event).
    """
    buf = b""
    while True:
        block = src.read(1 << 20)
        buf += block
        start = _NON_SPACE.search(buf)
        if start is None:
            if block:
                continue
            raise TraceReadError(src.path, "empty file" if not src.gzip else "empty file (gzip holds no data)")
        lead = start.start()
        if buf.startswith(_BOM, lead) and not buf[:lead].strip():  # a UTF-8 byte order mark (some editors write one)
            start = _NON_SPACE.search(buf, lead + len(_BOM))
            if start is None:
                if block:
                    continue
                raise TraceReadError(src.path, "empty file (a byte order mark only)")
            lead = start.start()
        first = buf[lead: lead + 1]
        if first == b"[":
            return {}, True, memoryview(buf)[lead + 1:]
        if first != b"{":
            raise TraceReadError(src.path, "not a trace: not JSON (expected '{' or '[')")
        for m in TRACE_EVENTS_KEY.finditer(buf, lead):
            if top_level_key_start(buf, lead, m.start()):
                head = buf[lead + 1: m.start()].rstrip().rstrip(b",")
                top = _loads_object(b"{" + head + b"}") or {}
                return top, False, memoryview(buf)[m.end():]
        if (kind := _events_not_array(buf, lead)) is not None:  # not a truncation: a value of another type
            raise TraceReadError(src.path, f"not a trace: traceEvents is {kind}, not an array of events")
        if not block and (src.gzip_cut or b'"schemaVersion"' in buf or b'"deviceProperties"' in buf):
            return {}, False, None  # a Kineto header cut short before the event array
        if not block or len(buf) > HEADER_MAX:
            raise TraceReadError(src.path, "not a Kineto trace: no traceEvents array")


PEEK_HEADER = 256 << 10  # peek_header's look at a file's start: Kineto headers are a few KB
_PEEK_STEP = 16 << 10


def peek_header(path: str, limit: int = PEEK_HEADER) -> dict[str, Any] | None:
    """The top-level keys a Kineto file writes before its event array, from its first ``limit``
    (uncompressed) bytes only, as :func:`read_header` parses them; None when the file is not such
    an object, its header is longer, or it cannot be read. For ``scan``, which tells copies of one
    capture (one ``trace_id``) apart before analysing anything."""
    try:
        src = Source(path, ahead=False)
    except OSError:
        return None
    try:
        buf = b""
        while len(buf) < limit:  # a few KB hold most headers: read on only while the key is not found
            block = src.read(_PEEK_STEP)
            searched = max(0, len(buf) - 256)  # a key (and its spaces) cut by the block end is found again
            buf += block
            start = _NON_SPACE.search(buf)
            if start is not None and buf[start.start(): start.start() + 1] != b"{":
                return None
            if start is not None:
                lead = start.start()
                for m in TRACE_EVENTS_KEY.finditer(buf, max(lead, searched)):
                    if top_level_key_start(buf, lead, m.start()):
                        return _loads_object(b"{" + buf[lead + 1: m.start()].rstrip().rstrip(b",") + b"}")
            if not block:
                break
        return None
    except (OSError, TraceReadError, EOFError, ValueError):
        return None
    finally:
        src.close()


_BOM = b"\xef\xbb\xbf"
_EVENTS_ANY = re.compile(rb'"traceEvents"[ \t\r\n]*:[ \t\r\n]*([^\[ \t\r\n])')
_KINDS = {ord('"'): "a string", ord("n"): "null", ord("{"): "an object", ord("t"): "a boolean", ord("f"): "a boolean"}


def _events_not_array(buf: bytes, lead: int) -> str | None:
    """What a top-level ``traceEvents`` holds when it is not an array ("a string", "null"), else None."""
    for m in _EVENTS_ANY.finditer(buf, lead):
        if top_level_key_start(buf, lead, m.start()):
            return _KINDS.get(buf[m.start(1)], "a number")
    return None


def next_cut(buf: bytearray | memoryview, chunk: int, searched: int = 0) -> tuple[int, int] | None:
    """The event boundary nearest after ``chunk`` bytes of ``buf`` (searching further if the usual
    window holds none), as (end of the last event, start of the next); None when there is none yet.

    ``buf[:searched]`` is known to hold none (see :func:`searched_to`): a buffer that grows
    without a boundary is searched once, not again from its start for every block.
    """
    target = min(chunk, len(buf) - 2 * LOOKAHEAD)
    lo = max(target, searched)
    cut = find_boundary(buf, lo, min(len(buf) - LOOKAHEAD, target + WINDOW))
    if cut is None:
        cut = find_boundary(buf, lo, len(buf) - LOOKAHEAD)
    return cut


def searched_to(buf: bytearray | memoryview) -> int:
    """Where the next boundary search of ``buf`` may start after :func:`next_cut` found none in it.

    The search ended ``LOOKAHEAD`` bytes before the end; a boundary straddling that point (its
    ``}``, whitespace, ``,``) starts at most ``_OVERLAP`` bytes before it unless it holds more
    whitespace than that, and a boundary missed that way only makes a chunk longer (or leaves
    the text to the exact scan): never a wrong event.
    """
    return max(len(buf) - LOOKAHEAD - _OVERLAP, 0)


def decode_in_place(buf: bytearray | memoryview, end: int, res: StreamResult) -> bool:
    """Decode ``buf[:end + 1]`` (which starts with ``[``) where it lies, closing it with ``]``.

    Adds the columns to ``res``; on a framing error restores the separator and returns False.
    """
    sep = buf[end]
    buf[end] = 93  # "]"
    out = decode_framed(memoryview(buf)[: end + 1])
    if out.get("framing_error"):
        buf[end] = sep
        return False
    res.sink.add(out)
    return True


def run_serial(src: Source, first: bytes | memoryview, res: StreamResult, bar: Progress) -> bytes | int:
    """No workers: decode each chunk where it lies (``window``), from ``first`` on.

    Returns what the exact scan goes on from: the bytes left, or the file offset where they start.
    """
    window = open_window(src, first, READ)
    try:
        return decode_window(window, res, bar)
    finally:
        window.close()


def decode_window(window: ReadWindow | MappedWindow, res: StreamResult, bar: Progress) -> bytes | int:
    """Decode chunk after chunk of ``window`` until its last ``2 * LOOKAHEAD`` bytes.

    The separator after a chunk's last event is overwritten with ``]`` for its decode, and the
    one before the next event becomes the next ``[``.
    """
    chunk = serial_chunk()
    buf = window.buf
    searched = 0
    while True:
        while len(buf) >= chunk + LOOKAHEAD or (window.eof and len(buf) > 2 * LOOKAHEAD):
            cut = next_cut(buf, chunk, searched)
            if cut is None:
                searched = searched_to(buf)
                break
            end, nxt = cut
            if not decode_in_place(buf, end, res):
                return window.rest()
            buf = window.drop(nxt)
            searched = 0
            bar.update(window.progress())
        if window.eof or len(buf) > NO_BOUNDARY_MAX:  # a long stretch without a boundary: scanned exactly
            break
        buf = window.refill()
    return window.rest()


def exact_rest(src: Source, restart: bytes | int, res: StreamResult) -> None:
    """Scan the rest of the stream exactly: last events, the array's end, trailing keys.

    Linear on any input: an :class:`ArrayScanner` looks at each byte once as blocks arrive; the
    complete events are decoded once, in pieces of about ``CHUNK`` bytes, and dropped; a stretch
    between values (whitespace, commas) is not kept. Only an event still open is held, however
    long it is. (Rescanning a growing buffer per block would be quadratic in a long stretch.)
    """
    scanner = ArrayScanner()
    buf = bytearray()  # undecoded text: complete events (buf[:complete]), then an open one
    complete = 0
    offset = restart if isinstance(restart, int) else src.offset - len(restart)  # of the next block
    done = offset  # stream offset just past the last complete event (where a truncated file is cut)
    for block in _blocks(src, restart):
        if scanner.between_values and blank(block):
            offset += len(block)
            continue
        end, array_end = scanner.feed(block)
        at = len(buf)
        buf += block
        if array_end is not None:
            _decode_exact(buf, at + array_end, res)
            trailer = bytes(memoryview(buf)[at + array_end + 1:]) + _read_all(src)
            if not res.bare_list and "traceEvents" in _parse_trailer(trailer, res):
                # a JSON reader keeps the last of a repeated key, this reader the first: neither is sure
                raise TraceReadError(src.path, "not a trace: the key traceEvents appears twice (which array "
                                               "holds the events is not sure)")
            _note_bad_check(src, res)
            return
        if end is not None:
            complete, done = at + end, offset + end
        offset += len(block)
        if scanner.between_values:
            del buf[complete:]  # after the last complete event: separators (or stray values) only
        if complete >= CHUNK:
            _decode_exact(buf, complete, res)
            del buf[:complete]
            complete = 0
    _decode_exact(buf, complete, res)
    res.truncated = True
    res.cut_at = done  # the warning is written once all rows are counted
    _note_bad_check(src, res)


def _note_bad_check(src: Source, res: StreamResult) -> None:
    if src.gzip_bad_check:
        res.warnings.append(Note.of(GZIP_CHECK_MISMATCH))


def _blocks(src: Source, restart: bytes | int) -> Iterator[bytes | memoryview]:
    """The text the exact scan goes on from: ``restart``'s bytes, then the stream's blocks."""
    if not isinstance(restart, int):
        view = memoryview(restart)
        for at in range(0, len(view), CHUNK):  # in blocks: a blank stretch in it is dropped unkept
            yield view[at: at + CHUNK]
    while block := src.read(CHUNK):
        yield block


def _decode_exact(buf: bytearray, end: int, res: StreamResult) -> None:
    """Decode the complete events in ``buf[:end]`` (a copy: ``buf`` is cut back afterwards)."""
    if not end:
        return
    out = decode_chunk(bytes(memoryview(buf)[:end]), final=True)
    if out["n"] or out["meta_rows"] or out["notes"] or out["counter_events"]:
        res.sink.add(out)


def _loads_object(text: bytes) -> dict[str, Any] | None:
    """A JSON object, or None. An integer past 64 bits (orjson refuses the whole text for one) is
    kept as its text (``limits.bounded_int``): the other keys still count."""
    try:
        out = orjson.loads(text)
    except orjson.JSONDecodeError:
        try:
            out = json.loads(text, parse_int=bounded_int)
        except (ValueError, RecursionError):
            return None
    return out if isinstance(out, dict) else None


def _read_all(src: Source) -> bytes:
    parts: list[bytes] = []
    while True:
        block = src.read(READ)
        if not block:
            return b"".join(parts)
        parts.append(block)


def _parse_trailer(trailer: bytes, res: StreamResult) -> set[str]:
    """Keys after the event array (traceName, baseTimeNanoseconds in 2024-25 files, logs); returns
    the keys found there."""
    text = trailer.strip()
    if not text or text == b"}":
        return set()
    body = text[1:] if text.startswith(b",") else text
    extra = _loads_object(b"{" + body) if body.rstrip().endswith(b"}") else None
    if extra is None:
        res.warnings.append(Note.of(TRAILER_NOT_JSON))
        m = _BASE_TIME.search(body)
        extra = {"baseTimeNanoseconds": bounded_int(m.group(1).decode())} if m else {}
        if _EVENTS_ANY.search(body) or TRACE_EVENTS_KEY.search(body):
            extra["traceEvents"] = None
    for k, v in extra.items():
        res.top.setdefault(k, v)
    return set(extra)
