"""What a file is, from its content: one detector for every format traceread knows by name.

:func:`detect` reads at most :data:`PEEK_BYTES` of a file (of its decompressed content when it is
gzip) and, for an SQLite database, the names in its schema (opened read-only and immutable: nothing
is created beside it). A file's name is only consulted for a ``.nsys-rep``/``.qdrep`` whose content
is of no format traceread knows (an Nsight Systems report is a container read through ``nsys``).

Every outcome is a format name (the keys of :data:`FORMATS`), the unknown ones included; the loader
dispatch (:mod:`traceread.loaders`) decides which it reads and which it refuses, naming them.
"""

from __future__ import annotations

import os
import re
import sqlite3
import zlib
from dataclasses import dataclass

SQLITE_MAGIC = b"SQLite format 3\x00"
GZIP_MAGIC = b"\x1f\x8b"
PEEK_BYTES = 1 << 16  # enough for a JSON's header and first events, a protobuf's first records

# --- format names -------------------------------------------------------------------------------
KINETO = "kineto"  # PyTorch profiler (Kineto) Chrome-trace JSON
NSYS = "nsys"  # Nsight Systems SQLite export
NSYS_REP = "nsys-rep"  # Nsight Systems report (exported with nsys first)
XPLANE = "xplane"  # XSpace protobuf (.xplane.pb) of JAX / TensorFlow
XPLANE_JSON = "xplane-json"  # trace-viewer JSON derived from an xplane (JAX *.trace.json.gz)
ROCPROFV3_JSON = "rocprofv3-json"  # rocprofiler-sdk (rocprofv3 --output-format json)
ROCPD = "rocpd"  # rocprofiler-sdk SQLite (ROCm 7 default; UUID-suffixed tables behind rocpd_* views)
RPD = "rpd"  # rocmProfileData SQLite (rocpd_op, rocpd_api)
ROCPROF_V1 = "rocprof-v1"  # legacy rocprof v1 database (KERN table): refused
RPD_JSON = "rpd-json"  # Chrome JSON written by rocmProfileData's rpd2tracing
PERFETTO = "perfetto"  # Perfetto protobuf trace (.pftrace: rocprofv3, Kineto's perfetto output)
TRACEREAD_PERFETTO = "traceread-perfetto"  # traceread's own ``analyze --perfetto`` output
CHROME_JSON = "chrome-json"  # a Chrome trace-event JSON of another tool (not Kineto)
UNKNOWN_SQLITE = "sqlite"
DIAGNOSIS_TRACK = "traceread diagnosis"  # the track traceread.render.perfetto writes first (its mark)
UNKNOWN_JSON = "json"
UNKNOWN_BINARY = "binary"

# format -> what it is, in words (used in refusals: "<words>: no reader in this build")
FORMATS: dict[str, str] = {
    KINETO: "a PyTorch profiler (Kineto) JSON",
    NSYS: "an Nsight Systems SQLite export",
    NSYS_REP: "an Nsight Systems report",
    XPLANE: "an XSpace protobuf (.xplane.pb of JAX or TensorFlow)",
    XPLANE_JSON: "a trace-viewer JSON derived from an xplane (JAX/TensorFlow profiler)",
    ROCPROFV3_JSON: "a rocprofv3 JSON (rocprofiler-sdk)",
    ROCPD: "a rocpd SQLite database (rocprofiler-sdk, ROCm 7)",
    RPD: "an RPD SQLite database (rocmProfileData)",
    ROCPROF_V1: "a legacy rocprof v1 database (KERN table)",
    RPD_JSON: "a Chrome JSON written by rocmProfileData's rpd2tracing",
    PERFETTO: "a Perfetto protobuf trace",
    TRACEREAD_PERFETTO: "traceread's own Perfetto output (a diagnosis track trace, not a capture)",
    CHROME_JSON: "a Chrome trace-event JSON written by another tool (not PyTorch's profiler)",
    UNKNOWN_SQLITE: "an SQLite database of no known trace format",
    UNKNOWN_JSON: "a JSON file of no known trace format",
    UNKNOWN_BINARY: "a binary file of no known trace format",
}


@dataclass(frozen=True)
class Detected:
    format: str  # a key of FORMATS
    why: str = ""  # what decided it, for messages


