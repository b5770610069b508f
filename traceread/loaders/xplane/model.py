"""What an XSpace holds, as the frame builder reads it: planes, lines, and every event in columns.

Both readers fill it: :mod:`decode` from the protobuf, :mod:`viewer` from the trace-viewer JSON that
xprof derives from one (a process per plane, a thread per line). :mod:`frame` turns it into the
events frame.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from traceread.note import Note

# Event stats the frame reads (XStat names as the profilers write them).
CORRELATION = "correlation_id"
STEP_NUM = "step_num"  # JAX StepTraceAnnotation / TensorFlow step markers
GROUP_ID = "group_id"
INT_STATS = (CORRELATION, STEP_NUM, GROUP_ID)
MEMCPY_DETAILS = "memcpy_details"  # "kind_src:device kind_dst:device size:4096 ..."
KERNEL_DETAILS = "kernel_details"  # "regs:32 static_shared:0 ... grid:1,1,1 block:64,1,1"
TEXT_STATS = (MEMCPY_DETAILS, KERNEL_DETAILS)
HLO_CATEGORY = "hlo_category"  # an XLA op's category ("all-reduce", "convolution"), on its metadata


@dataclass
class Texts:
    """One text stat of the events that carry it, decoded when read (one string per event)."""

    rows: np.ndarray  # int64 event rows whose value lies in buf[start:start + size]
    buf: Any  # a uint8 array, or None when ``start`` is empty
    start: np.ndarray
    size: np.ndarray
    ref_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # rows with the value in refs
    refs: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, rows: np.ndarray, values: list[str]) -> Texts:
        e = np.zeros(0, np.int64)
        return cls(rows=e, buf=None, start=e, size=e, ref_rows=np.asarray(rows, dtype=np.int64), refs=values)

    def values(self) -> tuple[np.ndarray, list[str]]:
        """(event rows, their values), rows ascending."""
        raw = bytes(self.buf) if self.buf is not None and len(self.start) else b""
        got = [raw[a:a + z].decode("utf-8", "replace") for a, z in zip(self.start.tolist(), self.size.tolist(),
                                                                      strict=True)]
        rows = np.concatenate([self.rows, self.ref_rows])
        vals = got + list(self.refs)
        order = np.argsort(rows, kind="stable")
        return rows[order], [vals[i] for i in order.tolist()]

    def renumber(self, old_to_new: np.ndarray) -> Texts:
        """The same stat after events were dropped (``old_to_new``: -1 for a dropped event)."""
        a, b = old_to_new[self.rows], old_to_new[self.ref_rows]
        keep_a, keep_b = a >= 0, b >= 0
        return Texts(rows=a[keep_a], buf=self.buf, start=self.start[keep_a], size=self.size[keep_a],
                     ref_rows=b[keep_b], refs=[r for r, k in zip(self.refs, keep_b.tolist(), strict=True) if k])


@dataclass
class Plane:
    """One XPlane: its name (``/device:GPU:0``, ``/host:CPU``), id and plane-level stats by name."""

    name: str
    id: int
    stats: dict[str, Any] = field(default_factory=dict)


@dataclass
class Line:
    """One XLine of a plane (a stream, a host thread, ``XLA Ops``)."""

    plane: int  # index into Decoded.planes
    id: int
    name: str
    display_name: str = ""


@dataclass
class Decoded:
    """Planes, lines and the events of all lines in columns (one entry per event)."""

    planes: list[Plane]
    lines: list[Line]
    line: np.ndarray  # int32: index into lines
    name: np.ndarray  # int64: index into names
    names: list[str]  # event names (metadata display name, else name)
    categories: list[str]  # per name: the XLA op category (hlo_category) or ''
    directions: list[str]  # per name: an XLA copy op's direction (HtoD, DtoH) read from its HLO text, or ''
    start_ns: np.ndarray  # int64, the line's timestamp_ns + the event's offset_ps // 1000
    end_ns: np.ndarray  # int64
    ints: dict[str, np.ndarray]  # INT_STATS: int64 per event, -1 where absent
    texts: dict[str, Texts]  # TEXT_STATS that some event carries
    notes: list[Note | str] = field(default_factory=list)  # things the reader dropped or repaired, for warnings
    epoch_ns: int | None = None  # the profile's start (Task Environment), when the file records one
    truncated: bool = False  # events were dropped before the file was written (trace viewer limit)
    from_viewer: bool = False  # read from the trace-viewer JSON (no plane stats, no profile start)

    @property
    def n(self) -> int:
        return len(self.line)


# XLA's memory space 5 is host memory (host offloading): a layout ending in S(5) lives on the host.
_HOST_SPACE = "S(5)"
_COPY_OP = re.compile(r"\bcopy-(start|done)(?:\.\d+)?\(")


def copy_direction(hlo: str) -> str:
    """HtoD or DtoH for an XLA copy-start/copy-done whose HLO text (``%copy-start = (f32[..]{..}, ...)
    copy-start(f32[..]{..S(5)} %p)``) puts one side in host memory; '' otherwise."""
    m = _COPY_OP.search(hlo)
    if m is None:
        return ""
    result, operand = hlo[:m.start()], hlo[m.end():]
    if m.group(1) == "start":  # the result is (destination, source, context): the operand is the source
        return "HtoD" if _HOST_SPACE in operand else "DtoH" if _HOST_SPACE in result else ""
    # copy-done's result is the destination
    return "DtoH" if _HOST_SPACE in result else "HtoD" if _HOST_SPACE in operand else ""


def empty_ints(n: int) -> dict[str, np.ndarray]:
    return {k: np.full(n, -1, dtype=np.int64) for k in INT_STATS}
