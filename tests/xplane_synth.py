"""XSpace protobufs for the tests, written and read here without traceread's xplane code.

* :class:`PlaneWriter` / :func:`space` encode planes, lines, events and stats by the field numbers of
  ``xplane.proto`` (``tsl/profiler/protobuf``), byte by byte;
* :func:`walk` is a second, independent reader (plain Python, one field at a time) that the tests
  count with: events per (plane, line), their names, metadata categories and stats;
* :func:`viewer_json` writes the trace-viewer JSON xprof derives from an XSpace, in the layout its
  ``TraceEventsToJson`` writes (metadata rows first, then one complete event per XEvent).
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from typing import Any


def varint(v: int) -> bytes:
    v &= (1 << 64) - 1  # negative int64: two's complement, ten bytes
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def f_varint(num: int, v: int) -> bytes:
    return varint(num << 3) + varint(v)


def f_bytes(num: int, data: bytes | str) -> bytes:
    raw = data.encode() if isinstance(data, str) else data
    return varint(num << 3 | 2) + varint(len(raw)) + raw


def f_double(num: int, v: float) -> bytes:
    return varint(num << 3 | 1) + struct.pack("<d", v)


class PlaneWriter:
    """One XPlane: metadata ids are handed out as names are first used."""

    def __init__(self, name: str, plane_id: int = 0) -> None:
        self.name, self.id = name, plane_id
        self.stat_ids: dict[str, int] = {}
        self.event_ids: dict[tuple, int] = {}
        self.event_meta: list[bytes] = []
        self.lines: list[bytes] = []
        self.stats: list[bytes] = []

    def stat_id(self, name: str) -> int:
        return self.stat_ids.setdefault(name, len(self.stat_ids) + 1)

    def stat(self, name: str, value: Any) -> bytes:
        body = f_varint(1, self.stat_id(name))
        if isinstance(value, tuple) and value[0] == "u":
            body += f_varint(3, value[1])
        elif isinstance(value, tuple) and value[0] == "ref":
            body += f_varint(7, self.stat_id(value[1]))
        elif isinstance(value, bool) or isinstance(value, int):
            body += f_varint(4, int(value))
        elif isinstance(value, float):
            body += f_double(2, value)
        elif isinstance(value, bytes):
            body += f_bytes(6, value)
        else:
            body += f_bytes(5, str(value))
        return body

    def event_id(self, name: str, display: str = "", stats: dict[str, Any] | None = None) -> int:
        key = (name, display, tuple(sorted((stats or {}).items())))
        if key not in self.event_ids:
            mid = len(self.event_ids) + 1
            self.event_ids[key] = mid
            body = f_varint(1, mid) + f_bytes(2, name)
            if display:
                body += f_bytes(4, display)
            for k, v in (stats or {}).items():
                body += f_bytes(5, self.stat(k, v))
            self.event_meta.append(f_varint(1, mid) + f_bytes(2, body))
        return self.event_ids[key]

    def plane_stat(self, name: str, value: Any) -> None:
        self.stats.append(self.stat(name, value))

    def line(self, line_id: int, name: str, timestamp_ns: int, events: list[tuple], display: str = "") -> None:
        """``events``: (name, offset_ps, duration_ps, event stats dict[, metadata stats dict[, display]])."""
        body = f_varint(1, line_id) + f_bytes(2, name)
        if timestamp_ns:
            body += f_varint(3, timestamp_ns)
        for ev in events:
            name_, off, dur, stats = ev[:4]
            mstats = ev[4] if len(ev) > 4 else None
            disp = ev[5] if len(ev) > 5 else ""
            e = f_varint(1, self.event_id(name_, disp, mstats))
            if off:
                e += f_varint(2, off)
            if dur:
                e += f_varint(3, dur)
            for k, v in stats.items():
                e += f_bytes(4, self.stat(k, v))
            body += f_bytes(4, e)
        if display:
            body += f_bytes(11, display)
        self.lines.append(body)

    def encode(self) -> bytes:
        out = f_varint(1, self.id) if self.id else b""
        out += f_bytes(2, self.name)
        for ln in self.lines:
            out += f_bytes(3, ln)
        for em in self.event_meta:
            out += f_bytes(4, em)
        for name, sid in self.stat_ids.items():
            out += f_bytes(5, f_varint(1, sid) + f_bytes(2, f_varint(1, sid) + f_bytes(2, name)))
        for st in self.stats:
            out += f_bytes(6, st)
        return out


def space(planes: list[PlaneWriter], hostnames: tuple[str, ...] = ()) -> bytes:
    return b"".join(f_bytes(1, p.encode()) for p in planes) + b"".join(f_bytes(4, h) for h in hostnames)


# --- the independent reader -----------------------------------------------------------------------

def _varint_at(b: bytes, i: int) -> tuple[int, int]:
    r = s = 0
    while True:
        c = b[i]
        i += 1
        r |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return r, i


def _fields(b: bytes):
    i = 0
    while i < len(b):
        key, i = _varint_at(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint_at(b, i)
            yield num, v
        elif wt == 2:
            n, i = _varint_at(b, i)
            yield num, b[i:i + n]
            i += n
        elif wt == 1:
            yield num, b[i:i + 8]
            i += 8
        elif wt == 5:
            yield num, b[i:i + 4]
            i += 4
        else:
            raise ValueError(f"wire type {wt}")


def _i64(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


@dataclass
class WEvent:
    name: str  # display name, else name
    category: str  # the metadata's hlo_category
    start_ps: int  # line timestamp_ns * 1000 + offset_ps
    dur_ps: int
    stats: dict[str, Any]
    long_name: str = ""  # the metadata's name when a display name is shown instead (an XLA op's HLO text)


@dataclass
class WLine:
    id: int
    name: str
    events: list[WEvent] = field(default_factory=list)


@dataclass
class WPlane:
    name: str
    id: int
    stats: dict[str, Any]
    lines: list[WLine]


def _stat(b: bytes, names: dict[int, str]) -> tuple[str, Any]:
    mid, val = 0, None
    for num, v in _fields(b):
        if num == 1:
            mid = v
        elif num == 2:
            val = struct.unpack("<d", v)[0]
        elif num in (3,):
            val = v
        elif num == 4:
            val = _i64(v)
        elif num in (5, 6):
            val = v.decode("utf-8", "replace")
        elif num == 7:
            val = names.get(v, "")
    return names.get(mid, str(mid)), val


def walk(data: bytes) -> list[WPlane]:
    """Every plane, line and event of an XSpace, read field by field."""
    out = []
    for num, pb in _fields(data):
        if num != 1:
            continue
        parts = list(_fields(pb))
        snames = {}
        for n, v in parts:
            if n == 5:
                entry = dict(_fields(v))
                meta = dict(_fields(entry.get(2, b"")))
                snames[meta.get(1, entry.get(1, 0))] = meta.get(2, b"").decode()
        emeta = {}
        for n, v in parts:
            if n == 4:
                entry = dict(_fields(v))
                m = list(_fields(entry.get(2, b"")))
                d = dict(m)
                mstats = dict(_stat(x, snames) for k, x in m if k == 5)
                shown = (d.get(4) or d.get(2, b"")).decode()
                long = d.get(2, b"").decode() if d.get(4) else ""
                emeta[entry.get(1, 0)] = (shown, mstats.get("hlo_category") or "", long)
        plane = WPlane(name="", id=0, stats={}, lines=[])
        for n, v in parts:
            if n == 1:
                plane.id = _i64(v)
            elif n == 2:
                plane.name = v.decode()
            elif n == 6:
                k, val = _stat(v, snames)
                plane.stats[k] = val
            elif n == 3:
                ld = list(_fields(v))
                d = dict(ld)
                line = WLine(id=_i64(d.get(1, 0)), name=d.get(2, b"").decode())
                ts = _i64(d.get(3, 0))
                for k, ev in ld:
                    if k != 4:
                        continue
                    ef = list(_fields(ev))
                    e = dict(ef)
                    shown, cat, long = emeta.get(e.get(1, 0), ("", "", ""))
                    stats = dict(_stat(x, snames) for kk, x in ef if kk == 4)
                    line.events.append(WEvent(shown, cat, ts * 1000 + _i64(e.get(2, 0)), _i64(e.get(3, 0)), stats,
                                              long))
                plane.lines.append(line)
        out.append(plane)
    return out


# --- the trace-viewer JSON xprof derives from it --------------------------------------------------

HOST_PID = 701  # xprof's process id for the host threads (device planes are 1 + their ordinal)


def _pid(plane: WPlane) -> int | None:
    if plane.name.startswith("/device:"):
        return 1 + int(plane.name.rsplit(":", 1)[1].split()[0])
    if plane.name == "/host:CPU":
        return HOST_PID
    return None


def viewer_json(planes: list[WPlane], filtered: bool = False, python_dump: bool = False) -> bytes:
    """xprof's trace-viewer JSON for ``planes`` (``python_dump``: as JAX's perfetto_trace.json.gz, the
    same document re-dumped by Python's json without its ``metadata``)."""
    meta, events = [], []
    lo, hi = None, None
    for p in planes:
        pid = _pid(p)
        if pid is None:
            continue
        meta.append({"args": {"name": p.name}, "name": "process_name", "ph": "M", "pid": pid,
                     "thread_count": len(p.lines)})
        meta.append({"args": {"sort_index": pid}, "name": "process_sort_index", "ph": "M", "pid": pid})
        for ln in sorted(p.lines, key=lambda x: x.id & ((1 << 64) - 1)):
            tid = ln.id & ((1 << 64) - 1)
            meta.append({"args": {"name": ln.name}, "name": "thread_name", "ph": "M", "pid": pid, "tid": tid})
            meta.append({"args": {"sort_index": tid}, "name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid})
            for e in ln.events:
                args = {k: v for k, v in e.stats.items() if v is not None}
                if e.category:
                    args["hlo_category"] = e.category
                if e.long_name:  # xprof shows the display name and keeps the full name here
                    args["long_name"] = e.long_name
                ev = {"pid": pid, "tid": tid, "name": e.name, "ts": e.start_ps / 1e6,
                      "dur": max(e.dur_ps, 1) / 1e6, "ph": "X"}
                if args:
                    ev["args"] = args
                events.append(ev)
                lo = e.start_ps if lo is None else min(lo, e.start_ps)
                hi = e.start_ps + e.dur_ps if hi is None else max(hi, e.start_ps + e.dur_ps)
    if python_dump:
        doc = {"displayTimeUnit": "ns", "codeLink": "", "useNewBackend": False, "returnedEventsSize": len(events),
               "filteredByVisibility": filtered, "fullTimespan": [(lo or 0) / 1e9, (hi or 0) / 1e9],
               "stackFrames": {}, "traceEvents": meta + events, "showCounterMessage": "", "totalCounterEvents": 0}
        return json.dumps(doc).encode()
    # xprof writes the JSON itself: fixed key order, %.17g numbers, no spaces
    head = ('{"displayTimeUnit":"ns","metadata":{"highres-ticks":true}, "codeLink":"",'
            f'"useNewBackend": false,"returnedEventsSize":{len(events)},'
            f'"filteredByVisibility":{"true" if filtered else "false"},'
            f'"fullTimespan":[{(lo or 0) / 1e9:.17g},{(hi or 0) / 1e9:.17g}],"stackFrames":{{}},"traceEvents":[')
    rows = [json.dumps(m, separators=(",", ":")) for m in meta]
    for ev in events:
        body = (f'{{"pid":{ev["pid"]},"tid":{ev["tid"]},"name":{json.dumps(ev["name"])},"ts":{ev["ts"]:.17g},'
                f'"dur":{ev["dur"]:.17g},"ph":"X"')
        if "args" in ev:
            body += ',"args":' + json.dumps(ev["args"], separators=(",", ":"))
        rows.append(body + "}")
    return (head + ",".join(rows) + '], "showCounterMessage": "" ,"totalCounterEvents":0}').encode()
