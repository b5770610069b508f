"""A tiny file of every format traceread detects, each built as its writer lays it out.

``SAMPLES[format](folder) -> path``: the key is the format name ``traceread.loaders.detect`` gives
it. Used by the detection and scan tests and as the fuzzers' per-format seeds (a new format is one
entry here). Each sample is minimal but well formed: what makes it that format (the tables, the
top-level keys, the planes, the packets) is what the writer writes.
"""

from __future__ import annotations

import gzip
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

from tracesynth.pftrace_writer import write_kineto_pftrace, write_rocprofv3_pftrace


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(num: int, value: int | bytes) -> bytes:
    if isinstance(value, int):
        return _varint(num << 3) + _varint(value)
    return _varint(num << 3 | 2) + _varint(len(value)) + value


def xspace_bytes(planes: list[tuple[int, str, list[tuple[str, list[tuple[int, int]]]]]]) -> bytes:
    """An XSpace: per plane (id, name, lines), per line (name, events (metadata id, offset_ps)),
    with the event metadata each event names (XPlane field 4, a map of id -> XEventMetadata)."""
    out = b""
    for pid, name, lines in planes:
        body = _field(1, pid) + _field(2, name.encode())
        ids: set[int] = set()
        for li, (lname, events) in enumerate(lines):
            line = _field(1, li + 1) + _field(2, lname.encode()) + _field(3, 1_000_000 * (li + 1))
            for mid, off in events:
                ids.add(mid)
                line += _field(4, _field(1, mid) + _field(2, off) + _field(3, 1_000_000))  # XEvent
            body += _field(3, line)
        for mid in sorted(ids):
            meta = _field(1, mid) + _field(2, f"fusion.{mid}".encode())
            body += _field(4, _field(1, mid) + _field(2, meta))  # map entry: key, value
        out += _field(1, body)
    return out


def write_xplane(d: Path) -> Path:
    p = d / "host0.xplane.pb"
    p.write_bytes(xspace_bytes([
        (1, "/host:metadata", []),
        (2, "/device:GPU:0", [("Stream #16(Kernel)", [(1, 0), (2, 2_000_000)])]),
        (3, "/host:CPU", [("python3", [(1, 0)])]),
    ]))
    return p


def _trace_viewer_json(planes: list[str]) -> bytes:
    events: list[dict] = [{"ph": "M", "pid": i + 1, "name": "process_name", "args": {"name": n}}
                          for i, n in enumerate(planes)]
    events += [{"ph": "X", "pid": 1, "tid": 16, "ts": 1.0 + 3 * i, "dur": 2.0, "name": f"fusion.{i % 7}",
                "args": {"correlation_id": str(7 + i)}} for i in range(2000)]
    return json.dumps({"displayTimeUnit": "ns", "metadata": {"highres-ticks": True},
                       "traceEvents": events}).encode()


def write_xplane_json(d: Path) -> Path:
    p = d / "host0.trace.json.gz"
    p.write_bytes(gzip.compress(_trace_viewer_json(["/device:GPU:0", "/host:CPU"])))
    return p


def write_rocprofv3_json(d: Path) -> Path:
    p = d / "908_results.json"
    doc = {"rocprofiler-sdk-tool": [{
        "metadata": {"pid": 908, "init_time": 100, "fini_time": 900},
        "agents": [{"id": {"handle": 1}, "type": 1, "logical_node_id": 0},
                   {"id": {"handle": 2}, "type": 2, "logical_node_id": 1, "name": "gfx950"}],
        "strings": {"kernel_names": ["Cijk_gemm"]},
        "kernel_symbols": [{"kernel_id": 1, "kernel_name": "Cijk_gemm"}],
        "buffer_records": {"kernel_dispatch": [{
            "correlation_id": {"internal": 1, "external": 0}, "start_timestamp": 200, "end_timestamp": 300,
            "thread_id": 908, "dispatch_info": {"agent_id": {"handle": 2}, "queue_id": {"handle": 1},
                                                "kernel_id": 1}}]},
    }]}
    p.write_text(json.dumps(doc))
    return p


def _sqlite(path: Path, ddl: list[str]) -> Path:
    conn = sqlite3.connect(path)
    for stmt in ddl:
        conn.execute(stmt)
    conn.commit()
    conn.close()
    return path


