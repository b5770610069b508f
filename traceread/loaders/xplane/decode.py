"""An ``.xplane.pb`` (XSpace protobuf) -> :class:`model.Decoded`.

The planes, lines and metadata are parsed by the protobuf runtime (``proto``: a few thousand small
messages at most); each line's events stay serialized and are decoded all together by :mod:`wire`
(numpy, one round per field, not a Python step per event).

Times: an event starts at its line's ``timestamp_ns`` plus its ``offset_ps`` and lasts
``duration_ps``. Both are turned into integer ns by floor division of the picoseconds (start and end
separately, so a duration is never rounded twice). Events counted by ``num_occurrences`` (aggregated,
no time) are left out and counted in a note.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from traceread.loaders.xplane import model as M
from traceread.loaders.xplane import wire
from traceread.loaders.xplane.proto import message_classes
from traceread.note import AGGREGATED_EVENTS, NEGATIVE_DURATIONS, UNDEFINED_EVENT_METADATA, Note

_LIMIT = 1 << 62  # line timestamps (ns), event offsets and durations (ps) past this are no times


class Damaged(ValueError):
    """The bytes are not a well-formed XSpace."""


def stat_value(stat: Any, stat_names: dict[int, str]) -> Any:
    """The value of one XStat message (a ref_value is the name of the stat metadata it points at)."""
    which = stat.WhichOneof("value")
    if which is None:
        return None
    if which == "ref_value":
        return stat_names.get(stat.ref_value, "")
    return getattr(stat, which)


def parse_space(data: bytes) -> Any:
    from google.protobuf.message import DecodeError

    space = message_classes()["XSpace"]()
    try:
        space.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise Damaged(str(exc).strip() or "the protobuf parser refused it") from None
    return space


def decode(data: bytes) -> M.Decoded:
    """Decode a whole XSpace (see module doc); raises :class:`Damaged` on malformed bytes."""
    space = parse_space(data)
    planes: list[M.Plane] = []
    lines: list[M.Line] = []
    names: dict[tuple[str, str, str], int] = {}  # (name, category, copy direction) -> code
    line_ts: list[int] = []
    blobs: list[bytes] = []
    counts: list[int] = []
    sizes: list[np.ndarray] = []
    plane_name_code: list[np.ndarray] = []  # per plane: metadata id -> name code, by searchsorted
    plane_meta_ids: list[np.ndarray] = []
    plane_stat_ids: list[dict[str, int]] = []
    plane_stat_names: list[dict[int, str]] = []
    epoch = None
    for p in space.planes:
        stat_names = {int(k): v.name for k, v in p.stat_metadata.items()}
        stats = {stat_names.get(s.metadata_id, str(s.metadata_id)): stat_value(s, stat_names) for s in p.stats}
        plane = M.Plane(name=p.name, id=int(p.id), stats=stats)
        pi = len(planes)
        planes.append(plane)
        if p.name == "Task Environment" and isinstance(stats.get("profile_start_time"), int):
            epoch = int(stats["profile_start_time"])
        ids, codes = [], []
        for k, md in p.event_metadata.items():
            cat = ""
            for s in md.stats:
                if stat_names.get(s.metadata_id) == M.HLO_CATEGORY:
                    v = stat_value(s, stat_names)
                    cat = v if isinstance(v, str) else ""
            shown = md.display_name or md.name
            ids.append(int(k))
            direction = M.copy_direction(md.name) if "copy" in cat or "copy-" in md.name[:40] else ""
            codes.append(names.setdefault((shown, cat, direction), len(names)))
        order = np.argsort(np.array(ids, dtype=np.int64), kind="stable")
        plane_meta_ids.append(np.array(ids, dtype=np.int64)[order])
        plane_name_code.append(np.array(codes, dtype=np.int64)[order])
        plane_stat_ids.append({v: k for k, v in stat_names.items()})
        plane_stat_names.append(stat_names)
        for ln in p.lines:
            evs = list(ln.events)  # each event's bytes made once, then joined and measured
            lines.append(M.Line(plane=pi, id=int(ln.id), name=ln.name, display_name=ln.display_name))
            line_ts.append(int(ln.timestamp_ns))
            counts.append(len(evs))
            blobs.append(b"".join(evs))
            sizes.append(np.fromiter(map(len, evs), dtype=np.int64, count=len(evs)))
    keys = list(names)
    out = _events(planes, lines, line_ts, blobs, counts, sizes, plane_meta_ids, plane_name_code, plane_stat_ids,
                  plane_stat_names, [k[0] for k in keys], [k[1] for k in keys], [k[2] for k in keys])
    out.epoch_ns = epoch
    return out


def _events(planes: list[M.Plane], lines: list[M.Line], line_ts: list[int], blobs: list[bytes], counts: list[int],
            sizes: list[np.ndarray], meta_ids: list[np.ndarray], name_codes: list[np.ndarray],
            stat_ids: list[dict[str, int]], stat_names: list[dict[int, str]], names: list[str],
            cats: list[str], directions: list[str]) -> M.Decoded:
    buf = np.frombuffer(b"".join(blobs), dtype=np.uint8)
    size = np.concatenate(sizes) if sizes else np.zeros(0, np.int64)
    n = len(size)
    end = np.cumsum(size)
    start = end - size
    line = np.repeat(np.arange(len(lines), dtype=np.int32), counts)
    plane_of_line = np.array([ln.plane for ln in lines], dtype=np.int32)
    plane = plane_of_line[line] if n else np.zeros(0, np.int32)
    try:
        f = wire.fields(buf, start, end)
        mid, off, dur, occ = (np.zeros(n, np.int64) for _ in range(4))
        has_off = np.zeros(n, dtype=bool)
        for number, dest in ((1, mid), (2, off), (3, dur), (5, occ)):
            rows = f.where(number)
            rows = rows[f.wire[rows] == wire.VARINT]
            dest[f.msg[rows]] = wire.signed(f.value[rows])
            if number == 2:
                has_off[f.msg[rows]] = True
            if number == 5:  # the oneof: the later field wins, as protobuf decides
                has_off[f.msg[rows]] = False
        srows = f.where(4)
        srows = srows[f.wire[srows] == wire.LEN]
        owner = f.msg[srows]
        s = wire.fields(buf, f.start[srows], f.start[srows] + f.size[srows])
    except wire.WireError as exc:
        raise Damaged(f"an event: {exc}") from None
    notes: list[Note | str] = []
    ts = np.array(line_ts, dtype=np.int64)[line] if n else np.zeros(0, np.int64)
    # offset + duration must fit int64 ps, and the line's ns plus that in ns must fit int64 ns
    if n and any(int(np.max(a)) >= _LIMIT or int(np.min(a)) <= -_LIMIT for a in (ts, off, dur)):
        raise Damaged("an event time past 2^62 (ns for a line, ps for an event): not a time")
    neg = dur < 0
    if neg.any():
        notes.append(Note.of(NEGATIVE_DURATIONS, count=int(neg.sum())))
        dur = np.where(neg, 0, dur)
    start_ns = ts + off // 1000
    end_ns = ts + (off + dur) // 1000
    keep = has_off | (occ == 0)
    dropped = n - int(keep.sum())
    if dropped:
        notes.append(Note.of(AGGREGATED_EVENTS, count=dropped))
    # event names: per plane, metadata id -> name code (an id the plane does not define: '')
    code = np.full(n, -1, dtype=np.int64)
    for pi in range(len(planes)):
        rows = np.flatnonzero(plane == pi)
        ids = meta_ids[pi]
        if not len(rows) or not len(ids):
            continue
        pos = np.minimum(np.searchsorted(ids, mid[rows]), len(ids) - 1)
        hit = ids[pos] == mid[rows]
        code[rows[hit]] = name_codes[pi][pos[hit]]
    if (code < 0).any():
        notes.append(Note.of(UNDEFINED_EVENT_METADATA, count=int((code < 0).sum())))
        names, cats, directions = [*names, ""], [*cats, ""], [*directions, ""]
        code = np.where(code < 0, len(names) - 1, code)
    ints, texts = _stats(buf, s, owner, plane, stat_ids, stat_names, n)
    out = M.Decoded(planes=planes, lines=lines, line=line, name=code, names=names, categories=cats, directions=directions,
                    start_ns=start_ns, end_ns=end_ns, ints=ints, texts=texts, notes=notes)
    if dropped:
        _take(out, np.flatnonzero(keep))
    return out


def _stats(buf: np.ndarray, s: wire.Fields, owner: np.ndarray, plane: np.ndarray, stat_ids: list[dict[str, int]],
           stat_names: list[dict[int, str]], n: int) -> tuple[dict[str, np.ndarray], dict[str, M.Texts]]:
    """The stats the frame reads, per event (``model.INT_STATS`` and ``model.TEXT_STATS``)."""
    nstat = len(owner)
    smid = np.full(nstat, -1, dtype=np.int64)
    rows = s.where(1)
    rows = rows[s.wire[rows] == wire.VARINT]
    smid[s.msg[rows]] = wire.signed(s.value[rows])
    # the value: the last value field of each stat (fields 2-7 are a oneof)
    vrow = np.full(nstat, -1, dtype=np.int64)
    vals = np.flatnonzero((s.number >= 2) & (s.number <= 7))
    vrow[s.msg[vals]] = vals
    splane = plane[owner] if nstat else np.zeros(0, np.int32)
    ints = M.empty_ints(n)
    texts: dict[str, M.Texts] = {}
    for name in (*M.INT_STATS, *M.TEXT_STATS):
        want = np.array([ids.get(name, -2) for ids in stat_ids], dtype=np.int64)
        if not len(want) or (want == -2).all():
            continue
        hit = np.flatnonzero((smid == want[splane]) & (vrow >= 0))
        if not len(hit):
            continue
        r = vrow[hit]
        number = s.number[r]
        if name in M.INT_STATS:
            ok = np.isin(number, (3, 4)) & (s.wire[r] == wire.VARINT)
            ints[name][owner[hit[ok]]] = wire.signed(s.value[r[ok]])
            continue
        direct = np.isin(number, (5, 6)) & (s.wire[r] == wire.LEN)
        ref = number == 7
        refs = [stat_names[int(p)].get(int(v), "") for p, v in
                zip(splane[hit[ref]].tolist(), wire.signed(s.value[r[ref]]).tolist(), strict=True)]
        texts[name] = M.Texts(rows=owner[hit[direct]], buf=buf, start=s.start[r[direct]], size=s.size[r[direct]],
                              ref_rows=owner[hit[ref]], refs=refs)
    return ints, texts


def _take(d: M.Decoded, keep: np.ndarray) -> None:
    """Keep only the events ``keep`` (sorted rows)."""
    old_to_new = np.full(d.n, -1, dtype=np.int64)
    old_to_new[keep] = np.arange(len(keep))
    d.line, d.name, d.start_ns, d.end_ns = d.line[keep], d.name[keep], d.start_ns[keep], d.end_ns[keep]
    d.ints = {k: v[keep] for k, v in d.ints.items()}
    d.texts = {k: t.renumber(old_to_new) for k, t in d.texts.items()}
