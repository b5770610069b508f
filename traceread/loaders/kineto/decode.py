"""Decode one chunk of the Kineto event array into plain column arrays (runs in worker processes).

A chunk is the text between two event boundaries. It is decoded in one call by a typed msgspec
decoder that keeps only the fields the frame needs (everything else is skipped without building
objects), and timestamps stay raw text until :func:`us_text_to_ns` turns them into exact ns.
Events that break the typed decode (writer bugs, odd types) are decoded one by one, repaired or
sanitized, and counted; a chunk whose boundaries were guessed wrong is reported back as
``framing_error`` so the caller can rescan it exactly.
"""

from __future__ import annotations

import decimal
import operator
import re
from collections import Counter
from itertools import compress, repeat
from typing import Any

import msgspec
import numpy as np
from msgspec import Raw

import traceread.loaders.kineto.categories as cats
import traceread.loaders.kineto.scan as scan
from traceread.limits import int_text
from traceread.loaders.kineto.events import (
    _KIND,
    EMPTY_RAW,
    EVENT_LIST,
    EVENT_LIST_INT_TIME,
    NO_TIME,
    AnyEvent,
    Args,
    CounterSample,
    Event,
    Instant,
    Meta,
    Row,
    Skipped,
    collective_rows,
    wait_rows,
)
from traceread.loaders.kineto.text import repair_event, scan_values, us_text_to_ns, us_text_to_ns_flag

_LIST_DECODER = msgspec.json.Decoder(EVENT_LIST)
_INT_TIME_DECODER = msgspec.json.Decoder(EVENT_LIST_INT_TIME)
_try_int_time = True  # per process and load: cleared by the first chunk with a float (or odd) time
_ONE_DECODER = msgspec.json.Decoder(AnyEvent)
_PLAIN_DECODER = msgspec.json.Decoder(Event)
_GENERIC_DECODER = msgspec.json.Decoder(float_hook=decimal.Decimal)
_ENCODER = msgspec.json.Encoder(decimal_format="number")

_STREAM_RE = re.compile(r"-?[0-9]+")  # ASCII digits: int() also takes other scripts' digits
_HEX = frozenset("0123456789abcdefABCDEF")
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

# python types each Args field accepts (for sanitizing events the typed decoder rejected)
_ARG_TYPES: dict[str, tuple[type, ...]] = {}
for _f in msgspec.structs.fields(Args):
    _t = (str,) if _f.type is str else (Raw,) if _f.type is Raw else (int, str)
    _ARG_TYPES[_f.encode_name] = _t


def guess_int_time(first: bool = True) -> None:
    """Start a load by trying integer timestamps (see ``events``); call before forking.

    ``first=False`` starts with the exact text decoder instead (tests compare the two).
    """
    global _try_int_time
    _try_int_time = first


def decode_chunk(body: bytes | bytearray | memoryview, final: bool = False) -> dict[str, Any]:
    """Decode the array text ``body`` (events separated by commas, no brackets) into columns.

    ``body`` may also be a bytearray that already carries the brackets: pass it through
    :func:`decode_framed` instead (saves a copy of the chunk).

    Returns a dict of numpy arrays and small lists (see :func:`_columns`), or
    ``{"framing_error": True}`` when ``body`` is not a run of complete values (a wrong boundary
    guess). ``final`` chunks are never framing errors: what follows the last complete event is
    reported as ``tail_offset`` for the caller (array end, trailer or truncation).
    """
    if final:
        return _decode(None, body, final)
    return _decode(b"[" + bytes(body) + b"]", body, final)


def decode_framed(framed: bytearray | memoryview) -> dict[str, Any]:
    """:func:`decode_chunk` for a non-final chunk read as ``[`` + body + ``]``."""
    return _decode(framed, memoryview(framed)[1:-1], False)


def _decode(framed: Any, body: Any, final: bool) -> dict[str, Any]:
    """The compiled scanner's columns where it takes the chunk exactly, else msgspec's."""
    if scan.enabled():
        out, reason = decode_scanned(body, final)
        if out is not None:
            out["decoder"] = ("scanner", len(body), "")
            return out
    else:
        reason = "scanner not built" if not scan.BUILT else "scanner switched off"
    out = decode_msgspec(framed, body, final)
    out["decoder"] = ("msgspec", len(body), reason)
    return out