def write_rpd(d: Path) -> Path:
    return _sqlite(d / "trace.rpd", [
        "CREATE TABLE rocpd_string (id integer PRIMARY KEY, string varchar(4096))",
        "CREATE TABLE rocpd_op (id integer PRIMARY KEY, gpuId integer, queueId integer, sequenceId integer, "
        "completionSignal varchar(18), start integer, end integer, description_id integer, opType_id integer)",
        "CREATE TABLE rocpd_api (id integer PRIMARY KEY, pid integer, tid integer, start integer, end integer, "
        "apiName_id integer, args_id integer)",
        "CREATE TABLE rocpd_api_ops (id integer PRIMARY KEY, api_id integer, op_id integer)",
        "INSERT INTO rocpd_string VALUES (1, 'hipLaunchKernel'), (2, 'Cijk_gemm'), (3, 'KernelExecution'), (4, '')",
        "INSERT INTO rocpd_api VALUES (1, 10, 11, 1000, 2000, 1, 4)",
        "INSERT INTO rocpd_op VALUES (1, 0, 0, 0, '', 3000, 9000, 2, 3)",
        "INSERT INTO rocpd_api_ops VALUES (1, 1, 1)",
    ])


def write_rocpd(d: Path) -> Path:
    """A rocpd database of the published schema (tracesynth.rocm builds it from its excerpt)."""
    from tracesynth import rocm

    path = d / "908_results.db"
    rocm.write_rocpd(path)
    return path


def write_rocprof_v1(d: Path) -> Path:
    return _sqlite(d / "results.db", [
        "CREATE TABLE KERN (Index_ integer, KernelName text, gpu_id integer, queue_id integer, BeginNs integer, "
        "EndNs integer)",
        "INSERT INTO KERN VALUES (0, 'Cijk_gemm', 0, 0, 100, 200)",
    ])


def write_rpd_json(d: Path) -> Path:
    p = d / "trace_rpd.json"
    lines = ["[ {}",
             ',{"name": "process_name", "ph": "M", "pid":"0","args":{"name":"GPU0"}}',
             ',{"name":"thread_name","ph":"M","pid":"10","tid":"11","args":{"name":"Hip 11"}}',
             ',{"pid":"0","tid":"0","name":"Cijk_gemm","ts":"3","dur":"6","ph":"X","args":{"desc":"KernelExecution"}}',
             ',{"pid":"10","tid":"11","name":"hipLaunchKernel","ts":"1","dur":"1","ph":"X","args":{"desc":""}}',
             ',{"pid":"10","tid":"11","cat":"api_op","name":"api_op","ts":"1","id":"1","ph":"s"}',
             "]"]
    p.write_text("\n".join(lines))
    return p


def write_perfetto(d: Path) -> Path:
    return write_rocprofv3_pftrace(d / "rocprofv3.pftrace", iterations=2)


def write_kineto_perfetto(d: Path) -> Path:
    return write_kineto_pftrace(d / "kineto.pftrace", steps=2)


def write_traceread_perfetto(d: Path) -> Path:
    """The first packets of ``traceread analyze --perfetto`` output: a rank process and its tracks."""
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TracePacket
    from perfetto.trace_builder.proto_builder import TraceProtoBuilder

    b = TraceProtoBuilder()
    for i, name in enumerate(["rank 0", "GPU 0 steps", "traceread diagnosis GPU 0"]):
        p = b.add_packet()
        p.trusted_packet_sequence_id = 1
        if i == 0:
            p.sequence_flags = TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
            p.track_descriptor.uuid = 10
            p.track_descriptor.process.pid = 1
            p.track_descriptor.process.process_name = name
        else:
            p.track_descriptor.uuid = 10 + i
            p.track_descriptor.parent_uuid = 10
            p.track_descriptor.name = name
    path = d / "diagnosis.pftrace"
    path.write_bytes(b.serialize())
    return path


def write_chrome_json(d: Path) -> Path:
    """A browser's trace-event JSON (chrome://tracing): Chrome trace events, no Kineto category."""
    p = d / "browser.json"
    p.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "devtools.timeline", "name": "RunTask", "pid": 1, "tid": 2, "ts": 10, "dur": 5},
        {"ph": "X", "cat": "blink,gpu", "name": "Paint", "pid": 1, "tid": 2, "ts": 20, "dur": 5}]}))
    return p


def write_kineto(d: Path) -> Path:
    p = d / "tiny.pt.trace.json"
    p.write_text(json.dumps({"schemaVersion": 1, "traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 5,
         "args": {"device": 0, "stream": 7, "correlation": 1}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 9, "tid": 9, "ts": 5, "dur": 2,
         "args": {"correlation": 1}}]}))
    return p


SAMPLES: dict[str, Callable[[Path], Path]] = {
    "kineto": write_kineto,
    "xplane": write_xplane,
    "xplane-json": write_xplane_json,
    "rocprofv3-json": write_rocprofv3_json,
    "rocpd": write_rocpd,
    "rpd": write_rpd,
    "rocprof-v1": write_rocprof_v1,
    "rpd-json": write_rpd_json,
    "perfetto": write_perfetto,
    "traceread-perfetto": write_traceread_perfetto,
    "chrome-json": write_chrome_json,
}