# Categories Kineto writes, old and new generations (lower-cased): a Chrome JSON holding none of them
# and none of Kineto's top-level keys is another tool's.
KINETO_CATS = frozenset({
    "kernel", "cpu_op", "cuda_runtime", "cuda_driver", "gpu_memcpy", "gpu_memset", "python_function",
    "user_annotation", "gpu_user_annotation", "ac2g", "trace", "overhead", "cpu_instant_event", "runtime",
    "operator", "memcpy", "memset", "fwdbwd", "cuda_sync", "cuda_profiler_range", "mtia_runtime",
    "mtia_ccp_events", "privateuse1_runtime", "privateuse1_driver", "gpu_annotation", "python function",
    "cpu op", "stream sync", "collective", "xpu_runtime", "xpu_driver",
})
_KINETO_KEYS = re.compile(rb'"(schemaVersion|deviceProperties|distributedInfo|trace_id|traceName|'
                          rb'PT_PROFILER_JOB_NAME|record_shapes|with_stack|cupti_version|roctracer_version)"\s*:')
_CAT = re.compile(rb'"cat"\s*:\s*"([^"\\]{0,64})"')
_XPLANE_PROCESS = re.compile(rb'"name"\s*:\s*"(/device:[A-Z]+:\d+|/host:CPU|/host:metadata|Task Environment)')


def detect(path: str) -> Detected:
    """The format of the file at ``path`` by its content; OSError when it cannot be read."""
    with open(path, "rb") as fh:
        head = fh.read(PEEK_BYTES)
    if not head:
        return Detected(UNKNOWN_BINARY, "empty file")
    found = _by_head(path, head)
    if found.format == UNKNOWN_BINARY and path.endswith((".nsys-rep", ".qdrep")):
        # an Nsight Systems report (a container of its own): read through `nsys export`
        return Detected(NSYS_REP, "an Nsight Systems report by its name, of no other format by its content")
    return found


UTF8_BOM = b"\xef\xbb\xbf"
# rpd2tracing's JSON: an empty first event (Kineto never writes one) and its own names, flows or args. Kept
# here, not in the reader's package: detection must not import the readers (nor pandas, which they import).
_RPD_START = re.compile(rb'^\s*(?:\{\s*"traceEvents"\s*:\s*)?\[\s*\{\s*\}\s*,')
_RPD_SIGNS = (b'"args":{"name":"GPU', b'"args":{"name":"Hip ', b'"cat":"api_op"', b'"args":{"desc":"')


def looks_like_rpd_trace_json(head: bytes) -> bool:
    """Whether the first uncompressed bytes of a JSON file are rpd2tracing's: an empty first event
    (Kineto never writes one) and its own process/thread names, flows or args."""
    return bool(_RPD_START.match(head)) and any(s in head for s in _RPD_SIGNS)


def _by_head(path: str, head: bytes) -> Detected:
    if head.startswith(SQLITE_MAGIC):
        return detect_sqlite(path)
    if head.startswith(GZIP_MAGIC):
        body = _gunzip_head(head)
        if body is None:  # not inflatable: a damaged gzip, which the Kineto reader reports as before
            return Detected(KINETO, "gzip")
        text = body.removeprefix(UTF8_BOM)
        if text.lstrip()[:1] in (b"{", b"["):
            return detect_json(text, whole=len(head) < PEEK_BYTES and len(body) < PEEK_BYTES)
        found = detect_protobuf(body)
        return found if found.format != UNKNOWN_BINARY else Detected(KINETO, "gzip")
    text = head.removeprefix(UTF8_BOM)  # a UTF-8 byte order mark may lead a JSON file
    if text.lstrip()[:1] in (b"{", b"["):
        return detect_json(text, whole=len(head) < PEEK_BYTES)
    return detect_protobuf(head)


def _gunzip_head(head: bytes) -> bytes | None:
    """The first KBs of a gzip's content (from its first KBs), None when they do not inflate."""
    try:
        return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, PEEK_BYTES)
    except zlib.error:
        return None


def detect_json(text: bytes, whole: bool = False) -> Detected:
    """A JSON file's format from its first bytes (a Chrome trace of Kineto or of another tool); ``whole``:
    ``text`` is the whole file, so an object without a ``traceEvents`` key anywhere is no trace at all (a
    run's ``config.json`` or metrics beside its traces)."""
    if re.match(rb'\s*\{\s*"rocprofiler-sdk-tool"\s*:', text):
        return Detected(ROCPROFV3_JSON, "a rocprofiler-sdk-tool object")
    if _XPLANE_PROCESS.search(text) and b"process_name" in text:
        return Detected(XPLANE_JSON, "processes named after xplane planes")
    if looks_like_rpd_trace_json(text):
        return Detected(RPD_JSON, "rpd2tracing's process and thread names")
    if _KINETO_KEYS.search(text):
        return Detected(KINETO, "Kineto's top-level keys")
    if whole and text.lstrip()[:1] == b"{" and b'"traceEvents"' not in text:
        return Detected(UNKNOWN_JSON, "a whole JSON object without traceEvents")
    cats = {c.lower() for c in _CAT.findall(text)}
    if cats and not any(c.decode("utf-8", "replace") in KINETO_CATS for c in cats):
        return Detected(CHROME_JSON, "no Kineto category among " + ", ".join(sorted(
            c.decode("utf-8", "replace") for c in cats)[:4]))
    # Anything else the Kineto reader judges (a bare list of events, a truncated or broken file):
    # it says what is wrong with it in its own words.
    return Detected(KINETO, "JSON")


