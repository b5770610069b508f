"""Control characters out of everything traceread prints or writes as text.

Names, GPU names, annotations and notes come from the trace; a hostile one carries terminal escape
sequences (``ESC ] 0;title BEL`` sets the window title, ``ESC ] 52`` writes the clipboard, CSI moves
the cursor or recolours). No output shows them raw: text and Markdown (on a terminal or in a file)
show each C0 and C1 control and DEL as ``\\x1b``-style text; JSON keeps them JSON-escaped
(``\\u001b``, C1 and DEL included, which JSON itself would allow raw). This module is the one
definition; :mod:`traceread.render.names` applies it to every name shown, and each text sink
(:func:`traceread.atomic.atomic_open` in text mode, the CLI's tables and error lines) applies it
again so that nothing reaches the reader unescaped.
"""

from __future__ import annotations

import re
from typing import IO

# C0 (0x00-0x1f, ESC and BEL among them), DEL and C1 (0x80-0x9f: 0x9b is a one-byte CSI, 0x9d OSC).
# Bidirectional controls too (U+202A-202E embeddings and overrides, U+2066-2069 isolates, U+200E/F
# and U+061C marks): an override (U+202E) makes a name read backwards on a terminal or a rendered
# page ("Trojan source"); they are shown as ``\u202e``.
BIDI_CHARS = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
CONTROL_CHARS = f"[\x00-\x1f\x7f-\x9f{BIDI_CHARS}]"  # the class as a regex (pandas' str.contains takes it)
_CONTROL = re.compile(CONTROL_CHARS)
_CONTROL_BUT_LAYOUT = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{BIDI_CHARS}]")  # keeps \t and \n
# The bidi controls' UTF-8 lead bytes (E2 80, E2 81, D8 9C): a byte search finds whether any may be there.
BIDI_UTF8_LEADS = (b"\xe2\x80", b"\xe2\x81", b"\xd8\x9c")
# In UTF-8 JSON, DEL is the byte 0x7f and a C1 character the bytes C2 80..C2 9F; both only occur
# inside strings (orjson escapes C0 already), and 0xC2 is always a lead byte, so this finds exactly them.
_JSON_RAW_CONTROL = re.compile(rb"\x7f|\xc2[\x80-\x9f]")


def _hex(m: re.Match) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, layout: bool = False) -> str:
    """``text`` with every control character shown as ``\\xNN``; with ``layout``, tabs and newlines
    stay (a whole table or report, whose structure needs them; names inside it were escaped whole)."""
    pattern = _CONTROL_BUT_LAYOUT if layout else _CONTROL
    return pattern.sub(_hex, text) if pattern.search(text) else text


def printable_json(data: bytes) -> bytes:
    """UTF-8 JSON with DEL and C1 characters escaped (``\\u009b``), as orjson escapes C0."""
    # bytes.find is a memchr; the regex scans at a fraction of that speed (most documents have neither byte)
    if data.find(b"\x7f") < 0 and data.find(b"\xc2") < 0:
        return data
    return _JSON_RAW_CONTROL.sub(lambda m: b"\\u%04x" % ord(m.group().decode()), data)


class PrintableWriter:
    """A text file whose writes go through :func:`printable` (layout kept): for outputs written
    piecewise by a library (pandas' CSV), which a reader may still ``cat`` to a terminal."""

    def __init__(self, fh: IO[str]) -> None:
        self._fh = fh

    def write(self, text: str) -> int:
        return self._fh.write(printable(text, layout=True))

    def flush(self) -> None:
        self._fh.flush()
