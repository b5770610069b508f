"""Recognising an XSpace protobuf and xprof's trace-viewer JSON by their first bytes (no numpy,
no pandas: ``sniff`` runs on every file a scan meets)."""

from __future__ import annotations

import gzip
import re
import zlib

FORMAT = "xplane"
FORMAT_VIEWER = "xplane-json"
_PLANE_NAME = re.compile(rb"^(/device:|/host:|Task Environment|/custom:|/device_)")
_HEAD = re.compile(rb'^\s*\{\s*"displayTimeUnit"\s*:\s*"ns"\s*,')
_MARKS = (rb'"highres-ticks"', rb'"filteredByVisibility"', rb'"returnedEventsSize"', rb'"/device:', rb'"/host:')
HEAD_BYTES = 4096


def _varint(head: bytes, at: int) -> tuple[int, int] | None:
    value = shift = 0
    for k in range(10):
        if at + k >= len(head):
            return None
        b = head[at + k]
        value |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return value, at + k + 1
    return None


def looks_like_xplane(head: bytes) -> bool:
    """Whether the first bytes of a file are an XSpace: field 1 (a plane) whose message opens with
    the plane's id (field 1) and/or name (field 2), the name a plane name (``/device:``, ``/host:``,
    ``Task Environment``). Reads up to the name: about 32 bytes."""
    if len(head) < 4 or head[0] != 0x0A:
        return False
    got = _varint(head, 1)
    if got is None:
        return False
    size, at = got
    if size < 2 or at >= len(head):
        return False
    if head[at] == 0x08:  # the plane's id
        got = _varint(head, at + 1)
        if got is None:
            return False
        at = got[1]
    if at >= len(head) or head[at] != 0x12:  # the plane's name (within the first bytes of any real XSpace)
        return False
    got = _varint(head, at + 1)
    if got is None:
        return False
    length, at = got
    name = head[at:at + min(length, 20)]
    return 0 < length <= size and bool(name) and _PLANE_NAME.match(name) is not None


def looks_like_trace_viewer(head: bytes) -> bool:
    """Whether the first (decompressed) bytes of a JSON file are xprof's trace-viewer JSON: it opens
    with ``"displayTimeUnit":"ns"`` and shows xprof's keys (``highres-ticks``,
    ``filteredByVisibility``) or a ``/device:``/``/host:`` process within its first 4 KiB."""
    return bool(_HEAD.match(head)) and any(m in head[:HEAD_BYTES] for m in _MARKS)


def read_head(path: str, size: int = HEAD_BYTES) -> bytes:
    """The first ``size`` bytes of ``path``, decompressed when it is gzip (b'' when unreadable)."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(size)
            if raw[:2] != b"\x1f\x8b":
                return raw
            fh.seek(0)
            with gzip.GzipFile(fileobj=fh) as gz:
                return gz.read(size)
    except (OSError, EOFError, zlib.error):
        return b""


def is_trace_viewer(path: str) -> bool:
    """Whether the JSON (or gzip JSON) file ``path`` is xprof's trace-viewer JSON."""
    return looks_like_trace_viewer(read_head(path))