def detect_sqlite(path: str) -> Detected:
    """An SQLite database's format by the names in its schema."""
    from traceread.loaders.nsys.read import read_only_uri

    try:
        conn = sqlite3.connect(read_only_uri(path, immutable=True), uri=True)
        conn.text_factory = bytes  # a damaged file's names may not be UTF-8
        try:
            rows = conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')").fetchall()
        finally:
            conn.close()
    except (sqlite3.Error, UnicodeDecodeError):
        # Unreadable (cut, corrupt): the schema's text, where it survives, still names the tables. Else
        # the Nsight Systems reader reports a damaged SQLite file as it always has.
        names = _schema_text_names(path)
        found = _sqlite_format(names)
        if found.format in (UNKNOWN_SQLITE, NSYS):
            return Detected(NSYS, "an unreadable SQLite file")
        return Detected(found.format, "a damaged SQLite file whose schema names " + found.why)
    return _sqlite_format({r[0].decode("utf-8", "replace") if isinstance(r[0], bytes) else str(r[0]) for r in rows})


_CREATE = re.compile(rb'CREATE\s+(?:TABLE|VIEW)\s+(?:IF\s+NOT\s+EXISTS\s+)?["`\[]?(\w+)')


def _schema_text_names(path: str) -> set[str]:
    """Table and view names from the CREATE statements in a damaged database's first pages."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(1 << 20)
    except OSError:
        return set()
    return {m.decode("ascii", "replace") for m in _CREATE.findall(head)}


def _sqlite_format(names: set[str]) -> Detected:
    from traceread.loaders.nsys.read import NSYS_MARKERS

    if "StringIds" in names and any(t in names for t in NSYS_MARKERS):
        return Detected(NSYS, "Nsight Systems tables")
    if "rocpd_op" in names and "rocpd_api" in names:
        return Detected(RPD, "rocpd_op and rocpd_api tables")
    if any(n.startswith(("rocpd_info_agent", "rocpd_kernel_dispatch", "rocpd_info_node")) for n in names):
        return Detected(ROCPD, "rocpd_info_* tables")
    if "KERN" in names:
        return Detected(ROCPROF_V1, "a KERN table")
    return Detected(UNKNOWN_SQLITE, "no known tables")


# Fields one of which a Perfetto trace's first packet holds: timestamp 8, trusted_packet_sequence_id
# 10, track_event 11, clock_snapshot 6, trace_config 33, synchronization_marker 36, track_descriptor 60.
_PERFETTO_FIRST = frozenset({6, 8, 10, 11, 33, 36, 60})


def _is_trace_packet(fields: list[tuple[int, int, int | bytes]]) -> bool:
    """Whether every field is one of TracePacket's, with its wire type (checked against the classes
    the ``perfetto`` package ships), and one of them is a field a first packet holds."""
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TracePacket

    by_number = TracePacket.DESCRIPTOR.fields_by_number
    for num, wire, _ in fields:
        f = by_number.get(num)
        if f is None or _wire_type(f.type) != wire:
            return False
    return any(num in _PERFETTO_FIRST for num, _, _ in fields)


def _wire_type(field_type: int) -> int:
    if field_type in (9, 11, 12):  # string, message, bytes
        return 2
    if field_type in (1, 6, 16):  # double, fixed64, sfixed64
        return 1
    if field_type in (2, 7, 15):  # float, fixed32, sfixed32
        return 5
    return 0


def detect_protobuf(head: bytes) -> Detected:
    """A Perfetto trace or an XSpace from a protobuf's first bytes; UNKNOWN_BINARY otherwise."""
    first = _first_message(head)
    if first is None:
        return Detected(UNKNOWN_BINARY, "not JSON, SQLite or a known protobuf")
    fields = _fields(first)
    if not fields:
        return Detected(UNKNOWN_BINARY, "not JSON, SQLite or a known protobuf")
    # XPlane: id (1, varint) then name (2, bytes) naming a device, the host or the metadata plane
    for num, wire, value in fields[:2]:
        if num == 2 and wire == 2 and isinstance(value, bytes) and (
                value.startswith((b"/device:", b"/host:", b"/custom:")) or value == b"Task Environment"):
            return Detected(XPLANE, "an XSpace's plane " + value.decode("utf-8", "replace"))
    if _is_trace_packet(fields):
        if DIAGNOSIS_TRACK.encode() in head:
            return Detected(TRACEREAD_PERFETTO, "a 'traceread diagnosis' track")
        return Detected(PERFETTO, "trace packets")
    return Detected(UNKNOWN_BINARY, "not JSON, SQLite or a known protobuf")


