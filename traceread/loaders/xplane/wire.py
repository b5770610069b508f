"""Protobuf wire format, decoded for many messages at once with numpy.

An XSpace holds its events as many small messages (``XEvent``: a metadata id, an offset, a duration,
a few ``XStat``). Decoding them one by one in Python costs microseconds each; here every message of a
batch advances by one field per round, so the Python work is per round (the most fields any one
message has), not per message.

:func:`fields` returns one row per field of every message: the message's index, the field number,
the wire type, the value (varint or fixed-width, as uint64) and where a length-delimited payload
lies. A field that runs past its message, a bad wire type or an unterminated varint raises
:class:`WireError`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

VARINT, FIXED64, LEN, FIXED32 = 0, 1, 2, 5
_MAX_VARINT = 10


class WireError(ValueError):
    """The bytes are not well-formed protobuf (a damaged or foreign file)."""


@dataclass(frozen=True)
class Fields:
    """One row per field, in rounds (every message's first field, then every second field...):
    ``msg`` (the message's index in the batch), ``number``, ``wire``,
    ``value`` (uint64: a varint, or the fixed64/fixed32 bits), and for length-delimited fields
    ``start`` and ``size`` of the payload in the buffer."""

    msg: np.ndarray
    number: np.ndarray
    wire: np.ndarray
    value: np.ndarray
    start: np.ndarray
    size: np.ndarray

    def where(self, number: int) -> np.ndarray:
        """Row positions of field ``number``."""
        return np.flatnonzero(self.number == number)


def varints(buf: np.ndarray, pos: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The varints starting at ``pos`` (each before its ``end``): their values (uint64) and the
    positions after them."""
    if len(pos) and (pos >= end).any():
        raise WireError("a varint runs past the end of its message")
    byte = buf[pos]
    value = (byte & 0x7F).astype(np.uint64)
    after = pos + 1
    live = np.flatnonzero(byte >= 0x80)  # most varints (tags, small ids) are one byte: done here
    for k in range(1, _MAX_VARINT):
        if not len(live):
            return value, after
        at = after[live]
        if (at >= end[live]).any():
            raise WireError("a varint runs past the end of its message")
        byte = buf[at]
        value[live] |= (byte & 0x7F).astype(np.uint64) << np.uint64(7 * k)
        after[live] = at + 1
        live = live[byte >= 0x80]
    if len(live):
        raise WireError("a varint longer than 10 bytes")
    return value, after


def _fixed(buf: np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    value = np.zeros(len(pos), dtype=np.uint64)
    for k in range(width):
        value |= buf[pos + k].astype(np.uint64) << np.uint64(8 * k)
    return value


def fields(buf: np.ndarray, start: np.ndarray, end: np.ndarray) -> Fields:
    """Every field of the messages ``buf[start[i]:end[i]]`` (see module doc)."""
    start = np.asarray(start, dtype=np.int64)
    end = np.asarray(end, dtype=np.int64)
    if len(end) and (int(end.max(initial=0)) > len(buf) or (start > end).any()):
        raise WireError("a message runs past the end of the file")
    pos = start.copy()
    live = np.flatnonzero(pos < end)
    parts: list[tuple[np.ndarray, ...]] = []
    while len(live):
        lend = end[live]
        key, after = varints(buf, pos[live], lend)
        number = (key >> np.uint64(3)).astype(np.int64)
        wire = (key & np.uint64(7)).astype(np.int8)
        value = np.zeros(len(live), dtype=np.uint64)
        pstart = after.copy()
        size = np.zeros(len(live), dtype=np.int64)
        nxt = after.copy()
        for w in np.unique(wire).tolist():
            sel = np.flatnonzero(wire == w)
            at = after[sel]
            if w == VARINT:
                value[sel], nxt[sel] = varints(buf, at, lend[sel])
            elif w in (FIXED64, FIXED32):
                width = 8 if w == FIXED64 else 4
                if (at + width > lend[sel]).any():
                    raise WireError("a fixed-width field runs past the end of its message")
                value[sel], nxt[sel] = _fixed(buf, at, width), at + width
            elif w == LEN:
                ln, body = varints(buf, at, lend[sel])
                if (ln > np.uint64(1 << 62)).any():
                    raise WireError("a length-delimited field longer than the file")
                ln = ln.astype(np.int64)
                pstart[sel], size[sel], nxt[sel] = body, ln, body + ln
                value[sel] = ln.astype(np.uint64)
            else:
                raise WireError(f"wire type {w} (groups or an invalid type: not an XSpace)")
        if (nxt > lend).any():
            raise WireError("a field runs past the end of its message")
        if (number == 0).any():
            raise WireError("field number 0")
        parts.append((live, number, wire, value, pstart, size))
        pos[live] = nxt
        live = live[nxt < lend]
    if not parts:
        e64, e8 = np.zeros(0, np.int64), np.zeros(0, np.int8)
        return Fields(e64, e64, e8, np.zeros(0, np.uint64), e64, e64)
    # Rows are in round order: a message's later field always has a later row, so assigning by
    # ``msg`` in row order leaves the last value of a repeated scalar, as protobuf does.
    return Fields(*(np.concatenate(c) for c in zip(*parts, strict=True)))


def signed(value: np.ndarray) -> np.ndarray:
    """uint64 varints of int64 fields as int64 (two's complement, as protobuf writes negatives)."""
    return value.view(np.int64)