def decode_scanned(body: Any, final: bool) -> tuple[dict[str, Any] | None, str]:
    """Scanner columns for a chunk; a final chunk is first cut after its last complete event."""
    array_end = None
    tail_offset = len(body)
    if final:
        spans, array_end, tail_offset = scan_values(body)
        body = memoryview(body)[spans[0][0]: tail_offset] if spans else b""
    out, reason = scan.scan_chunk(body)
    if out is not None:
        out["tail_offset"] = tail_offset
        out["array_end"] = array_end
    return out, reason


def decode_msgspec(framed: Any, body: Any, final: bool) -> dict[str, Any]:
    global _try_int_time
    notes: Counter[str] = Counter()
    int_time = False
    try:
        if framed is None:
            raise msgspec.DecodeError("final chunk is scanned exactly")
        events = None
        if _try_int_time:
            try:
                events = _INT_TIME_DECODER.decode(framed)
                int_time = True
            except msgspec.ValidationError:  # a float time (or an odd type): text from now on
                _try_int_time = False
            except msgspec.DecodeError:  # not a run of values: the text decoder decides below
                pass
        if events is None:
            events = _LIST_DECODER.decode(framed)
        tail_offset = len(body)
        array_end = None
    except (msgspec.DecodeError, msgspec.ValidationError):
        spans, array_end, consumed = scan_values(body)
        rest = bytes(body[consumed: array_end if array_end is not None else len(body)])
        if not final and (array_end is not None or rest.strip(b" \t\r\n,")):
            return {"framing_error": True}
        events = _decode_spans(body, spans, notes)
        tail_offset = consumed
    out = _columns(events, notes, int_time)
    out["tail_offset"] = tail_offset
    out["array_end"] = array_end
    return out


def _decode_spans(body: Any, spans: list[tuple[int, int]], notes: Counter[str]) -> list[Any]:
    """Decode events given by exact spans: in groups while they decode, one by one where not."""
    out: list[Any] = []
    stack = [(0, len(spans))]
    while stack:
        lo, hi = stack.pop()
        if lo >= hi:
            continue
        if hi - lo > 1:
            text = b"[" + bytes(body[spans[lo][0]: spans[hi - 1][1]]) + b"]"
            try:
                out.extend(_LIST_DECODER.decode(text))
                continue
            except (msgspec.DecodeError, msgspec.ValidationError):
                mid = (lo + hi) // 2
                stack.append((mid, hi))  # popped second: keeps file order
                stack.append((lo, mid))
                continue
        ev = _decode_one(bytes(body[spans[lo][0]: spans[lo][1]]), notes)
        if ev is not None:
            out.append(ev)
    return out


def _decode_one(text: bytes, notes: Counter[str]) -> Any:
    try:
        return _ONE_DECODER.decode(text)
    except msgspec.ValidationError:
        pass
    except msgspec.DecodeError:
        text, fixes = repair_event(text)
        for fix in fixes:
            notes[f"repaired: {fix}"] += 1
        try:
            return _ONE_DECODER.decode(text)
        except msgspec.ValidationError:
            pass
        except msgspec.DecodeError:
            notes["skipped: unparseable event"] += 1
            return None
    try:
        obj = _GENERIC_DECODER.decode(text)
        if not isinstance(obj, dict):
            notes["skipped: not an event object"] += 1
            return None
        ev = _PLAIN_DECODER.decode(_ENCODER.encode(_sanitize(obj, notes)))
    except (msgspec.DecodeError, msgspec.ValidationError, TypeError):
        notes["skipped: unparseable event"] += 1
        return None
    return _by_phase(ev)


def _by_phase(ev: Event) -> Any:
    """The phase-typed event for an untyped one (a phase missing or outside the known set)."""
    if ev.ph == "X":
        return Row(ev.cat, ev.name, ev.pid, ev.tid, ev.ts, ev.dur, ev.args)
    if ev.ph in ("i", "I"):
        return Instant(ev.cat, ev.name, ev.pid, ev.tid, ev.ts, ev.dur, ev.args)
    if ev.ph == "M":
        return Meta(ev.name, ev.pid, ev.tid, ev.args)
    if ev.ph == "C":
        return CounterSample()
    return Skipped()


