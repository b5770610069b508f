"""The trace-viewer JSON xprof derives from an XSpace -> :class:`model.Decoded`.

What xprof's ``TraceEventsToJson`` writes (JAX saves it as ``*.trace.json.gz``; JAX's
``perfetto_trace.json.gz`` is the same document re-dumped by Python without ``metadata``)::

    {"displayTimeUnit":"ns","metadata":{"highres-ticks":true}, ..., "filteredByVisibility":false, ...,
     "traceEvents":[{"args":{"name":"/device:GPU:0"},"name":"process_name","ph":"M","pid":1},
                    {"args":{"name":"Stream #16(Kernel)"},"name":"thread_name","ph":"M","pid":1,"tid":16},
                    {"pid":1,"tid":16,"name":"...","ts":1373.002,"dur":4.32,"ph":"X","args":{...}}, ...]}

One process per plane (its ``process_name``), one thread per line (``thread_name``), a complete event
(``X``) per XEvent with its stats in ``args`` (older writers: ``i`` for a zero-length event, and a
trailing ``{}``). Times are microsecond floats printed with 17 significant digits: ns are taken as
the nearest integer (exact below 2^53 ns). Counter (``C``) and async (``b``/``e``) events are not rows
(counted in a note). ``filteredByVisibility: true`` means the viewer dropped events past its size
limit: the trace is marked truncated. Plane stats (device vendor, peaks) and the profile's start are
not in this JSON: devices are unnamed and the time base is ``session``.

The document is parsed by orjson and its columns gathered per event in Python (a few microseconds an
event): the ``.xplane.pb`` of the same run is the faster and the more complete input.
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np

from traceread.errors import TraceReadError
from traceread.loaders.xplane import model as M
from traceread.note import VIEWER_NOT_ROWS, Note


def _read(path: str) -> bytes:
    """The file's JSON bytes, gunzipped in bounded pieces under the gzip limits (``--max-json-size``,
    ``--max-gzip-ratio``): a bomb is refused before it fills memory."""
    from traceread.limits import LIMITS, check_inflated, format_size

    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise TraceReadError(path, f"cannot read ({exc.strerror or exc})") from None
    if raw[:2] != b"\x1f\x8b":
        if len(raw) > LIMITS.max_json_bytes:
            raise TraceReadError(path, f"holds more than {format_size(LIMITS.max_json_bytes)} of JSON (--max-json-size)")
        return raw
    parts: list[bytes] = []
    total, data = 0, raw
    try:
        while data:
            z = zlib.decompressobj(16 + zlib.MAX_WBITS)  # one gzip member; a file may hold several
            while True:
                piece = z.decompress(data, 1 << 24)
                total += len(piece)
                check_inflated(path, total, len(raw))
                parts.append(piece)
                data = z.unconsumed_tail
                if z.eof or not (data or piece):
                    break
            if not z.eof:
                raise TraceReadError(path, "a damaged trace-viewer JSON (the gzip stream ends early)")
            data = z.unused_data
    except zlib.error as exc:
        raise TraceReadError(path, f"a damaged trace-viewer JSON (gzip: {exc})") from None
    return b"".join(parts)


def _int(v: Any) -> int:
    """An int stat as the viewer wrote it (a number, or a quoted one past 2^53), else -1."""
    if isinstance(v, bool):
        return -1
    if isinstance(v, int):
        return v if -(2**63) <= v < 2**63 else -1
    if isinstance(v, str) and v.lstrip("-").isdigit() and len(v) < 20:
        n = int(v)
        return n if -(2**63) <= n < 2**63 else -1
    return -1


def _id(v: Any) -> int:
    """A pid or tid: xprof writes line ids as unsigned 64-bit numbers; the frame holds them as int64."""
    if isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**64:
        return v - 2**64 if v >= 2**63 else v
    return _int(v)


def read_viewer(path: str) -> M.Decoded:
    import orjson

    try:
        doc = orjson.loads(_read(path))
    except orjson.JSONDecodeError as exc:
        raise TraceReadError(path, f"a damaged trace-viewer JSON ({' '.join(str(exc).split())[:160]})") from None
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(events, list):
        raise TraceReadError(path, "a trace-viewer JSON without a traceEvents list")
    evs = [e for e in events if isinstance(e, dict)]
    planes_by_pid: dict[Any, int] = {}
    planes: list[M.Plane] = []
    line_names: dict[tuple[Any, Any], str] = {}
    for e in evs:
        if e.get("ph") != "M":
            continue
        got = e.get("args")
        name = got.get("name") if isinstance(got, dict) else None
        if e.get("name") == "process_name" and isinstance(name, str):
            planes_by_pid.setdefault(e.get("pid"), len(planes))
            if planes_by_pid[e.get("pid")] == len(planes):
                planes.append(M.Plane(name=name, id=_id(e.get("pid"))))
        elif e.get("name") == "thread_name" and isinstance(name, str):
            line_names[(e.get("pid"), e.get("tid"))] = name
    timed = [e for e in evs if e.get("ph") in ("X", "i", "I") and isinstance(e.get("ts"), (int, float))
             and not isinstance(e.get("ts"), bool)]
    skipped = sum(1 for e in evs if e.get("ph") in ("C", "b", "e", "n"))
    lines: list[M.Line] = []
    line_index: dict[tuple[Any, Any], int] = {}
    for e in timed:
        key = (e.get("pid"), e.get("tid"))
        if key in line_index:
            continue
        pid = key[0]
        if pid not in planes_by_pid:
            planes_by_pid[pid] = len(planes)
            planes.append(M.Plane(name=f"pid {pid}", id=_id(pid)))
        line_index[key] = len(lines)
        lines.append(M.Line(plane=planes_by_pid[pid], id=_id(key[1]), name=line_names.get(key, str(key[1]))))
    n = len(timed)
    line = np.fromiter((line_index[(e.get("pid"), e.get("tid"))] for e in timed), dtype=np.int32, count=n)
    ts = np.fromiter((float(e["ts"]) for e in timed), dtype=np.float64, count=n)
    dur = np.fromiter((_dur(e.get("dur")) for e in timed), dtype=np.float64, count=n)
    if n and not (np.isfinite(ts).all() and np.abs(ts).max() < 2**62 / 1000):
        raise TraceReadError(path, "a damaged trace-viewer JSON: an event time is not a time")
    start_ns = np.rint(ts * 1000).astype(np.int64)
    end_ns = np.maximum(np.rint((ts + dur) * 1000).astype(np.int64), start_ns)
    names: dict[tuple[str, str, str], int] = {}
    empty: dict[str, Any] = {}
    args: list[dict[str, Any]] = [a if isinstance(a := e.get("args"), dict) else empty for e in timed]
    code = np.fromiter((names.setdefault((str(e.get("name", "")), str(a.get(M.HLO_CATEGORY, "") or ""),
                                          _direction(a)), len(names))
                        for e, a in zip(timed, args, strict=True)), dtype=np.int64, count=n)
    ints = M.empty_ints(n)
    for k in M.INT_STATS:
        ints[k] = np.fromiter((_int(a.get(k)) if k in a else -1 for a in args), dtype=np.int64, count=n)
    texts: dict[str, M.Texts] = {}
    for k in M.TEXT_STATS:
        rows = [i for i, a in enumerate(args) if isinstance(a.get(k), str)]
        if rows:
            texts[k] = M.Texts.of(np.array(rows, dtype=np.int64), [args[i][k] for i in rows])
    notes: list[Note | str] = [Note.of(VIEWER_NOT_ROWS, count=skipped)] if skipped else []
    order = np.argsort(line, kind="stable")  # events grouped by line, as in an XSpace
    d = M.Decoded(planes=planes, lines=lines, line=line, name=code, names=[k[0] for k in names],
                  categories=[k[1] for k in names], directions=[k[2] for k in names], start_ns=start_ns, end_ns=end_ns, ints=ints, texts=texts,
                  notes=notes, truncated=doc.get("filteredByVisibility") is True, from_viewer=True)
    return _reorder(d, order)


def _direction(args: dict[str, Any]) -> str:
    """A copy op's direction from the HLO text xprof keeps in ``long_name`` (see model.copy_direction)."""
    long = args.get("long_name")
    return M.copy_direction(long) if isinstance(long, str) and "copy-" in long[:40] else ""


def _dur(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 2**62 / 1000 else 0.0


def _reorder(d: M.Decoded, order: np.ndarray) -> M.Decoded:
    inv = np.empty(len(order), dtype=np.int64)
    inv[order] = np.arange(len(order))
    d.line, d.name, d.start_ns, d.end_ns = d.line[order], d.name[order], d.start_ns[order], d.end_ns[order]
    d.ints = {k: v[order] for k, v in d.ints.items()}
    d.texts = {k: t.renumber(inv) for k, t in d.texts.items()}
    return d
