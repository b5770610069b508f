"""Input limits that turn hostile or oversized inputs into a clear error instead of a hang or an OOM kill.

Set once per process (the CLI's ``--max-json-size``, ``--max-gzip-ratio``, ``--max-memory`` and
``--max-events``, or
the ``TRACEREAD_MAX_*`` environment variables) and read by the loaders; forked decoder processes
inherit them.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from traceread import bounds
from traceread.errors import UsageError

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str) -> int:
    """``"64G"``, ``"512M"``, ``"1.5T"`` or a plain byte count -> bytes."""
    m = re.fullmatch(r"\s*([0-9]{1,30}(?:\.[0-9]{1,30})?)\s*([KMGT]?)(?:i?B)?\s*", str(text), re.I)
    if not m:
        raise UsageError(f"{text!r} is not a size (examples: 64G, 512M, 1000000)")
    # checked in one place (traceread.bounds): a size is 1 byte .. 2^63-1 bytes
    return bounds.integer(int(float(m.group(1)) * _UNITS[m.group(2).upper()]), f"size {text!r}", 1, bounds.INT64_MAX)


def format_size(n: int) -> str:
    """Bytes as a size a reader takes in at once, in the units ``parse_size`` reads: ``512 MiB``,
    ``64 GiB``, ``1.5 TiB``, ``976.6 KiB``, ``100 bytes``."""
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.4g} {unit}" if n / scale < 10_000 else f"{n / scale:,.0f} {unit}"
    return f"{n} bytes"


@dataclass
class Limits:
    # Uncompressed JSON a single gzip trace may inflate to. Real multi-GB traces stay far below;
    # a gzip bomb is stopped here with a message instead of filling the disk cache and the CPU.
    max_json_bytes: int = 64 << 30
    # Inflated/compressed ratio, judged once 256 MiB are inflated: JSON traces compress tens of
    # times at most; a ratio past this is not a trace.
    max_gzip_ratio: float = 250.0
    gzip_ratio_after_bytes: int = 256 << 20
    # Address-space cap (bytes) of this process, None = none: a trace too large for it fails with a
    # one-line error instead of being killed by the kernel's OOM killer.
    max_memory_bytes: int | None = None
    # Events one trace may hold, checked as rows are added (Kineto) or before the columns are
    # allocated (nsys, from the tables' row counts). Default: what this machine's memory holds at
    # ANALYZE_BYTES_PER_EVENT, so the limit trips before the kernel's OOM killer.
    max_events: int = 0  # 0: the default for this machine (see default_max_events)


# --- integer policy ---------------------------------------------------------------------------
# Every integer a loader reads from a file lands in a column of a stated range (schema's dtypes):
#   rank, world size         0 .. 2^31-1 (int32 ``rank``); a world size is 1 .. 2^31-1
#   step number              0 .. 2^63-1 (int64 ``step``)
#   ids, pid/tid, stream,    -2^63 .. 2^63-1 (int64); device: -1 .. 2^31-1 (int32); sizes
#   correlation, sizes       (bytes, elements, launch dims) int64, -1 where unknown
#   timestamps               int64 ns after the exact us -> ns parse; an epoch base
#                            (``baseTimeNanoseconds``, nsys ``utcEpochNs``) 1 .. EPOCH_NS_MAX
# Outside its range a value that is only a label (a step number, an id, a rank in a file name)
# is dropped or renumbered with a note; the event's other fields still load. Text is turned into
# an integer only by :func:`int_text`: ASCII digits, at most 19 of them, so no ValueError from
# Python's int-string digit limit or from Unicode digits that ``str.isdigit`` accepts.
RANK_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
EPOCH_NS_MAX = 4_102_444_800 * 10**9  # 2100-01-01 in Unix-epoch ns: later is not a clock reading
_INT_TEXT = re.compile(r"[+-]?[0-9]{1,19}")


def int_text(text: str | bytes, lo: int = -INT64_MAX - 1, hi: int = INT64_MAX) -> int | None:
    """The decimal integer ``text`` (surrounding whitespace allowed) when ``lo <= value <= hi``, else None."""
    if isinstance(text, bytes):
        text = text.decode("ascii", "replace")
    text = text.strip()
    if not _INT_TEXT.fullmatch(text):
        return None
    value = int(text)
    return value if lo <= value <= hi else None


def bounded_int(text: str) -> int | str:
    """``json.loads(parse_int=...)``: an integer literal past int64 stays text (a label, never a number)."""
    value = int_text(text)
    return text if value is None else value


class TooManyEvents(Exception):
    """A trace holds more events than ``--max-events`` allows (the loader adds the file name)."""


# Peak memory of ``traceread analyze`` per event of its input: the frame is ~100 B per event, the
# analysis (lanes, links, intervals, per-step tables) takes the rest: peak RSS less a tiny trace's,
# over events, on traces scaled up, rounded up. (A cap of memory / 100 B counted the frame alone and
# let a trace be killed by the kernel long before the cap.)
ANALYZE_BYTES_PER_EVENT = 700


def default_max_events() -> int:
    try:
        memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        return max(memory // ANALYZE_BYTES_PER_EVENT, 1_000_000)
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return 500_000_000


def check_events(n: int) -> None:
    """Raise TooManyEvents when a trace reaches more than the event cap."""
    cap = LIMITS.max_events or default_max_events()
    if n > cap:
        raise TooManyEvents(f"holds more than {cap:,} events (--max-events; default: what this machine's "
                            f"memory holds at about {ANALYZE_BYTES_PER_EVENT} bytes per event)")


LIMITS = Limits()


def configure(max_json_size: str | None = None, max_gzip_ratio: float | None = None,
              max_memory: str | None = None, max_events: int | None = None) -> Limits:
    """Apply CLI values, falling back to ``TRACEREAD_MAX_JSON_SIZE`` / ``_GZIP_RATIO`` / ``_MEMORY`` / ``_EVENTS``.

    Each call starts from the defaults of the flag-set limits (one CLI invocation's flags never
    carry into the next)."""
    fresh = Limits()
    for name in ("max_json_bytes", "max_gzip_ratio", "max_memory_bytes", "max_events"):
        setattr(LIMITS, name, getattr(fresh, name))
    if max_events is None and os.environ.get("TRACEREAD_MAX_EVENTS"):
        max_events = bounds.integer(os.environ["TRACEREAD_MAX_EVENTS"], "TRACEREAD_MAX_EVENTS", 1)
    if max_events is not None:
        # -1 or 0 would be taken for "no limit" or blame the first file read: a usage error here
        LIMITS.max_events = bounds.integer(max_events, "--max-events", 1)
    max_json_size = max_json_size or os.environ.get("TRACEREAD_MAX_JSON_SIZE")
    ratio = max_gzip_ratio if max_gzip_ratio is not None else os.environ.get("TRACEREAD_MAX_GZIP_RATIO")
    max_memory = max_memory or os.environ.get("TRACEREAD_MAX_MEMORY")
    if max_json_size:
        LIMITS.max_json_bytes = parse_size(max_json_size)
    if ratio is not None:
        # NaN would compare false and let a bomb inflate in full; below 1 no gzip could be read
        LIMITS.max_gzip_ratio = bounds.finite(ratio, "--max-gzip-ratio", 1.0, 1e9)
    if max_memory:
        LIMITS.max_memory_bytes = parse_size(max_memory)
        import importlib
        import resource

        # the cap is for the trace's data, not for code: the loaders and their compiled modules
        # (msgspec, the scanner) are mapped first, since a shared object that cannot be mapped
        # under the cap fails as an ImportError rather than as a MemoryError
        for name in ("traceread.loaders.kineto", "traceread.loaders.nsys"):
            importlib.import_module(name)

        _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        cap = LIMITS.max_memory_bytes if hard == resource.RLIM_INFINITY else min(hard, LIMITS.max_memory_bytes)
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    return LIMITS


def check_inflated(path: str, inflated: int, compressed: int) -> None:
    """Raise a TraceReadError when a gzip stream inflates past the limits."""
    from traceread.errors import TraceReadError

    if inflated > LIMITS.max_json_bytes:
        raise TraceReadError(path, f"decompresses to more than {format_size(LIMITS.max_json_bytes)} of JSON "
                             "(a gzip bomb?); raise the limit with --max-json-size if the trace is real")
    if inflated >= LIMITS.gzip_ratio_after_bytes and compressed and inflated / compressed > LIMITS.max_gzip_ratio:
        raise TraceReadError(path, f"inflates {inflated / compressed:.0f}x its compressed size (JSON traces: "
                             f"5-40x): not a trace, or a gzip bomb; --max-gzip-ratio raises the limit")
