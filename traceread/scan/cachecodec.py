"""The scan cache's on-disk format: data that cannot run code when read, checked as it is read.

An output folder is not a trusted place (a colleague's shared report folder, a CI artifact), so
the cache never holds pickles: every part is MessagePack (``msgspec``) of plain values, decoded
into the types it must have (rank identities and summaries into their dataclasses, numpy arrays
only of plain numeric dtypes or text), and the table rows are Arrow IPC streams read back against
the tables' own schemas. Anything that does not decode, or decodes to the wrong shape, raises
:class:`Damaged`: the cache treats it as a miss and the file is analysed again.
"""

from __future__ import annotations

import re
from typing import Any, TypedDict

import msgspec
import numpy as np

# a trace id or job file stem as traceread makes them (work.trace_id, jobs.job_file): no path separators,
# no leading dot, so a planted entry cannot name a file outside the output folder's own subfolders
SAFE_STEM = re.compile(r"[A-Za-z0-9_~-][A-Za-z0-9._~-]{0,254}")
_NUMERIC = frozenset("biuf")


class Damaged(Exception):
    """A cache part that is missing, cut, planted or of another layout: a miss, never an error."""


def _enc(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind == "U":
            return {"text": obj.tolist()}
        if obj.dtype.kind in _NUMERIC and obj.ndim == 1:
            return {"dtype": obj.dtype.str, "data": obj.tobytes()}
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(f"the scan cache does not store {type(obj).__name__}")


def _dec(kind: type, obj: Any) -> Any:
    if kind is np.ndarray and isinstance(obj, dict):
        if isinstance(obj.get("text"), list) and all(isinstance(s, str) for s in obj["text"]):
            return np.array(obj["text"], dtype=str)
        dtype, data = obj.get("dtype"), obj.get("data")
        if isinstance(dtype, str) and isinstance(data, bytes):
            try:
                dt = np.dtype(dtype)
            except TypeError:
                raise ValueError(f"dtype {dtype!r}") from None
            if dt.kind in _NUMERIC and dt.itemsize <= 8 and len(data) % dt.itemsize == 0:
                return np.frombuffer(data, dtype=dt).copy()  # writable, as the summary's own arrays are
    raise ValueError(f"not a stored {kind.__name__}")


def encode(value: Any) -> bytes:
    return msgspec.msgpack.encode(value, enc_hook=_enc)


def decode(data: bytes, kind: Any = Any) -> Any:
    try:
        return msgspec.msgpack.decode(data, type=kind, dec_hook=_dec)
    except (msgspec.DecodeError, ValueError, TypeError, OverflowError, RecursionError) as exc:
        raise Damaged(str(exc)) from None


# -- the parts ----------------------------------------------------------------------------------------

class _Whatif(TypedDict):
    """The row's what-if figures (scan.whatifcols.trace_whatif)."""

    measured_step_ns: int
    steady_steps: int
    replay_error: float
    dependency_error: float | None
    saving_ns: dict[str, int | None]
    saving_share: dict[str, float | None]
    recoverable_ns: dict[str, int]
    best_fix: str | None
    best_recoverable_ns: int


class _Row(TypedDict, total=False):
    """The index row of a trace (scan.rows.trace_row plus what the worker adds): the keys readers use."""

    path: str
    format: str
    ranks: list[int]
    world_size: int | None
    gpus: list[str]
    devices: int
    steps: int
    median_step_ns: int | None
    gpu_ns: int
    idle_share: float | None
    dominant_cause: str
    dominant_cost_share: float
    mfu: float | None
    lost_ns: dict[str, int]
    time_base: str
    epoch_offset_ns: int | None
    start_ns: int | None
    end_ns: int | None
    truncated: bool
    units: list[dict[str, int]]
    rank_of_frame: dict[str, int | None]
    whatif: _Whatif | None


_ROW_REQUIRED = ("path", "format", "ranks", "gpus", "devices", "steps", "gpu_ns", "dominant_cause",
                 "dominant_cost_share", "lost_ns", "time_base", "units")


def decode_row(data: bytes) -> dict[str, Any]:
    """An index row, checked: the keys the index, jobs and tables read, of the types they read."""
    row = decode(data, dict[str, Any])
    try:
        msgspec.convert(row, _Row)
    except msgspec.ValidationError as exc:
        raise Damaged(str(exc)) from None
    if any(k not in row for k in _ROW_REQUIRED) or \
            any(k not in u for u in row["units"] for k in ("rank", "device", "step_ns")):
        raise Damaged("an index row without its keys")
    return row


def decode_ranks(data: bytes) -> tuple[list[Any], list[Any]]:
    """Rank identities and summaries, decoded into their dataclasses; a summary's tables of equal-length columns."""
    from traceread.ranks.identity import RankIdentity
    from traceread.ranks.summary import RankSummary

    identities, summaries = decode(data, tuple[list[RankIdentity], list[RankSummary]])
    for s in summaries:
        for table in (s.collectives, s.steps, s.gaps):
            if len({len(v) for v in table.values()}) > 1:
                raise Damaged("a rank summary's columns differ in length")
    return identities, summaries


def encode_tables(tables: dict[str, Any]) -> bytes:
    """The gap and step rows (``tables.report_tables``: Arrow IPC streams) as one part."""
    return encode({name: memoryview(buf) for name, buf in tables.items()})


def decode_tables(data: bytes) -> dict[str, bytes]:
    """The gap and step streams, each read back whole against its table's schema and validated."""
    import pyarrow as pa

    from traceread.scan.tables import _schemas

    streams = decode(data, dict[str, bytes])
    schemas = _schemas()
    if set(streams) != {"gaps", "steps"}:
        raise Damaged("not the gap and step rows")
    try:
        for name, stream in streams.items():
            table = pa.ipc.open_stream(stream).read_all()
            if not table.schema.equals(schemas[name]):
                raise Damaged(f"{name} rows of another schema")
            table.validate(full=True)
    except (pa.ArrowException, ValueError, OSError) as exc:
        raise Damaged(str(exc)) from None
    return streams


def decode_jobs(data: bytes, fmt: int) -> dict[str, tuple[str, list[dict[str, Any]], dict[str, str]]]:
    """Each directory's job key, job documents and trace -> job map; a document that the index could
    not read (``jobs.job_row``) or whose file name is not one traceread makes is damage."""
    from traceread.scan.jobs import job_row

    doc = decode(data, dict[str, Any])
    if doc.get("format") != fmt:
        raise Damaged("another cache format")
    try:
        dirs = msgspec.convert(doc.get("dirs"), dict[str, tuple[str, list[dict[str, Any]], dict[str, str]]])
    except msgspec.ValidationError as exc:
        raise Damaged(str(exc)) from None
    for _key, docs, _job_of in dirs.values():
        for j in docs:
            try:
                job_row(j)
                ok = isinstance(j["file"], str) and SAFE_STEM.fullmatch(j["file"]) is not None and \
                    isinstance(j["job"], str) and all(isinstance(t["trace_id"], str) for t in j["traces"])
            except (KeyError, TypeError, ValueError, AttributeError, ZeroDivisionError):
                ok = False
            if not ok:
                raise Damaged("a job document traceread did not write")
    return dirs
