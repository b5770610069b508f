"""Merge decoded chunks into the normalized events frame and its side tables.

Per chunk only distinct values are touched in Python (category/name dictionaries, string ids);
everything per row is numpy on whole columns.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson

if TYPE_CHECKING:  # imported in the functions that build frames: see traceread.runner.prefetch
    import pandas as pd

import traceread.loaders.kineto.categories as cats
from traceread import schema
from traceread.limits import check_events, int_text
from traceread.loaders.kineto.decode import INT64_MAX, INT64_MIN
from traceread.loaders.kineto.scan import codes_in
from traceread.note import PROFILER_STEP_PAST_INT64, Note
from traceread.trace import SideTables, shown_path

_INT_COLUMNS = ("pid", "tid", "start_ns", "end_ns", "external_id", "correlation", "device", "stream")
_STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
_MEMCPY_RE = re.compile(r"^Memcpy\s+(\w+)\s*\(\s*([^)]*?)\s*->\s*([^)]*?)\s*\)")
_MEMSET_RE = re.compile(r"^Memset\s*\(\s*([^)]*?)\s*\)")


class FrameBuilder:
    """Accumulates chunk results (in file order), then builds the frame once."""

    def __init__(self) -> None:
        self.cat_ids: dict[str, int] = {}
        self.name_ids: dict[str, int] = {}
        self.string_ids: dict[str, int] = {}  # non-numeric pid/tid strings -> -2, -3, ...
        self.columns = _Columns({**{c: np.int64 for c in _INT_COLUMNS}, "cat": np.int32, "name": np.int32,
                                 "instant": np.bool_})
        self.kernel: list[dict[str, np.ndarray]] = []
        self.copy: list[dict[str, np.ndarray]] = []
        self.collective: list[tuple] = []
        self.waits: list[tuple] = []  # (row, wait_on_stream, record correlation) of Stream Wait Event rows
        self.shape_rows: list[np.ndarray] = []
        self.shape_codes: list[np.ndarray] = []
        self.shape_ids: dict[bytes, int] = {}
        self.meta_rows: list[tuple] = []
        self.notes: Counter[str] = Counter()
        self.float_ts = False
        self.other_events = 0
        self.counter_events = 0  # Chrome-trace counters (``ph: C``): not rows, counted
        self.stream_sync_rows = 0  # set by build: Stream Sync rows on Kineto's separate sync row
        self.n = 0
        # which decoder took the chunks: {"scanner"|"msgspec": [chunks, JSON bytes]}; why msgspec
        self.decoders: dict[str, list[int]] = {}
        self.fallback_reasons: Counter[str] = Counter()

    def expect(self, json_bytes: int) -> None:
        """Size hint: reserve rows for a file of this many JSON bytes (untouched pages cost nothing)."""
        self.columns.reserve(json_bytes // 100 + 1024)

    def _string_id(self, s: str) -> int:
        return self.string_ids.setdefault(s, -2 - len(self.string_ids))

    def _count_decoder(self, decoder: tuple[str, int, str] | None) -> None:
        if decoder is None:
            return
        kind, nbytes, reason = decoder
        tally = self.decoders.setdefault(kind, [0, 0])
        tally[0] += 1
        tally[1] += nbytes
        if reason:
            self.fallback_reasons[reason] += 1

    def decoder_summary(self) -> dict[str, Any]:
        """Which decoder loaded the file, for ``meta.extra["kineto_decoder"]``."""
        total = sum(b for _, b in self.decoders.values()) or 1
        scanner = self.decoders.get("scanner", [0, 0])
        msgspec_ = self.decoders.get("msgspec", [0, 0])
        return {"scanner_chunks": scanner[0], "scanner_bytes": scanner[1], "msgspec_chunks": msgspec_[0],
                "msgspec_bytes": msgspec_[1], "scanner_share": round(scanner[1] / total, 4),
                "fallback_reasons": dict(self.fallback_reasons.most_common())}

    def add(self, c: dict[str, Any]) -> None:
        self._count_decoder(c.get("decoder"))
        self.notes.update(c["notes"])
        self.meta_rows.extend(c["meta_rows"])
        self.other_events += c["other_events"]
        self.counter_events += c["counter_events"]
        if not c["n"]:
            return
        self.float_ts |= c["float_ts"]
        keep = c["keep"]
        all_kept = bool(keep.all())
        new_index = np.cumsum(keep) - 1 + self.n  # chunk row -> frame row

        def take(a: np.ndarray) -> np.ndarray:
            return a if all_kept else a[keep]

        cat_lut = np.array([self.cat_ids.setdefault(v, len(self.cat_ids)) for v in c["cat_values"]], np.int32)
        name_lut = np.array([self.name_ids.setdefault(v, len(self.name_ids)) for v in c["name_values"]],
                            np.int32)
        out = {"cat": take(np.take(cat_lut, c["cat_codes"])), "name": take(np.take(name_lut, c["name_codes"])),
               "instant": take(c["instant"])}
        for col in ("pid", "tid"):
            arr = c[col]
            if c[f"{col}_strings"]:
                arr = arr.copy()
                for i, s in c[f"{col}_strings"].items():
                    arr[i] = self._string_id(s)
            out[col] = take(arr)
        for col in ("start_ns", "end_ns", "external_id", "correlation", "device", "stream"):
            out[col] = take(c[col])
        self.columns.append(out)

        def rows(local: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            ok = keep[local]
            return new_index[local[ok]], ok

        k = c["kernel"]
        r, ok = rows(k["row"])
        self.kernel.append({"row": r, "grid": k["grid"][ok], "block": k["block"][ok],
                            "registers": k["registers"][ok], "shared_mem": k["shared_mem"][ok]})
        r, ok = rows(c["copy"]["row"])
        self.copy.append({"row": r, "bytes": c["copy"]["bytes"][ok]})
        for t in c["collective"]:
            if keep[t[0]]:
                self.collective.append((int(new_index[t[0]]), *t[1:]))
        for t in c.get("waits", ()):
            if keep[t[0]]:
                self.waits.append((int(new_index[t[0]]), *t[1:]))
        sh = c["shapes"]
        if len(sh["row"]):
            lut = np.array([self.shape_ids.setdefault(t, len(self.shape_ids)) for t in sh["texts"]], np.int32)
            r, ok = rows(sh["row"])
            self.shape_rows.append(r)
            self.shape_codes.append(lut[sh["codes"]][ok])
        self.n += int(keep.sum())

    def state(self) -> dict[str, Any]:
        """Everything added so far but the rows, as plain picklable data (for :meth:`extend` in
        another process, whose :meth:`spare_rows` receive the bytes of :meth:`rows`)."""
        return {
            "cat": list(self.cat_ids), "name": list(self.name_ids),
            "strings": dict(self.string_ids), "kernel": self.kernel, "copy": self.copy,
            "collective": self.collective, "waits": self.waits, "shape_rows": self.shape_rows, "shape_codes": self.shape_codes,
            "shape_texts": list(self.shape_ids), "meta_rows": self.meta_rows, "notes": dict(self.notes),
            "float_ts": self.float_ts, "other_events": self.other_events, "counter_events": self.counter_events,
            "n": self.n,
            "decoders": self.decoders, "fallback_reasons": dict(self.fallback_reasons),
        }

    def rows(self) -> dict[str, np.ndarray]:
        """The row columns added so far (the builder takes no more rows after this)."""
        return self.columns.finish()

    def spare_rows(self, m: int) -> dict[str, np.ndarray]:
        """Writable views of the next ``m`` rows of every column (not yet part of the frame)."""
        return self.columns.spare(m)

    def extend(self, st: dict[str, Any]) -> None:
        """Append another builder's :meth:`state` (the events after this one's, in file order),
        whose ``st["n"]`` rows were already written into :meth:`spare_rows`."""
        off = self.n
        for kind, (chunks, nbytes) in st["decoders"].items():
            tally = self.decoders.setdefault(kind, [0, 0])
            tally[0] += chunks
            tally[1] += nbytes
        self.fallback_reasons.update(st["fallback_reasons"])
        self.notes.update(st["notes"])
        self.meta_rows.extend(st["meta_rows"])
        self.other_events += st["other_events"]
        self.counter_events += st["counter_events"]
        self.float_ts |= st["float_ts"]
        if st["n"]:
            rows = self.columns.spare(st["n"])
            # category, name and string ids are per builder: renumber in place
            cat_lut = np.array([self.cat_ids.setdefault(v, len(self.cat_ids)) for v in st["cat"]], np.int32)
            name_lut = np.array([self.name_ids.setdefault(v, len(self.name_ids)) for v in st["name"]], np.int32)
            rows["cat"][:] = np.take(cat_lut, rows["cat"])
            rows["name"][:] = np.take(name_lut, rows["name"])
            for col in ("pid", "tid"):
                if st["strings"]:
                    old = rows[col].copy()
                    for text, code in st["strings"].items():
                        rows[col][old == code] = self._string_id(text)
            self.columns.commit(st["n"])
        self.kernel += [{**k, "row": k["row"] + off} for k in st["kernel"]]
        self.copy += [{**c, "row": c["row"] + off} for c in st["copy"]]
        self.collective += [(t[0] + off, *t[1:]) for t in st["collective"]]
        self.waits += [(t[0] + off, *t[1:]) for t in st.get("waits", ())]
        if st["shape_texts"]:
            lut = np.array([self.shape_ids.setdefault(t, len(self.shape_ids)) for t in st["shape_texts"]], np.int32)
            self.shape_rows += [r + off for r in st["shape_rows"]]
            self.shape_codes += [lut[c] for c in st["shape_codes"]]
        self.n += st["n"]

    def build(self, path: str, rank: int) -> tuple[pd.DataFrame, SideTables]:
        """The events frame (rows in file order) and the side tables."""
        import pandas as pd

        from traceread import kernel_classes

        col = self.columns.finish()
        cat_codes, name_codes, instant = col.pop("cat"), col.pop("name"), col.pop("instant")
        cat_values = list(self.cat_ids)
        name_values = list(self.name_ids)

        lanes = list(schema.LANES)
        categories = list(schema.CATEGORIES)
        per_cat = [cats.lookup(v) for v in cat_values]
        lane = np.take(np.array([lanes.index(lc[0]) for lc in per_cat], np.int8), cat_codes) if per_cat \
            else np.zeros(0, np.int8)
        norm = np.take(np.array([categories.index(lc[1]) for lc in per_cat], np.int8), cat_codes) if per_cat \
            else np.zeros(0, np.int8)
        # ProfilerStep#N is a step annotation even where 2021 files write cat Operator/cpu_op
        step_names = [i for i, v in enumerate(name_values) if _STEP_RE.match(v)]
        if step_names:
            is_step = codes_in(name_codes, step_names, len(name_values)) & (lane == lanes.index(schema.LANE_CPU_THREAD))
            lane[is_step] = lanes.index(schema.LANE_CPU_ANNOTATION)
            norm[is_step] = categories.index(schema.CAT_USER_ANNOTATION)
        kernel_rows = norm == categories.index(schema.CAT_KERNEL)
        if kernel_rows.any():
            used = np.unique(name_codes[kernel_rows])
            comm = used[kernel_classes.is_communication(np.array([name_values[i] for i in used], object))]
            lane[kernel_rows & codes_in(name_codes, comm, len(name_values))] = lanes.index(schema.LANE_GPU_COMM)
        lane[instant] = lanes.index(schema.LANE_INSTANT)
        norm[instant] = categories.index(schema.CAT_INSTANT)
        gpu_lanes = [lanes.index(x) for x in cats.GPU_LANES]
        on_gpu = codes_in(lane, gpu_lanes, len(lanes))
        self.stream_sync_rows = _stream_sync_rows(col, on_gpu, cat_codes, cat_values, name_codes, name_values)
        for name, fallback in (("device", "pid"), ("stream", "tid")):  # in place: no column copies
            arr = col[name]
            unset = on_gpu & (arr == -1)
            arr[unset] = col[fallback][unset]
            arr[~on_gpu] = -1
        dev = col["device"]
        dev[(dev < np.iinfo(np.int32).min) | (dev > np.iinfo(np.int32).max)] = -1

        n = len(cat_codes)
        frame = {
            "trace": pd.Categorical.from_codes(np.zeros(n, np.int8), categories=pd.Index([shown_path(path)])),
            "rank": np.full(n, rank, np.int32),
            "lane": pd.Categorical.from_codes(lane, categories=pd.Index(lanes)),
            "device": col.pop("device").astype(np.int32),
            "stream": col.pop("stream"),
            "pid": col.pop("pid"),
            "tid": col.pop("tid"),
            "name": pd.Categorical.from_codes(name_codes, categories=_unique_index(name_values)),
            "category": pd.Categorical.from_codes(norm, categories=pd.Index(categories)),
            "raw_category": pd.Categorical.from_codes(cat_codes, categories=_unique_index(cat_values)),
            "start_ns": col.pop("start_ns"),
            "end_ns": col.pop("end_ns"),
            "correlation": col.pop("correlation"),
            "external_id": col.pop("external_id"),
        }
        events = pd.DataFrame(frame, copy=False)
        kernel_mask = None if not len(kernel_rows) else kernel_rows
        side = self._side_tables(name_values, name_codes, kernel_mask)
        return events, side

    def _side_tables(self, name_values: list[str], name_codes: np.ndarray,
                     kernel_rows: np.ndarray | None) -> SideTables:
        # Every table is read on first use (kernels, roofline, MFU from shapes, diff): `traceread
        # info` and a bare load need none of them, and building them all would lengthen the load's
        # serial tail (merging the chunks' parts, the tables' frames, one Python object per op row
        # for shapes). Which tables exist is known now, without reading.
        side: dict[str, pd.DataFrame | None] = {}
        pending: dict[str, Callable[[], pd.DataFrame]] = {}
        kernel = [p for p in self.kernel if len(p["row"])]
        if kernel and kernel_rows is not None:
            side["kernel_args"] = None
            pending["kernel_args"] = functools.partial(_kernel_args, kernel, kernel_rows)
        copy = [p for p in self.copy if len(p["row"])]
        if copy:
            side["copy_args"] = None
            pending["copy_args"] = functools.partial(_copy_args, copy, name_values, name_codes)
        if self.collective:
            side["collective_args"] = None
            pending["collective_args"] = functools.partial(_collective_args, self.collective)
        if self.waits:
            side["event_waits"] = None
            pending["event_waits"] = functools.partial(_event_waits, self.waits)
        if self.shape_rows:
            side["op_shapes"] = None
            pending["op_shapes"] = functools.partial(_op_shapes, list(self.shape_ids), list(self.shape_rows),
                                                     list(self.shape_codes))
        return SideTables(side, pending)


def _stream_sync_rows(col: dict[str, np.ndarray], on_gpu: np.ndarray, cat_codes: np.ndarray, cat_values: list[str],
                      name_codes: np.ndarray, name_values: list[str]) -> int:
    """Stream Sync rows on Kineto's separate sync row (``tid = stream + 1,000,000``): without
    ``args.stream`` their stream is the tid less the offset, as Kineto wrote it (not the tid, the
    other GPU rows' fallback). Returns how many Stream Sync rows sit on such a row (either way)."""
    syncs = [i for i, v in enumerate(cat_values) if cats.is_sync(v)]
    names = [i for i, v in enumerate(name_values) if v == cats.STREAM_SYNC_NAME]
    if not syncs or not names:
        return 0
    tid, stream = col["tid"], col["stream"]
    rows = (on_gpu & codes_in(cat_codes, syncs, len(cat_values)) & codes_in(name_codes, names, len(name_values))
            & (tid >= cats.SYNC_STREAM_TID_OFFSET))
    unset = rows & (stream == -1)
    stream[unset] = tid[unset] - cats.SYNC_STREAM_TID_OFFSET
    return int((rows & (stream == tid - cats.SYNC_STREAM_TID_OFFSET)).sum())


def _event_waits(rows: list[tuple]) -> pd.DataFrame:
    """The ``event_waits`` side table: each Stream Wait Event row's recorded stream and record call's correlation."""
    t = np.array(rows, dtype=np.int64).reshape(-1, 3)
    return _sorted_table({"row": t[:, 0], "wait_on_stream": t[:, 1], "record_correlation": t[:, 2]})


def _kernel_args(parts: list[dict[str, np.ndarray]], kernel_rows: np.ndarray) -> pd.DataFrame:
    """The ``kernel_args`` side table: launch configuration of the rows that are kernels."""
    k = _merge(parts)
    keep = kernel_rows[k["row"]]
    grid, block = k["grid"][keep], k["block"][keep]
    return _sorted_table({
        "row": k["row"][keep],
        "grid_x": grid[:, 0], "grid_y": grid[:, 1], "grid_z": grid[:, 2],
        "block_x": block[:, 0], "block_y": block[:, 1], "block_z": block[:, 2],
        "registers": k["registers"][keep], "shared_mem_bytes": k["shared_mem"][keep],
    })


def _copy_args(parts: list[dict[str, np.ndarray]], name_values: list[str], name_codes: np.ndarray) -> pd.DataFrame:
    """The ``copy_args`` side table: bytes and copy kinds (from the row's name) of memcpy/memset rows."""
    import pandas as pd
    c = _merge(parts)
    codes = name_codes[c["row"]]
    used = np.unique(codes)
    kinds = {i: _copy_kinds(name_values[i]) for i in used.tolist()}
    cols: dict[str, np.ndarray | pd.Categorical] = {"row": c["row"], "bytes": c["bytes"]}
    for j, key in enumerate(("copy_kind", "src_kind", "dst_kind")):
        values = [kinds[i][j] for i in used.tolist()]
        lut = np.zeros(len(name_values), np.int32)
        uniq = sorted(set(values))
        lut[used] = [uniq.index(v) for v in values]
        cols[key] = pd.Categorical.from_codes(lut[codes], categories=pd.Index(uniq))
    return _sorted_table(cols)


def _collective_args(collective: list[tuple]) -> pd.DataFrame:
    """The ``collective_args`` side table: one row per NCCL kernel or ``record_param_comms`` row."""
    import pandas as pd
    t = list(zip(*collective, strict=True))
    return _sorted_table({
        "row": np.array(t[0], np.int64),
        "collective": pd.Categorical([str(x) for x in t[1]]),
        "in_nelems": _ints(t[2]),
        "out_nelems": _ints(t[3]),
        "dtype": pd.Categorical([str(x) for x in t[4]]),
        "group_size": _ints(t[5]),
        "group_name": pd.Categorical([str(x) for x in t[6]]),
        "group_desc": pd.Categorical([str(x) for x in t[7]]),
        "seq": _ints(t[8]),
    })


def _ints(values: tuple) -> np.ndarray:
    """:func:`_int` of each value, parsed once per distinct value (sizes and group sizes repeat over
    thousands of calls, and parsing is Python work per text). Keyed by type
    too: ``True == 1`` but parses to -1."""
    keys = list(zip(map(type, values), values, strict=True))
    try:
        memo = {k: _int(k[1]) for k in set(keys)}
    except TypeError:  # an unhashable value (a list): parsed one by one
        return np.array([_int(x) for x in values], np.int64)
    return np.array([memo[k] for k in keys], np.int64)


class _Columns:
    """Column arrays filled chunk by chunk; capacity grows by half when a size hint was short.

    Filling preallocated arrays avoids holding every chunk's pieces and their concatenation at
    once (the pieces' memory would also stay in the allocator's heap).
    """

    def __init__(self, dtypes: dict[str, Any]) -> None:
        self.dtypes = dtypes
        self.arrays = {k: np.empty(0, d) for k, d in dtypes.items()}
        self.n = 0

    def reserve(self, rows: int) -> None:
        if rows > len(next(iter(self.arrays.values()))):
            for k, a in self.arrays.items():
                new = np.empty(rows, self.dtypes[k])
                new[: self.n] = a[: self.n]
                self.arrays[k] = new

    def append(self, parts: dict[str, np.ndarray]) -> None:
        rows = self.spare(len(parts["cat"]))
        for k, a in parts.items():
            rows[k][:] = a
        self.commit(len(parts["cat"]))

    def spare(self, m: int) -> dict[str, np.ndarray]:
        """Views of the ``m`` rows after the filled ones (grown when short); :meth:`commit` adds them."""
        if self.n + m > len(self.arrays["cat"]):
            self.reserve(max(self.n + m, int(len(self.arrays["cat"]) * 1.5) + 1024))
        return {k: a[self.n: self.n + m] for k, a in self.arrays.items()}

    def commit(self, m: int) -> None:
        self.n += m
        check_events(self.n)  # per chunk: a trace past --max-events stops here, not in the OOM killer

    def finish(self) -> dict[str, np.ndarray]:
        out = {k: a[: self.n] for k, a in self.arrays.items()}
        self.arrays = {}
        return out


def _unique_index(values: list[str]) -> pd.Index:
    import pandas as pd
    return pd.Index(values, dtype=object) if values else pd.Index([], dtype=object)


def _merge(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """The parts' columns joined (the callers pass at least one part with rows)."""
    parts = [p for p in parts if len(p["row"])]
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def _sorted_table(cols: dict[str, Any]) -> pd.DataFrame:
    import pandas as pd
    df = pd.DataFrame(cols)
    rows = df["row"].to_numpy()
    if len(rows) < 2 or bool((rows[1:] >= rows[:-1]).all()):  # chunks arrive in file order: usually sorted
        return df
    return df.iloc[np.argsort(rows, kind="stable")].reset_index(drop=True)


def _copy_kinds(name: str) -> tuple[str, str, str]:
    m = _MEMCPY_RE.match(name)
    if m:
        return m.group(1), m.group(2), m.group(3)
    m = _MEMSET_RE.match(name)
    if m:
        return "", "", m.group(1)
    return "", "", ""


def _int(v: Any) -> int:
    if isinstance(v, bool):
        return -1
    if isinstance(v, int):
        return v if INT64_MIN <= v <= INT64_MAX else -1
    if isinstance(v, str):
        n = int_text(v)
        return -1 if n is None else n
    return -1


def _op_shapes(texts: list[bytes], row_parts: list[np.ndarray], code_parts: list[np.ndarray]) -> pd.DataFrame:
    """The ``op_shapes`` side table: input dims and types per op row, from the distinct texts."""
    rows, codes = np.concatenate(row_parts), np.concatenate(code_parts)
    decoded = [_decode_shape(t) for t in texts]
    dims = np.empty(len(decoded), object)
    types = np.empty(len(decoded), object)
    for i, (d, ty) in enumerate(decoded):
        dims[i], types[i] = d, ty
    return _sorted_table({"row": rows, "input_dims": dims[codes], "input_types": types[codes]})


def _decode_shape(text: bytes) -> tuple[Any, Any]:
    dims, _, types = text.partition(b"\x00")
    out = []
    for part in (dims, types):
        try:
            out.append(orjson.loads(part) if part else None)
        except orjson.JSONDecodeError:
            out.append(None)
    return out[0], out[1]


def profiler_steps(events: pd.DataFrame, rank: int, warnings: list[Note | str] | None = None) -> pd.DataFrame:
    """ProfilerStep#N spans: rank, step, name, start_ns, end_ns (one row per step, by start).

    A step number past int64 is only a label: the steps are then numbered in time order, with a
    note in ``warnings``.
    """
    import pandas as pd
    names = events["name"].cat.categories
    step_codes = {i: int_text(m.group(1), 0) for i, v in enumerate(names) if (m := _STEP_RE.match(str(v)))}
    cols = {"rank": pd.Series(dtype="int32"), "step": pd.Series(dtype="int64"), "name": pd.Series(dtype=object),
            "start_ns": pd.Series(dtype="int64"), "end_ns": pd.Series(dtype="int64")}
    if not step_codes:
        return pd.DataFrame(cols)
    codes = events["name"].cat.codes.to_numpy()
    mask = codes_in(codes, list(step_codes), len(names)) & schema.lane_is(events, schema.LANE_CPU_ANNOTATION)
    sub = events.loc[mask, ["name", "start_ns", "end_ns"]]
    out = pd.DataFrame({
        "rank": np.full(len(sub), rank, np.int32),
        "step": np.array([step_codes[c] for c in codes[mask]], np.int64),
        "name": sub["name"].astype(str).to_numpy(dtype=object),
        "start_ns": sub["start_ns"].to_numpy(),
        "end_ns": sub["end_ns"].to_numpy(),
    }) if None not in step_codes.values() else _renumbered(sub, rank, warnings)
    return out.sort_values(["start_ns", "step"], kind="stable").reset_index(drop=True)


def _renumbered(sub: pd.DataFrame, rank: int, warnings: list[Note | str] | None) -> pd.DataFrame:
    """Steps numbered 0.. in time order: a ProfilerStep# number is past int64 (see profiler_steps)."""
    import pandas as pd
    if warnings is not None:
        warnings.append(Note.of(PROFILER_STEP_PAST_INT64))
    order = np.argsort(sub["start_ns"].to_numpy(), kind="stable")
    step = np.empty(len(sub), np.int64)
    step[order] = np.arange(len(sub))
    return pd.DataFrame({"rank": np.full(len(sub), rank, np.int32), "step": step,
                         "name": sub["name"].astype(str).to_numpy(dtype=object),
                         "start_ns": sub["start_ns"].to_numpy(), "end_ns": sub["end_ns"].to_numpy()})
