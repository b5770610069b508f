"""Byte-level helpers for the Kineto loader: event framing, exact number parsing, repairs.

Nothing here builds Python objects per event: framing works on a few candidate positions, the
exact scanner and the number parser are vectorized numpy over the bytes.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

import numpy as np

# Two consecutive objects in an array: ``}`` [ws] ``,`` [ws] ``{``. Inside the event array this is
# almost always an event boundary; a wrong guess makes the chunk fail to decode and the exact
# scanner takes over, so the guess never produces wrong events.
BOUNDARY = re.compile(rb"\}[ \t\r\n]*,[ \t\r\n]*\{")
TRACE_EVENTS_KEY = re.compile(rb'"traceEvents"[ \t\r\n]*:[ \t\r\n]*\[')

_QUOTE, _BACKSLASH = 34, 92
_OPEN = (123, 91)  # { [
_CLOSE = (125, 93)  # } ]
INT64_MAX = np.iinfo(np.int64).max


def find_boundary(buf: bytes | bytearray | memoryview, pos: int, endpos: int) -> tuple[int, int] | None:
    """First candidate event boundary in ``buf[pos:endpos]``: (end of left event, start of right)."""
    m = BOUNDARY.search(buf, pos, endpos)
    if m is None:
        return None
    return m.start() + 1, m.end() - 1


def _string_quotes(a: np.ndarray) -> np.ndarray:
    """Positions of the quotes that open or close JSON strings (escaped quotes removed)."""
    q = np.flatnonzero(a == _QUOTE)
    if len(q) == 0:
        return q
    prev = q[q > 0]
    maybe = prev[a[prev - 1] == _BACKSLASH]
    if len(maybe) == 0:
        return q
    # the run of backslashes before each such quote, vectorized over the backslashes alone (a
    # string of millions of \" took a Python step per quote)
    bs = np.flatnonzero(a == _BACKSLASH)
    starts = np.ones(len(bs), bool)
    starts[1:] = bs[1:] != bs[:-1] + 1
    run_start = np.maximum.accumulate(np.where(starts, np.arange(len(bs)), 0))
    last = np.searchsorted(bs, maybe - 1)  # index in bs of the backslash right before the quote
    escaped = maybe[(last - run_start[last] + 1) % 2 == 1]
    return np.setdiff1d(q, escaped, assume_unique=True) if len(escaped) else q


def scan_values(buf: bytes | bytearray | memoryview) -> tuple[list[tuple[int, int]], int | None, int]:
    """Exact structural scan of an array's body starting between two values (depth 1).

    Returns (spans of the complete objects at depth 1 as [start, end) offsets, offset of the ``]``
    that closes the array or None, offset just past the last complete object). Strings are
    honoured (brackets inside names do not count); an unterminated string or object at the end
    (a truncated file) is simply not complete.
    """
    a = np.frombuffer(buf, dtype=np.uint8)
    quotes = _string_quotes(a)
    brackets = np.flatnonzero((a == 123) | (a == 125) | (a == 91) | (a == 93))
    if len(quotes):
        inside = np.searchsorted(quotes, brackets, side="right") % 2 == 1
        brackets = brackets[~inside]
    chars = a[brackets]
    delta = np.where((chars == 123) | (chars == 91), 1, -1)
    depth_after = 1 + np.cumsum(delta)
    closes = np.flatnonzero(depth_after <= 0)
    array_end = None
    if len(closes):
        k = int(closes[0])
        array_end = int(brackets[k])
        brackets, chars, depth_after = brackets[:k], chars[:k], depth_after[:k]
    starts = brackets[(depth_after == 2) & (chars == 123)]
    ends = brackets[(depth_after == 1) & (chars == 125)] + 1
    n = min(len(starts), len(ends))
    spans = list(zip(starts[:n].tolist(), ends[:n].tolist(), strict=True))
    consumed = spans[-1][1] if spans else 0
    return spans, array_end, consumed


class ArrayScanner:
    """:func:`scan_values` fed block by block: each byte is looked at once, whatever the blocks.

    Scanning a growing buffer again from its start for every block read is quadratic on a long
    stretch without an event end (a hostile file of GBs of spaces, one huge string); this keeps
    the structure's state between blocks instead: depth, inside a string, a pending backslash.
    """

    def __init__(self) -> None:
        self.depth = 1  # inside the event array, between two values
        self.in_string = False
        self.escape = False  # the last block ended inside a string on an odd run of backslashes
        self.scanned = 0  # bytes fed so far (tests read it: linear time)

    @property
    def between_values(self) -> bool:
        """No value is open: whatever was fed since the last complete object carries nothing."""
        return self.depth == 1 and not self.in_string

    def feed(self, block: bytes | bytearray | memoryview) -> tuple[int | None, int | None]:
        """Scan ``block``, which follows what was fed before.

        Returns (offset in ``block`` just past the last object it completes at depth 1, or None;
        offset of the ``]`` that closes the array, or None). After the array's end the scanner
        must not be fed again.
        """
        a = np.frombuffer(block, dtype=np.uint8)
        self.scanned += len(a)
        if not len(a):
            return None, None
        if self.escape:  # the first byte is escaped: whatever it is, it is not structure
            a = a.copy()
            a[0] = 97
        quotes = _string_quotes(a)
        brackets = np.flatnonzero((a == 123) | (a == 125) | (a == 91) | (a == 93))
        if len(quotes) or self.in_string:
            inside = (np.searchsorted(quotes, brackets, side="right") + int(self.in_string)) % 2 == 1
            brackets = brackets[~inside]
        chars = a[brackets]
        depth_after = self.depth + np.cumsum(np.where((chars == 123) | (chars == 91), 1, -1))
        closes = np.flatnonzero(depth_after <= 0)
        array_end = None
        if len(closes):
            k = int(closes[0])
            array_end = int(brackets[k])
            brackets, chars, depth_after = brackets[:k], chars[:k], depth_after[:k]
        ends = brackets[(depth_after == 1) & (chars == 125)]
        if len(depth_after):
            self.depth = int(depth_after[-1])
        self.in_string = (int(self.in_string) + len(quotes)) % 2 == 1
        self.escape = False
        if self.in_string and a[-1] == _BACKSLASH:
            plain = np.flatnonzero(a != _BACKSLASH)
            run = len(a) - 1 - int(plain[-1]) if len(plain) else len(a)
            self.escape = run % 2 == 1
        return (int(ends[-1]) + 1 if len(ends) else None), array_end


_BLANKS = b" \t\r\n,"


def blank(block: bytes | bytearray | memoryview) -> bool:
    """Only whitespace and commas (between values of the event array they carry nothing)."""
    if not block or bytes(block[:1]) not in _BLANKS or bytes(block[-1:]) not in _BLANKS:  # most blocks: no copy
        return False
    return not bytes(block).translate(None, _BLANKS)


def in_string_mask(buf: bytes | bytearray) -> np.ndarray:
    """Boolean per byte: inside a JSON string (between its quotes)."""
    a = np.frombuffer(buf, dtype=np.uint8)
    quotes = _string_quotes(a)
    flips = np.zeros(len(a) + 1, dtype=np.int8)
    flips[quotes] = 1
    return (np.cumsum(flips[:-1]) % 2 == 1) & (a != _QUOTE)


_BARE_NA = re.compile(rb"(:[ \t\r\n]*)(N/A|NaN|-?Infinity)([ \t\r\n]*[,}\]])")
_BAD_ESCAPE = re.compile(rb'\\(\\|[^"\\/bfnrtu])')


def repair_event(raw: bytes) -> tuple[bytes, list[str]]:
    """Fix the known Kineto writer bugs in one event's text; return the text and what was fixed."""
    fixes: list[str] = []
    text = raw
    try:
        text.decode("utf-8")
    except UnicodeDecodeError:
        text = text.decode("utf-8", "replace").encode("utf-8")
        fixes.append("invalid UTF-8")
    a = np.frombuffer(text, dtype=np.uint8)
    ctrl = np.flatnonzero(a < 0x20)
    if len(ctrl):
        inside = in_string_mask(text)[ctrl]
        bad = ctrl[inside].tolist()
        if bad:
            out = bytearray()
            last = 0
            for p in bad:
                out += text[last:p]
                out += b"\\u%04x" % text[p]
                last = p + 1
            out += text[last:]
            text = bytes(out)
            fixes.append("raw control characters")
    new = _BARE_NA.sub(lambda m: m.group(1) + b'"' + m.group(2) + b'"' + m.group(3), text)
    if new != text:
        fixes.append("bare N/A")
        text = new
    new = _BAD_ESCAPE.sub(lambda m: m.group(0) if m.group(1) == b"\\" else b"\\\\" + m.group(1), text)
    if new != text:
        fixes.append("stray backslashes")
        text = new
    return text, fixes


