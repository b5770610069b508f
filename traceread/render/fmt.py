"""Number and table formatting shared by the text renderers (fixed precision: golden files compare)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from traceread.host_calls import frame_label
from traceread.render.names import md_code, md_name, md_text, scrub_paths, shorten

BAR_WIDTH = 20


def ms(ns: float) -> str:
    """``12.345 ms`` (ns in, 3 decimals: microsecond resolution)."""
    return f"{ns / 1e6:,.3f} ms"


class ViewerClock:
    """Times of one trace as its own viewer shows them (the JSON keeps raw ns in the trace's time base).

    * nsys exports: seconds since the session start, as the Nsight Systems timeline shows them. The
      export's timestamps are already session ns (t = 0 at the session start,
      ``TARGET_INFO_SESSION_START_TIME``; ``ANALYSIS_DETAILS`` holds the session's duration), so
      the origin is 0.
    * Kineto traces: ms from the trace's first event, as Perfetto (and chrome://tracing) show them:
      their timeline starts at the smallest timestamp of the file's events, which is the loaded
      frame's first ``start_ns``.
    """

    def __init__(self, trace_format: str, first_event_ns: int) -> None:
        self.session = trace_format == "nsys"
        self.origin = 0 if self.session else int(first_event_ns)

    def __call__(self, ns: float) -> str:
        t = float(ns) - self.origin
        return f"{t / 1e9:,.6f} s" if self.session else ms(t)

    @property
    def meaning(self) -> str:
        """What the shown times are, for the report's reader."""
        if self.session:
            return "seconds since the session start, as the Nsight Systems timeline shows them"
        return "ms from the trace's first event, as Perfetto shows them"


def dur(ns: float) -> str:
    """A duration in the unit that reads best: ``850 ns``, ``12.3 us``, ``4.56 ms``, ``1.23 s``."""
    ns = float(ns)
    if abs(ns) < 1e3:
        return f"{ns:.0f} ns"
    if abs(ns) < 1e6:
        return f"{ns / 1e3:.1f} us"
    if abs(ns) < 1e9:
        return f"{ns / 1e6:.2f} ms"
    return f"{ns / 1e9:.2f} s"


def plural(n: int, one: str, many: str | None = None) -> str:
    """``1 step``, ``2 steps``, ``1,024 gaps``: a count with its noun in the number it needs."""
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


NO_GAIN = "none (no gain predicted)"


def saving(ns: float | None, share: float | None = None, decimals: int = 3) -> str:
    """A predicted saving as ``12.345 ms (5.8%)`` (``decimals`` of a ms); one that rounds to nothing or
    below (a replay that predicts the fix costs time) reads ``none (no gain predicted)``: the JSON
    keeps the signed figure."""
    if ns is None:
        return "-"
    if float(ns) < 0.5e6 / 10**decimals:  # would print as 0.000 ms, or as a negative saving
        return NO_GAIN
    return f"{float(ns) / 1e6:,.{decimals}f} ms" + (f" ({pct(share)})" if share is not None else "")


def pct(x: float | None, digits: int = 1) -> str:
    return "n/a" if x is None or pd.isna(x) else f"{100 * x:.{digits}f}%"


def signed_pct(x: float) -> str:
    """A change as "+1.2%" / "-0.3%"; a change that rounds to zero reads "+0.0%", never "-0.0%"."""
    return f"{round(100 * x, 1) + 0.0:+.1f}%"


def bar(share: float, width: int = BAR_WIDTH) -> str:
    """A text bar for a share in [0, 1] (eighth-block resolution)."""
    share = min(max(float(share), 0.0), 1.0)
    eighths = int(round(share * width * 8))
    full, rest = divmod(eighths, 8)
    partial = " ▏▎▍▌▋▊▉"[rest] if rest else ""
    return ("█" * full + partial).ljust(width, "·")[:width] if eighths else "·" * width


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], align: str | None = None) -> str:
    """A GitHub Markdown table; ``align`` is one of ``l``/``r`` per column (cells already escaped)."""
    align = align or "l" * len(headers)
    sep = ["---:" if a == "r" else "---" for a in align]
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join(sep) + " |"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


# What ran beside a gap: (fraction column, label), in the order a reader checks them.
_OVERLAPS = (
    ("comm_collective_frac", "collective"),
    ("comm_p2p_frac", "p2p comm"),
    ("memcpy_htod_frac", "HtoD copy"),
    ("memcpy_dtoh_frac", "DtoH copy"),
    ("memcpy_dtod_frac", "DtoD copy"),
    ("memcpy_ptop_frac", "PtoP copy"),
    ("memset_frac", "memset"),
    ("dataloader_frac", "data loader"),
    ("sync_frac", "host sync"),
    ("alloc_frac", "allocator"),
    ("optimizer_frac", "optimizer"),
    ("cpu_runtime_frac", "CUDA runtime"),
)
MIN_SHOWN_FRAC = 0.01  # below 1% of the gap an overlap is noise to a reader


def other_lanes(gap: pd.Series | dict) -> str:
    """Markdown: what ran on the other lanes during a gap (escaped; names shortened, paths scrubbed)."""
    parts: list[str] = []
    for col, label in _OVERLAPS:
        frac = gap.get(col)
        if frac is not None and not pd.isna(frac) and float(frac) >= MIN_SHOWN_FRAC:
            extra = ""
            if col == "cpu_runtime_frac" and int(gap.get("launch_count", 0) or 0):
                n = int(gap["launch_count"])
                extra = f", {n} launch{'' if n == 1 else 'es'}"
            parts.append(f"{label} {float(frac):.0%}{extra}")
    text = md_text("; ".join(parts)) if parts else "nothing"
    name = str(gap.get("longest_cpu_name", "") or "")
    if name and int(gap.get("longest_cpu_ns", 0) or 0) > 0:
        text += f"; longest host call {md_name(name, 48)} {dur(gap['longest_cpu_ns'])}"
    frame = str(gap.get("python_frame", "") or "")
    if frame:
        text += f"; Python {md_code(shorten(scrub_paths(frame_label(frame)), 48))}"
    return text
