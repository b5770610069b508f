"""The compiled chunk scanner (``_cscan.c``, private to this package): one chunk of events -> the decoder's columns.

The C scanner reads a chunk (complete events separated by commas) once and writes the integer
columns straight into arrays allocated here: exact int64 ns from integer or ``<us>.<3 digits>``
microseconds, pid/tid, ids, category and name codes (per-chunk hash tables over the values'
bytes, confirmed by byte comparison), kernel launch configuration, copy sizes and input-shape
codes. Metadata events and rows with collective args (rare) come back as one JSON array that
msgspec decodes, so those keep the msgspec path's exact semantics. This module turns the result
into the same dict as ``decode._columns``: per row, only numpy on whole columns; Python
touches distinct values and the rare msgspec rows.

Whatever the scanner cannot take exactly (string ids other than plain digits or names, escaped
keys, odd types, duplicate keys, more than three decimals, exponents, bad UTF-8, ...) makes it
return a reason, and the caller decodes that chunk with msgspec, the exact fallback. So does
every chunk when the extension is not built, or when ``TRACEREAD_NO_SCANNER=1``.
"""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np

import traceread.loaders.kineto.categories as cats
from traceread.extensions import optional, switched_off
from traceread.loaders.kineto.events import (
    EVENT_LIST,
    Instant,
    InstantOld,
    Meta,
    Row,
    collective_rows,
    wait_rows,
)

# the extension module itself (its ``scan``); None when it was not built: every chunk takes the msgspec path
COMPILED = optional("traceread.loaders.kineto._cscan")
BUILT = COMPILED is not None
DISABLE_ENV = "TRACEREAD_NO_SCANNER"

# column order of the C scanner's outputs (see the enums in _cscan.c)
(C_START, C_END, C_PID, C_TID, C_EXT, C_CORR, C_DEVICE, C_STREAM, C_CAT, C_NAME, C_INSTANT, C_BYTES,
 C_SHAPE) = range(13)
NCOLS, NKCOLS = 13, 9
UNSURE = np.iinfo(np.int64).min  # the C's mark for a value only the fallback gives exactly
_MIN_EVENT = 16  # bytes: no row event is shorter ({"ph":"i","ts":1} is 17), so rows <= len / 16
_TYPICAL_EVENT = 64  # bytes: real traces' rows are 100-500 bytes; a chunk with more rows is rescanned
_NO_ROOM = "more rows than the caller's capacity"  # the C scanner's reason when cap was too small
_RESULT_FIELDS = 12  # the scanner's result tuple (see scan_doc in _cscan.c)

_LIST_DECODER = msgspec.json.Decoder(EVENT_LIST)
_STR_DECODER = msgspec.json.Decoder(str)
_ROW_TYPES = (Row, Instant, InstantOld)


def enabled() -> bool:
    """Whether chunks go to the compiled scanner first (built, and not switched off)."""
    return BUILT and not switched_off(DISABLE_ENV)


def status() -> str:
    """One phrase for users: which decoder this installation uses for Kineto chunks."""
    if not BUILT:
        return "msgspec (compiled scanner not built)"
    if not enabled():
        return f"msgspec (compiled scanner switched off by {DISABLE_ENV})"
    return "compiled scanner"