# --- exact microseconds-as-text -> int64 nanoseconds ----------------------------------------------

_NUMBER_BYTES = b"0123456789,-."


def us_text_to_ns(raws: list) -> tuple[np.ndarray, np.ndarray]:
    """Parse JSON numbers given as raw text (microseconds) into exact int64 ns.

    ``raws`` holds bytes-like objects (msgspec.Raw); empty means absent. Returns (ns, ok): ``ok``
    is False where the value was absent or not a number. Integer and fractional parts are parsed
    separately, never through float64.
    """
    return us_text_to_ns_flag(raws)[:2]


def us_text_to_ns_flag(raws: list) -> tuple[np.ndarray, np.ndarray, bool]:
    """:func:`us_text_to_ns` plus whether any value was written with a decimal point."""
    ns, ok, joined = _us_text_to_ns(raws)
    return ns, ok, b"." in joined


def _us_text_to_ns(raws: list) -> tuple[np.ndarray, np.ndarray, bytes]:
    n = len(raws)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, bool), b""
    joined = b",".join(raws)
    if not joined.translate(None, _NUMBER_BYTES) and b",," not in joined and joined[:1] != b"," \
            and joined[-1:] != b",":
        dots = joined.count(b".")
        try:
            if dots == 0:
                v = np.fromstring(joined, sep=",", dtype=np.int64)
                if len(v) == n and (np.abs(v) < INT64_MAX // 1000).all():
                    return v * 1000, np.ones(n, bool), b""
            elif dots == n:
                a = np.frombuffer(joined, dtype=np.uint8)
                dp = np.flatnonzero(a == 46)
                after = dp + 4
                ok = after <= len(a)
                ok[ok] &= (after[ok] == len(a)) | (a[np.minimum(after[ok], len(a) - 1)] == 44)
                if ok.all():
                    v = np.fromstring(joined.replace(b".", b""), sep=",", dtype=np.int64)
                    if len(v) == n and not (v == INT64_MAX).any():
                        return v, np.ones(n, bool), b"."
        except ValueError:
            pass
    return (*_us_text_to_ns_general(joined, raws), joined)


def _us_text_to_ns_general(joined: bytes, raws: list) -> tuple[np.ndarray, np.ndarray]:
    """Vectorized digit arithmetic for mixed int/float text with any number of decimals."""
    n = len(raws)
    a = np.frombuffer(joined, dtype=np.uint8)
    sep = np.flatnonzero(a == 44)
    if len(sep) != n - 1:  # a value containing a comma is not a number: go one by one
        return _slow_parse(raws)
    starts = np.r_[0, sep + 1]
    ends = np.r_[sep, len(a)]
    seg = np.repeat(np.arange(n), ends - starts + 1)[: len(a)]
    # per segment: position of the dot (or the end when the number is an integer)
    dot_at = ends.copy()
    dots = np.flatnonzero(a == 46)
    if len(dots):
        dseg = seg[dots]
        # several dots in one segment make it invalid; keep the first for arithmetic
        first = np.ones(len(dots), bool)
        first[1:] = dseg[1:] != dseg[:-1]
        dot_at[dseg[first]] = dots[first]
    valid = ends > starts
    bad_char = (a != 44) & (a != 46) & (a != 45) & ((a < 48) | (a > 57))
    if bad_char.any():
        valid[np.unique(seg[bad_char])] = False
    if len(dots):
        counts = np.bincount(seg[dots], minlength=n)
        valid &= counts <= 1
    minus = np.flatnonzero(a == 45)
    neg = np.zeros(n, bool)
    if len(minus):
        at_start = minus == starts[seg[minus]]
        neg[seg[minus[at_start]]] = True
        valid[seg[minus[~at_start]]] = False
    digit_pos = np.flatnonzero((a >= 48) & (a <= 57))
    dseg = seg[digit_pos]
    rel = dot_at[dseg] - digit_pos  # >0: integer digit (1 = units); <=0: fraction digit
    exp = np.where(rel > 0, rel + 2, rel + 3)  # power of ten of this digit, in ns
    keep = (exp >= 0) & (exp <= 18)
    too_big = np.zeros(n, bool)
    digits = a[digit_pos]
    too_big[dseg[(exp > 18) | ((exp == 18) & (digits > 56))]] = True  # may pass int64: check exactly
    contrib = (a[digit_pos[keep]] - 48).astype(np.int64) * (10 ** exp[keep].astype(np.int64))
    # per-segment sums by differences of a running sum: int64 wraps, the differences stay exact
    running = np.r_[np.int64(0), np.cumsum(contrib)]
    kseg = dseg[keep]
    lo = np.searchsorted(kseg, np.arange(n), side="left")
    hi = np.searchsorted(kseg, np.arange(n), side="right")
    ns = running[hi] - running[lo]
    ns = np.where(neg, -ns, ns)
    ok = valid & ~too_big
    if not ok.all():
        idx = np.flatnonzero(~ok)
        fixed_ns, fixed_ok = _slow_parse([raws[i] for i in idx])
        ns[idx] = fixed_ns
        ok[idx] = fixed_ok
    return ns, ok


def _slow_parse(raws: list) -> tuple[np.ndarray, np.ndarray]:
    """Per value, with Decimal (exponents, strings): only for the odd values the fast paths reject."""
    n = len(raws)
    ns = np.zeros(n, np.int64)
    ok = np.zeros(n, bool)
    for i, p in enumerate(raws):
        text = bytes(p).strip().strip(b'"')
        if not text:
            continue
        try:
            v = int(Decimal(text.decode("ascii")) * 1000)
        except (InvalidOperation, UnicodeDecodeError, ValueError, OverflowError):
            continue
        if -INT64_MAX <= v <= INT64_MAX:
            ns[i] = v
            ok[i] = True
    return ns, ok


def top_level_key_start(buf: bytes | bytearray, obj_start: int, pos: int) -> bool:
    """True when ``pos`` (a key's opening quote) sits directly inside the object at ``obj_start``."""
    a = np.frombuffer(buf, dtype=np.uint8)[obj_start:pos]
    quotes = _string_quotes(a)
    if len(quotes) % 2:  # pos is inside a string
        return False
    brackets = np.flatnonzero((a == 123) | (a == 125) | (a == 91) | (a == 93))
    if len(quotes):
        brackets = brackets[np.searchsorted(quotes, brackets, side="right") % 2 == 0]
    chars = a[brackets]
    depth = int(np.sum(np.where((chars == 123) | (chars == 91), 1, -1)))
    return depth == 1