def _sanitize(obj: dict[str, Any], notes: Counter[str]) -> dict[str, Any]:
    """Drop the values whose JSON type the typed decoder cannot take (an odd writer's types)."""
    out: dict[str, Any] = {}
    for key in ("ph", "cat", "name"):
        if isinstance(obj.get(key), str):
            out[key] = obj[key]
        elif key in obj and obj[key] is not None:
            out[key] = str(obj[key])
    for key in ("pid", "tid"):
        v = obj.get(key)
        if isinstance(v, (int, str)) and not isinstance(v, bool):
            out[key] = v
    for key in ("ts", "dur"):
        if key in obj:
            out[key] = obj[key]
    args = obj.get("args")
    if isinstance(args, dict):
        clean = {}
        for k, v in args.items():
            want = _ARG_TYPES.get(k)
            if want is None:
                continue
            ok = want == (Raw,) or (isinstance(v, want) and not isinstance(v, bool))
            if ok:
                clean[k] = v
            else:
                notes[f"ignored: arg {k!r} of unexpected type"] += 1
        out["args"] = clean
    return out


def to_int64(values: list[Any], notes: Counter[str] | None = None, what: str = "") -> np.ndarray:
    """Integer column from decoded ids; strings like ``"stream 7"`` give 7, junk and overflow -1."""
    try:
        return np.fromiter(values, np.int64, len(values))
    except (OverflowError, ValueError, TypeError):
        pass
    out = np.empty(len(values), dtype=np.int64)
    for i, v in enumerate(values):
        out[i] = _one_int(v, notes, what)
    return out


def _one_int(v: Any, notes: Counter[str] | None, what: str) -> int:
    if isinstance(v, int):
        if INT64_MIN <= v <= INT64_MAX:
            return v
        if notes is not None:
            notes[f"ignored: {what} beyond int64"] += 1
        return -1
    if isinstance(v, float):
        return int(v) if v == v and abs(v) < 9e18 else -1
    if isinstance(v, str):
        s = v.strip()
        if s.isascii() and s.isdigit():  # 2021 files write CPU tids as "25738"
            n = int_text(s)
            return -1 if n is None else n
        if s.lower().startswith("0x"):
            if len(s) > 18 or not all(c in _HEX for c in s[2:]) or len(s) == 2:  # past int64, or not hex
                return -1
            n = int(s, 16)
            return n if n <= INT64_MAX else -1
        m = _STREAM_RE.search(s)
        if m:
            n = int_text(m.group())
            if n is None and notes is not None:
                notes[f"ignored: {what} beyond int64"] += 1
            return -1 if n is None else n
    return -1


def ids_with_strings(values: list[Any]) -> tuple[np.ndarray, dict[int, str]]:
    """pid/tid column: numbers (and "stream 7") as ints; other strings returned by row for mapping."""
    try:
        return np.fromiter(values, np.int64, len(values)), {}
    except (OverflowError, ValueError, TypeError):
        pass
    odd = [i for i, v in enumerate(values) if v.__class__ is not int]
    fixed = list(values)
    strings: dict[int, str] = {}
    for i in odd:
        v = values[i]
        if isinstance(v, str) and not _STREAM_RE.search(v):
            strings[i] = v
            fixed[i] = -1
        else:
            fixed[i] = _one_int(v, None, "")
    return to_int64(fixed), strings


def factorize(values: Any) -> tuple[np.ndarray, list[Any]]:
    """Codes and distinct values in first-seen order (strings repeat: a dict beats a hash table)."""
    seen: dict[Any, int] = {}
    codes = np.fromiter(map(seen.setdefault, values, map(len, repeat(seen))), np.int32, len(values))
    return codes, list(seen)


def _subset(cat_codes: np.ndarray, cat_values: list[str], pred: Any) -> np.ndarray:
    """Row indices whose raw category satisfies ``pred`` (evaluated once per distinct category)."""
    wanted = [i for i, c in enumerate(cat_values) if pred(c)]
    if not wanted:
        return np.zeros(0, dtype=np.int64)
    if len(wanted) == len(cat_values):
        return np.arange(len(cat_codes), dtype=np.int64)
    lut = np.zeros(len(cat_values), dtype=bool)
    lut[wanted] = True
    return np.flatnonzero(lut[cat_codes])