def read_varint(buf: bytes, i: int) -> tuple[int, int]:
    """A protobuf varint at ``buf[i]``: (value, next index); IndexError on a cut or overlong varint."""
    out = shift = 0
    while True:
        b = buf[i]
        i += 1
        out |= (b & 0x7F) << shift
        if not b & 0x80:
            return out, i
        shift += 7
        if shift > 63:
            raise IndexError("varint too long")


def _first_message(head: bytes) -> bytes | None:
    """The (possibly cut) bytes of the first field-1 message of a protobuf (a Trace's first packet, an
    XSpace's first plane); None when the file does not start that way."""
    if len(head) < 2 or head[0] != 0x0A:
        return None
    try:
        size, i = read_varint(head, 1)
    except (IndexError, ValueError):
        return None
    if size == 0 or size > 1 << 34:
        return None
    return head[i:i + size]


def _fields(msg: bytes, limit: int = 12) -> list[tuple[int, int, int | bytes]]:
    """The first ``limit`` (field number, wire type, value) of ``msg``, up to the first that is not
    protobuf (damage past the message's first fields leaves those) or a length-delimited field cut by
    the end of the peek; [] when the first is not."""
    out: list[tuple[int, int, int | bytes]] = []
    i = 0
    try:
        while i < len(msg) and len(out) < limit:
            key, i = read_varint(msg, i)
            num, wire = key >> 3, key & 7
            if num == 0:
                break
            if wire == 0:
                v, i = read_varint(msg, i)
                out.append((num, wire, v))
            elif wire == 2:
                n, i = read_varint(msg, i)
                out.append((num, wire, msg[i:i + n]))
                if i + n > len(msg):
                    break
                i += n
            elif wire == 1:
                i += 8
                out.append((num, wire, 0))
            elif wire == 5:
                i += 4
                out.append((num, wire, 0))
            else:
                break
    except (IndexError, ValueError):
        pass
    return out


def describe(fmt: str) -> str:
    return FORMATS.get(fmt, fmt)


def xplane_planes(path: str, limit: int = 4096) -> list[str]:
    """The plane names of an XSpace file (``/device:GPU:0``, ``/host:CPU``...), reading each plane's
    first bytes only and seeking past the rest; [] when the file is not one."""
    out: list[str] = []
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            pos = 0
            while pos < size and len(out) < limit:
                fh.seek(pos)
                head = fh.read(64)
                if not head or head[0] != 0x0A:
                    break
                n, i = read_varint(head, 1)
                name = next((v for num, wire, v in _fields(head[i:i + n], 3) if num == 2 and wire == 2), None)
                if isinstance(name, bytes):
                    out.append(name.decode("utf-8", "replace"))
                pos += i + n
    except (OSError, IndexError, ValueError):
        return out
    return out


_PROCESS_NAME = re.compile(rb'"name"\s*:\s*"process_name"[^{}]*?"args"\s*:\s*\{\s*"name"\s*:\s*"([^"\\]{1,200})"'
                           rb'|"args"\s*:\s*\{\s*"name"\s*:\s*"([^"\\]{1,200})"\s*\}[^{}]*?"name"\s*:\s*"process_name"')


def json_processes(path: str, peek: int = 1 << 20) -> set[str]:
    """The process names in the first MB of a (possibly gzip) Chrome JSON: a trace-viewer JSON's
    planes, which its metadata events name before any other event."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(peek)
    except OSError:
        return set()
    if raw.startswith(GZIP_MAGIC):
        try:
            raw = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(raw, peek)
        except zlib.error:
            return set()
    return {(a or b).decode("utf-8", "replace") for a, b in _PROCESS_NAME.findall(raw)}


def derived_from_xplane(json_path: str, xplanes: list[str], planes: dict[str, set[str]] | None = None) -> bool:
    """Whether the trace-viewer JSON ``json_path`` is the same run as one of ``xplanes`` (the .xplane.pb
    files of its folder): its processes are among that xplane's planes, preferring an xplane of the
    same host prefix (``host0.trace.json.gz`` beside ``host0.xplane.pb``). ``planes`` caches plane sets."""
    procs = json_processes(json_path)
    if not procs:
        return False
    planes = {} if planes is None else planes
    host = os.path.basename(json_path).split(".")[0]
    same_host = [x for x in xplanes if os.path.basename(x).split(".")[0] == host]
    for x in same_host or xplanes:
        if x not in planes:
            planes[x] = set(xplane_planes(x))
        if procs <= planes[x]:
            return True
    return False