def scan_chunk(body: Any) -> tuple[dict[str, Any] | None, str]:
    """Columns of the events in ``body`` as ``decode._columns`` gives them, or
    (None, reason) when the chunk must be decoded by msgspec."""
    if COMPILED is None:
        return None, "scanner not built"
    # Sized for typical events first: under the loader's 8 MB malloc threshold the arrays come
    # from the reused heap, whose pages are already mapped (fresh worst-case-sized arrays for
    # every chunk would each be faulted in anew). A chunk of tinier events is scanned
    # again with room for the most rows it can hold.
    for cap in (len(body) // _TYPICAL_EVENT + 1024, len(body) // _MIN_EVENT + 64):
        cols = np.empty((NCOLS, cap), np.int64)
        kern = np.empty((NKCOLS, cap), np.int64)
        res = COMPILED.scan(body, cols, kern, cap)
        if res != _NO_ROOM:
            break
    if isinstance(res, str):
        return None, res
    if len(res) != _RESULT_FIELDS:  # an extension built from an older _cscan.c: rebuild it (pip install -e .)
        return None, "compiled scanner older than this loader"
    n, nk, other, float_ts, cat_raw, name_raw, shape_texts, strings, extra, extra_rows, unsure, counters = res
    try:
        cat_values, name_values = _texts(cat_raw), _texts(name_raw)
        decoded = _LIST_DECODER.decode(extra) if extra is not None else []
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None, "msgspec rejected a value the scanner passed on"
    c = cols[:, :n]
    cat_codes = c[C_CAT].astype(np.int32)
    name_codes = c[C_NAME].astype(np.int32)
    is_kernel = np.take(_lut(cat_values, cats.is_kernel), cat_codes)
    on_gpu = np.take(_lut(cat_values, cats.is_gpu), cat_codes)
    meta, coll_rows, coll_args, w_rows, w_args = [], [], [], [], []
    if decoded:
        comms = [j for j, v in enumerate(name_values) if v == "record_param_comms"]
        cand = is_kernel | codes_in(name_codes, comms, len(name_values)) if comms else is_kernel
        sync_cat = _lut(cat_values, cats.is_sync)
        for ev, row in zip(decoded, extra_rows, strict=True):  # metadata and collective rows: rare
            if row < 0:
                if ev.__class__ is not Meta:
                    return None, "metadata event not decoded as such"
                meta.append((ev.name, ev.pid, ev.tid, ev.args.name, ev.args.labels))
            elif ev.__class__ not in _ROW_TYPES:
                return None, "row event not decoded as such"
            else:
                if cand[row]:
                    coll_rows.append(row)
                    coll_args.append(ev.args)
                if (ev.args.wait_record_corr != -1 or ev.args.wait_on_stream != -1) and sync_cat[cat_codes[row]]:
                    w_rows.append(row)
                    w_args.append(ev.args)
    pid_strings: dict[int, str] = {}
    tid_strings: dict[int, str] = {}
    for col, row, text in strings:
        (tid_strings if col else pid_strings)[row] = text
    kr = kern[0, :nk]
    ksel = is_kernel[kr]
    k = kern[:, :nk][:, ksel]
    copy_rows = np.flatnonzero(np.take(_lut(cat_values, cats.is_copy), cat_codes))
    shape = c[C_SHAPE]
    has_shape = shape >= 0
    s_rows = np.flatnonzero(has_shape & np.take(_lut(cat_values, cats.is_cpu_op), cat_codes))
    if len(s_rows) == int(has_shape.sum()):  # all kept: the C's codes are already in first-seen order
        s_codes, s_texts = shape[s_rows].astype(np.int32), shape_texts
    else:
        s_codes, s_texts = _first_seen(shape[s_rows], shape_texts)
    device = np.where(on_gpu, c[C_DEVICE], -1)
    stream = np.where(on_gpu, c[C_STREAM], -1)
    nbytes = c[C_BYTES][copy_rows]
    if unsure and any((a == UNSURE).any() for a in (c[C_EXT], c[C_CORR], device, stream, nbytes, k[1:])):
        return None, "a string id or odd launch config where the frame uses it"
    out: dict[str, Any] = {
        "n": n,
        "keep": np.ones(n, bool),
        "float_ts": bool(float_ts),
        "instant": c[C_INSTANT].astype(bool),
        "cat_codes": cat_codes, "cat_values": cat_values,
        "name_codes": name_codes, "name_values": name_values,
        "pid": c[C_PID], "pid_strings": pid_strings, "tid": c[C_TID], "tid_strings": tid_strings,
        "start_ns": c[C_START], "end_ns": c[C_END],
        "external_id": c[C_EXT],
        "correlation": c[C_CORR],
        "device": device,
        "stream": stream,
        "meta_rows": meta,
        "other_events": other,
        "counter_events": counters,
        "kernel": {"row": k[0].copy(), "grid": np.ascontiguousarray(k[1:4].T),
                   "block": np.ascontiguousarray(k[4:7].T), "registers": k[7].copy(), "shared_mem": k[8].copy()},
        "copy": {"row": copy_rows.astype(np.int64), "bytes": nbytes},
        "collective": collective_rows(coll_rows, coll_args),
        "waits": wait_rows(w_rows, w_args),
        "shapes": {"row": s_rows.astype(np.int64), "codes": s_codes, "texts": s_texts},
        "notes": {},
    }
    return out, ""


def _texts(values: list) -> list[str]:
    """Category or name values: the scanner decodes plain ones; escaped ones come as bytes."""
    if all(v.__class__ is str for v in values):
        return values
    return [v if v.__class__ is str else _STR_DECODER.decode(b'"' + v + b'"') for v in values]


def codes_in(codes: np.ndarray, chosen: Any, size: int) -> np.ndarray:
    """``np.isin(codes, chosen)`` for codes in ``range(size)``, by one table lookup per row
    (``isin`` sorts, where a lookup is one gather per row). Lookups by code here use ``np.take``,
    which is faster than fancy indexing (``table[codes]``) for int8/int32 codes."""
    table = np.zeros(size, bool)
    table[np.asarray(chosen, np.int64)] = True
    return np.take(table, codes)


def _lut(values: list[str], pred: Any) -> np.ndarray:
    """``pred`` of each distinct value, as a boolean table indexed by code."""
    return np.fromiter(map(pred, values), bool, len(values))


def _first_seen(codes: np.ndarray, texts: list[bytes]) -> tuple[np.ndarray, list[bytes]]:
    """Codes renumbered by first appearance among ``codes`` (the fallback's ``factorize`` order)."""
    if not len(codes):
        return np.zeros(0, np.int32), []
    uniq, first = np.unique(codes, return_index=True)
    order = uniq[np.argsort(first, kind="stable")]
    remap = np.empty(len(texts), np.int32)
    remap[order] = np.arange(len(order), dtype=np.int32)
    return remap[codes], [texts[i] for i in order.tolist()]
