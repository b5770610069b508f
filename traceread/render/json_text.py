"""The bytes of every JSON traceread writes (reports, scan indexes and jobs, diffs, ``--json`` of the
other commands), and the one conversion of values to plain JSON.

One encoder so that every file is indented, accepts numpy values and non-string keys the same way;
one sanitizer so that numpy scalars and non-finite floats read the same in every document.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import orjson

from traceread.printable import printable_json

_OPTIONS = orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS


def dumps(obj: Any) -> bytes:
    """``obj`` as indented JSON bytes (no trailing newline); numpy arrays and scalars as numbers; C1
    controls and DEL \\u-escaped too (orjson escapes only C0), so no raw control character from a trace
    reaches a terminal that shows the file."""
    return printable_json(orjson.dumps(obj, option=_OPTIONS))


def plain(obj: Any) -> Any:
    """``obj`` as plain JSON values: dict keys as strings, tuples as lists, numpy scalars as Python
    numbers, NaN and infinities as None, anything else that is not a JSON value as its ``str``."""
    if isinstance(obj, dict):
        return {str(k): plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    return str(obj)