def _pick(seq: Any, idx: list[int]) -> tuple:
    """``seq[i]`` for each ``i`` in ``idx``, gathered at C speed."""
    if not idx:
        return ()
    if len(idx) == 1:
        return (seq[idx[0]],)
    return operator.itemgetter(*idx)(seq)


def _columns(events: list[Any], notes: Counter[str], int_time: bool = False) -> dict[str, Any]:
    """Column arrays for the row events (X and instants) plus metadata rows and side values.

    ``int_time``: the events came from the integer-time decoder (``ts``/``dur`` are ints).

    Per-row work is C-level transposition (``map``/``attrgetter``/``zip``) and numpy; Python
    loops only run over rare subsets (metadata, kernels with collective args, odd values).
    """
    kind = np.fromiter(map(_KIND.__getitem__, map(type, events)), np.int8, len(events))
    is_row = kind <= 1
    n_rows = int(is_row.sum())
    rows = events if n_rows == len(events) else list(compress(events, is_row.tolist()))
    meta = [(e.name, e.pid, e.tid, e.args.name, e.args.labels) for e in compress(events, (kind == 2).tolist())]
    # one list per field: a comprehension per column beats transposing with zip(*...)
    cat = [e.cat for e in rows]
    name = [e.name for e in rows]
    pid_v = [e.pid for e in rows]
    tid_v = [e.tid for e in rows]
    ts = [e.ts for e in rows]
    dur = [e.dur for e in rows]
    args = [e.args for e in rows]
    ext_v = [a.external_id for a in args]
    corr_v = [a.correlation for a in args]
    instant = kind[is_row] == 1
    if int_time:
        (ts_ns, ts_ok), (dur_ns, dur_ok), float_ts = _int_us_to_ns(ts), _int_us_to_ns(dur), False
    else:
        ts_ns, ts_ok, float_ts = us_text_to_ns_flag(ts)
        for i in np.flatnonzero(instant).tolist():  # instants have no dur: keep the fast number path
            dur[i] = _ZERO
        dur_ns, dur_ok = us_text_to_ns(dur)
    del ts, dur
    if not ts_ok.all():
        notes["skipped: event without a numeric ts"] += int((~ts_ok).sum())
    no_dur = ~dur_ok & ~instant
    if no_dur.any():
        notes["X events without dur (taken as 0)"] += int(no_dur.sum())
    dur_ns = np.where(dur_ok & ~instant, dur_ns, 0)
    if (dur_ns < 0).any():
        notes["negative durations clamped to 0"] += int((dur_ns < 0).sum())
        dur_ns = np.maximum(dur_ns, 0)
    cat_codes, cat_values = factorize(cat)
    name_codes, name_values = factorize(name)
    pid, pid_strings = ids_with_strings(pid_v)
    tid, tid_strings = ids_with_strings(tid_v)
    ext = to_int64(ext_v, notes, "External id")
    missing = np.flatnonzero(ext == -1).tolist()
    if missing:  # Kineto <= 2022-04 spelling
        old = [a.external_id_old for a in _pick(args, missing)]
        if any(v != -1 for v in old):
            ext[missing] = to_int64(old, notes, "external id")
    device = np.full(n_rows, -1, dtype=np.int64)
    stream = np.full(n_rows, -1, dtype=np.int64)
    gpu = _subset(cat_codes, cat_values, cats.is_gpu)
    if len(gpu):
        gargs = _pick(args, gpu.tolist())
        device[gpu] = to_int64([a.device for a in gargs], notes, "device")
        stream[gpu] = to_int64([a.stream for a in gargs], notes, "stream")
    out: dict[str, Any] = {
        "n": n_rows,
        "keep": ts_ok,
        "float_ts": float_ts,
        "instant": instant,
        "cat_codes": cat_codes, "cat_values": cat_values,
        "name_codes": name_codes, "name_values": name_values,
        "pid": pid, "pid_strings": pid_strings, "tid": tid, "tid_strings": tid_strings,
        "start_ns": ts_ns, "end_ns": ts_ns + dur_ns,
        "external_id": ext,
        "correlation": to_int64(corr_v, notes, "correlation"),
        "device": device,
        "stream": stream,
        "meta_rows": meta,
        "other_events": int((kind >= 3).sum()),  # flows, counters: not rows
        "counter_events": int((kind == 4).sum()),
    }
    out.update(_side_values(args, cat_codes, cat_values, name_codes, name_values, notes))
    out["notes"] = dict(notes)
    return out


_NS_LIMIT = INT64_MAX // 1000  # microseconds beyond this do not fit int64 nanoseconds


def _int_us_to_ns(values: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Integer microseconds (``NO_TIME`` where absent) as (ns, ok)."""
    try:
        us = np.fromiter(values, np.int64, len(values))
    except OverflowError:  # beyond int64: such values are not times
        us = np.fromiter((v if -_NS_LIMIT < v < _NS_LIMIT else NO_TIME for v in values), np.int64, len(values))
    ok = (us > -_NS_LIMIT) & (us < _NS_LIMIT)
    return np.where(ok, us * 1000, 0), ok


def _side_values(args: list[Args], cat_codes: np.ndarray, cat_values: list[str], name_codes: np.ndarray,
                 name_values: list[str], notes: Counter[str]) -> dict[str, Any]:
    """Rare or bulky args, by chunk row index: kernel launch config, copy bytes, collectives, shapes."""
    kern = _subset(cat_codes, cat_values, cats.is_kernel).tolist()
    kargs = _pick(args, kern)
    has_grid = [bool(a.grid) for a in kargs]
    k = list(compress(kern, has_grid))
    ka = kargs if all(has_grid) else list(compress(kargs, has_grid))
    grid = [a.grid for a in ka]
    block = [a.block for a in ka]
    regs = [a.registers for a in ka]
    smem = [a.shared_mem for a in ka]
    kernel = {
        "row": np.array(k, dtype=np.int64),
        "grid": _triples(grid),
        "block": _triples(block),
        "registers": to_int64(regs, notes, "registers"),
        "shared_mem": to_int64(smem, notes, "shared memory"),
    }
    c = _subset(cat_codes, cat_values, cats.is_copy).tolist()
    copy = {"row": np.array(c, dtype=np.int64),
            "bytes": to_int64([a.nbytes for a in _pick(args, c)], notes, "bytes")}
    comms = [j for j, v in enumerate(name_values) if v == "record_param_comms"]
    cand = sorted(set(kern) | (set(np.flatnonzero(np.isin(name_codes, comms)).tolist()) if comms else set()))
    coll = collective_rows(cand, _pick(args, cand))
    syncs = _subset(cat_codes, cat_values, cats.is_sync).tolist()
    waits = wait_rows(syncs, _pick(args, syncs))
    ops = _subset(cat_codes, cat_values, cats.is_cpu_op).tolist()
    oargs = _pick(args, ops)
    s: list[int] = []
    # C-level test (an absent field is the shared default object): often no shapes at all
    if not all(map(operator.is_, map(_DIMS, oargs), repeat(EMPTY_RAW))) \
            or not all(map(operator.is_, map(_DIMS_OLD, oargs), repeat(EMPTY_RAW))):
        s = [i for i, a in zip(ops, oargs, strict=True) if a.input_dims or a.input_dims_old]
    shape_texts_in = [b"%b\x00%b" % (a.input_dims or a.input_dims_old, a.input_types) for a in _pick(args, s)]
    shape_codes, shape_texts = factorize(shape_texts_in)
    shapes = {"row": np.array(s, dtype=np.int64), "codes": shape_codes, "texts": shape_texts}
    return {"kernel": kernel, "copy": copy, "collective": coll, "waits": waits, "shapes": shapes}


_ZERO = Raw(b"0")
_DIMS = operator.attrgetter("input_dims")
_DIMS_OLD = operator.attrgetter("input_dims_old")


def _triples(raws: list[Raw]) -> np.ndarray:
    """``[x, y, z]`` texts as an (n, 3) int64 array; -1 where a value is not three integers."""
    if not raws:
        return np.zeros((0, 3), dtype=np.int64)
    joined = b",".join(raws).translate(None, b"[] \t\r\n")
    try:
        v = np.fromstring(joined, sep=",", dtype=np.int64)
        if len(v) == 3 * len(raws):
            return v.reshape(-1, 3)
    except ValueError:
        pass
    out = np.full((len(raws), 3), -1, dtype=np.int64)
    for i, r in enumerate(raws):
        try:
            vals = msgspec.json.decode(r)
        except msgspec.DecodeError:
            continue
        if isinstance(vals, list) and len(vals) == 3 and all(isinstance(x, int) for x in vals):
            out[i] = vals
    return out
