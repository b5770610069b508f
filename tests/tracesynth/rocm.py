# ruff: noqa: UP031 - rpd2tracing below keeps the tool's own %-format output strings, unchanged
"""Synthetic ROCm profiler outputs with known contents, written as the ROCm tools write them.

* :func:`rocprofv3_json`: a rocprofiler-sdk ``--output-format json`` document (the layout of the
  tool's ``rocprofiler-sdk-tool`` records: agents, kernel symbols, strings, buffer records);
* :func:`write_rpd`: a rocmProfileData database with the RPD tables' own DDL (as rpd_tracer creates them);
* :func:`write_rocpd`: a rocprofv3 rocpd database built from the published schema (an excerpt of
  rocprofiler-sdk's ``rocpd_tables.sql`` and ``rocpd_views.sql``, ``fixtures/rocm``) with rows as
  rocprofiler-sdk's ``generateRocpd.cpp`` inserts them;
* :func:`rpd2tracing`: rocmProfileData's ``tools/rpd2tracing.py`` transformation of an RPD into its
  Chrome-trace JSON (the same queries and the same output strings, ``--format array``).

Every generator returns (or its docstring states) what it holds, so tests compare a load against it.
"""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
ROCPD_SCHEMA = REPO / "fixtures" / "rocm" / "rocpd_schema_3.0.1_excerpt.sql"

# rocprofiler_buffer_tracing_kind_t values (their order in strings.buffer_records)
KINDS = ["NONE", "HSA_CORE_API", "HSA_AMD_EXT_API", "HSA_IMAGE_EXT_API", "HSA_FINALIZE_EXT_API", "HIP_RUNTIME_API",
         "HIP_COMPILER_API", "MARKER_CORE_API", "MARKER_CONTROL_API", "MARKER_NAME_API", "MEMORY_COPY",
         "KERNEL_DISPATCH", "SCRATCH_MEMORY", "CORRELATION_ID_RETIREMENT", "RCCL_API"]
HIP_OPS = ["hipApiName", "hipLaunchKernel", "hipMemcpyAsync", "hipStreamSynchronize"]
MARKER_OPS = ["roctxMarkA", "roctxRangePushA", "roctxRangePop", "roctxRangeStartA"]
COPY_OPS = ["MEMORY_COPY_NONE", "MEMORY_COPY_HOST_TO_HOST", "MEMORY_COPY_HOST_TO_DEVICE", "MEMORY_COPY_DEVICE_TO_HOST",
            "MEMORY_COPY_DEVICE_TO_DEVICE"]
KERNELS = {1: "Cijk_Ailk_Bljk_BBS_BH_MT256x256x64", 2: "void at::native::vectorized_elementwise_kernel<4>()",
           3: "ncclDevKernel_Generic_1(ncclDevKernelArgsStorage<4096ul>)"}
GPU_NAME = "AMD Instinct MI300X"


def rocprofv3_json(steps: int = 3, pid: int = 4242, tid: int = 4243, t0: int = 10_000_000_000) -> dict:
    """``steps`` steps, each: a ``ProfilerStep#i`` roctx range holding three hipLaunchKernel calls (GEMM and
    elementwise on stream 1, RCCL on stream 2) and one hipMemcpyAsync (a host-to-device copy); one more
    dispatch on GPU 1 with no launch call. Agents: one CPU, two GPUs (MI300X, 304 CUs, 192 GiB)."""
    strings = [{"kind": k, "operations": []} for k in KINDS]
    strings[5]["operations"] = HIP_OPS
    strings[7]["operations"] = MARKER_OPS
    strings[10]["operations"] = COPY_OPS
    strings[11]["operations"] = ["KERNEL_DISPATCH_NONE", "KERNEL_DISPATCH_ENQUEUE", "KERNEL_DISPATCH_COMPLETE"]
    agents = [{"size": 312, "id": {"handle": 100}, "type": 1, "cu_count": 64, "name": "AMD EPYC", "product_name":
               "AMD EPYC", "logical_node_type_id": 0, "mem_banks": []}]
    for i in range(2):
        agents.append({"size": 312, "id": {"handle": 101 + i}, "type": 2, "cu_count": 304, "name": "gfx942",
                       "product_name": GPU_NAME, "logical_node_type_id": i, "node_id": 1 + i,
                       "mem_banks": [{"heap_type": 1, "size_in_bytes": 192 << 30}]})
    symbols = [{"kernel_id": 0, "formatted_kernel_name": "0"}] + [
        {"kernel_id": k, "kernel_name": n + ".kd", "formatted_kernel_name": n, "demangled_kernel_name": n + ".kd"}
        for k, n in KERNELS.items()]
    hip, markers, dispatches, copies, messages = [], [], [], [], []
    corr = 0
    t = t0
    for s in range(steps):
        corr += 1
        step_corr, step_start = corr, t
        messages.append({"key": step_corr, "value": f"ProfilerStep#{s}"})
        t += 1_000
        for kid, stream, queue in ((1, 1, 11), (2, 1, 11), (3, 2, 12)):
            corr += 1
            hip.append(_api(5, 1, tid, corr, t, t + 5_000))
            dispatches.append({"size": 184, "kind": 11, "operation": 2, "thread_id": tid,
                               "correlation_id": {"internal": corr, "external": 0}, "start_timestamp": t + 8_000,
                               "end_timestamp": t + 108_000, "dispatch_info": {
                                   "size": 72, "agent_id": {"handle": 101}, "queue_id": {"handle": queue},
                                   "kernel_id": kid, "dispatch_id": corr, "private_segment_size": 0,
                                   "group_segment_size": 1024, "workgroup_size": {"x": 256, "y": 1, "z": 1},
                                   "grid_size": {"x": 256 * 40, "y": 2, "z": 1}},
                               "stream_id": {"handle": stream}})
            t += 200_000
        corr += 1
        hip.append(_api(5, 2, tid, corr, t, t + 4_000))
        copies.append({"size": 96, "kind": 10, "operation": 2, "thread_id": tid,
                       "correlation_id": {"internal": corr, "external": 0}, "start_timestamp": t + 6_000,
                       "end_timestamp": t + 56_000, "dst_agent_id": {"handle": 101}, "src_agent_id": {"handle": 100},
                       "bytes": 1 << 20, "stream_id": {"handle": 1}})
        t += 100_000
        markers.append(_api(7, 1, tid, step_corr, step_start, t))
    dispatches.append({"size": 184, "kind": 11, "operation": 2, "thread_id": tid,
                       "correlation_id": {"internal": corr + 1, "external": 0}, "start_timestamp": t,
                       "end_timestamp": t + 50_000, "dispatch_info": {
                           "agent_id": {"handle": 102}, "queue_id": {"handle": 21}, "kernel_id": 2,
                           "workgroup_size": {"x": 64, "y": 1, "z": 1}, "grid_size": {"x": 64, "y": 1, "z": 1}},
                       "stream_id": {"handle": 0}})
    tool = {"metadata": {"pid": pid, "init_time": t0 - 1_000, "fini_time": t + 1_000_000, "command": ["python"]},
            "agents": agents, "counters": [],
            "strings": {"callback_records": [], "buffer_records": strings, "marker_api": messages,
                        "correlation_id": {"external": []}},
            "code_objects": [], "kernel_symbols": symbols, "host_functions": [], "summary": [],
            "callback_records": {"counter_collection": []},
            "buffer_records": {"kernel_dispatch": dispatches, "hip_api": hip, "hsa_api": [], "marker_api": markers,
                               "rccl_api": [], "memory_copy": copies, "memory_allocation": []}}
    return {"rocprofiler-sdk-tool": [tool]}


def _api(kind: int, op: int, tid: int, corr: int, start: int, end: int) -> dict:
    return {"size": 64, "kind": kind, "operation": op, "thread_id": tid,
            "correlation_id": {"internal": corr, "external": 0}, "start_timestamp": start, "end_timestamp": end}


# The RPD tables as rocmProfileData's rpd_tracer creates them (the DDL its databases carry).
RPD_DDL = [
    'CREATE TABLE "rocpd_string" ("id" integer NOT NULL PRIMARY KEY AUTOINCREMENT, "string" varchar(4096) NOT NULL)',
    'CREATE TABLE "rocpd_op" ("id" integer NOT NULL PRIMARY KEY AUTOINCREMENT, "gpuId" integer NOT NULL, '
    '"queueId" integer NOT NULL, "sequenceId" integer NOT NULL, "completionSignal" varchar(18) NOT NULL, '
    '"start" integer NOT NULL, "end" integer NOT NULL, "description_id" integer NOT NULL REFERENCES "rocpd_string" '
    '("id") DEFERRABLE INITIALLY DEFERRED, "opType_id" integer NOT NULL REFERENCES "rocpd_string" ("id") '
    'DEFERRABLE INITIALLY DEFERRED)',
    'CREATE TABLE "rocpd_api" ("id" integer NOT NULL PRIMARY KEY AUTOINCREMENT, "pid" integer NOT NULL, '
    '"tid" integer NOT NULL, "start" integer NOT NULL, "end" integer NOT NULL, "apiName_id" integer NOT NULL '
    'REFERENCES "rocpd_string" ("id") DEFERRABLE INITIALLY DEFERRED, "args_id" integer NOT NULL REFERENCES '
    '"rocpd_string" ("id") DEFERRABLE INITIALLY DEFERRED)',
    'CREATE TABLE "rocpd_api_ops" ("id" integer NOT NULL PRIMARY KEY AUTOINCREMENT, "api_id" integer NOT NULL '
    'REFERENCES "rocpd_api" ("id") DEFERRABLE INITIALLY DEFERRED, "op_id" integer NOT NULL REFERENCES "rocpd_op" '
    '("id") DEFERRABLE INITIALLY DEFERRED)',
    'CREATE TABLE "rocpd_copyapi" ("api_ptr_id" integer NOT NULL PRIMARY KEY REFERENCES "rocpd_api" ("id") '
    'DEFERRABLE INITIALLY DEFERRED, "stream" varchar(18) NOT NULL, "size" integer NOT NULL, "width" integer NOT NULL, '
    '"height" integer NOT NULL, "kind" integer NOT NULL, "dst" varchar(18) NOT NULL, "src" varchar(18) NOT NULL, '
    '"dstDevice" integer NOT NULL, "srcDevice" integer NOT NULL, "sync" bool NOT NULL, "pinned" bool NOT NULL)',
    'CREATE TABLE "rocpd_metadata" ("id" integer NOT NULL PRIMARY KEY AUTOINCREMENT, "tag" varchar(4096) NOT NULL, '
    '"value" varchar(4096) NOT NULL)',
    'CREATE TABLE "rocpd_monitor" ("id" integer NOT NULL PRIMARY KEY AUTOINCREMENT, "deviceType" varchar(16) NOT NULL, '
    '"deviceId" integer NOT NULL, "monitorType" varchar(16) NOT NULL, "start" integer NOT NULL, "end" integer NOT '
    'NULL, "value" varchar(255) NOT NULL)',
]


def write_rpd(path: Path, steps: int = 3, pid: int = 777, tid: int = 778, gpu: int = 1,
              t0: int = 5_000_000_000) -> dict:
    """An RPD: per step a UserMarker ``ProfilerStep#i`` range around two hipLaunchKernel calls (one kernel
    each), a hipMemcpy (a HostToDevice copy of 4096 bytes) and a hipMemsetAsync (a fill); plus one unlinked
    hipGetDeviceCount. Returns the expected counts."""
    db = sqlite3.connect(path)
    for ddl in RPD_DDL:
        db.execute(ddl)
    strings: dict[str, int] = {}

    def sid(s: str) -> int:
        if s not in strings:
            strings[s] = len(strings) + 1
            db.execute("INSERT INTO rocpd_string (id, string) VALUES (?, ?)", (strings[s], s))
        return strings[s]

    def api(name: str, args: str, start: int, end: int) -> int:
        cur = db.execute("INSERT INTO rocpd_api (pid, tid, start, end, apiName_id, args_id) VALUES (?,?,?,?,?,?)",
                         (pid, tid, start, end, sid(name), sid(args)))
        return int(cur.lastrowid or 0)

    def op(api_id: int, desc: str, optype: str, start: int, end: int) -> None:
        cur = db.execute("INSERT INTO rocpd_op (gpuId, queueId, sequenceId, completionSignal, start, end, "
                         "description_id, opType_id) VALUES (?,?,?,?,?,?,?,?)",
                         (gpu, 0, 0, "", start, end, sid(desc), sid(optype)))
        db.execute("INSERT INTO rocpd_api_ops (api_id, op_id) VALUES (?, ?)", (api_id, cur.lastrowid))

    sid("")
    db.execute("INSERT INTO rocpd_metadata (tag, value) VALUES ('schema_version', '2')")
    t = t0
    api("hipGetDeviceCount", "", t, t + 2_000)
    t += 10_000
    for s in range(steps):
        step_start = t
        t += 1_000
        for name in ("Cijk_Ailk_Bljk_SB_MT128x64x16", "void at::native::elementwise_kernel<128, 4>()"):
            a = api("hipLaunchKernel", "", t, t + 5_000)
            op(a, name, "KernelExecution", t + 8_000, t + 58_000)
            t += 100_000
        a = api("hipMemcpy", "", t, t + 60_000)
        db.execute("INSERT INTO rocpd_copyapi VALUES (?, '0x0', 4096, 0, 0, 1, '0x1', '0x2', 0, 0, 1, 0)", (a,))
        op(a, "", "CopyHostToDevice", t + 5_000, t + 50_000)
        t += 100_000
        a = api("hipMemsetAsync", "", t, t + 3_000)
        op(a, "", "FillBuffer", t + 4_000, t + 9_000)
        t += 20_000
        api("UserMarker", f"ProfilerStep#{s}", step_start, t)
        t += 5_000
    db.commit()
    db.close()
    return {"kernels": 2 * steps, "copies": steps, "fills": steps, "calls": 4 * steps + 1, "markers": steps,
            "links": 4 * steps}


def rocpd_schema(uuid: str, guid: str) -> str:
    """The published schema excerpt with its placeholders filled as rocprofv3 fills them."""
    text = ROCPD_SCHEMA.read_text()
    return text.replace("{{uuid}}", f"_{uuid}").replace("{{guid}}", guid)


def write_rocpd(path: Path, steps: int = 3, pid: int = 5150, tid: int = 5151, t0: int = 20_000_000_000) -> dict:
    """A rocpd database (schema 3.0.1): per step a roctx ``ProfilerStep#i`` range, two hipLaunchKernel
    regions with their dispatches (GEMM on stream 1, RCCL on stream 2, both on GPU 0), a hipMemcpyAsync
    with a host-to-device copy; one roctxMarkA sample. Agents: one CPU, two GPUs. Returns the counts."""
    uuid, guid = "0198a6c2_4f3e_7d21_9a10_3b5c7e9f1a2d", "5fa3c2b1-0000-7000-8000-0123456789ab"
    db = sqlite3.connect(path)
    db.executescript(rocpd_schema(uuid, guid))
    T = lambda name: f"`{name}_{uuid}`"  # noqa: E731
    strings: dict[str, int] = {}

    def sid(s: str) -> int:
        if s not in strings:
            strings[s] = len(strings) + 1
            db.execute(f"INSERT INTO {T('rocpd_string')} (id, string) VALUES (?, ?)", (strings[s], s))
        return strings[s]

    db.execute(f"INSERT INTO {T('rocpd_metadata')} (tag, value) VALUES ('schema_version', '3')")
    db.execute(f"INSERT INTO {T('rocpd_info_node')} (id, hash, machine_id) VALUES (1, 99, 'm')")
    db.execute(f"INSERT INTO {T('rocpd_info_process')} (id, nid, pid, init, fini) VALUES (1, 1, ?, 0, 0)", (pid,))
    db.execute(f"INSERT INTO {T('rocpd_info_thread')} (id, nid, pid, tid) VALUES (1, 1, 1, ?)", (tid,))
    agents = [(1, "CPU", 0, 0, "AMD EPYC", "AMD EPYC", {"cu_count": 64}),
              (2, "GPU", 1, 0, "gfx942", GPU_NAME, {"cu_count": 304, "mem_banks": [{"size_in_bytes": 192 << 30}]}),
              (3, "GPU", 2, 1, "gfx942", GPU_NAME, {"cu_count": 304, "mem_banks": [{"size_in_bytes": 192 << 30}]})]
    for aid, typ, absolute, type_index, name, product, ext in agents:
        db.execute(f"INSERT INTO {T('rocpd_info_agent')} (id, nid, pid, type, absolute_index, logical_index, "
                   "type_index, name, product_name, extdata) VALUES (?,?,?,?,?,?,?,?,?,?)",
                   (aid, 1, 1, typ, absolute, absolute, type_index, name, product, json.dumps(ext)))
    for q in (1, 2):
        db.execute(f"INSERT INTO {T('rocpd_info_queue')} (id, nid, pid) VALUES (?, 1, 1)", (q,))
        db.execute(f"INSERT INTO {T('rocpd_info_stream')} (id, nid, pid) VALUES (?, 1, 1)", (q,))
    db.execute(f"INSERT INTO {T('rocpd_info_code_object')} (id, nid, pid, agent_id) VALUES (1, 1, 1, 2)")
    for kid, name in ((1, KERNELS[1]), (2, KERNELS[3])):
        db.execute(f"INSERT INTO {T('rocpd_info_kernel_symbol')} (id, nid, pid, code_object_id, kernel_name, "
                   "display_name) VALUES (?, 1, 1, 1, ?, ?)", (kid, name + ".kd", name))
    events = 0

    def event(category: str, corr: int, extdata: str = "{}") -> int:
        nonlocal events
        events += 1
        db.execute(f"INSERT INTO {T('rocpd_event')} (id, category_id, stack_id, parent_stack_id, correlation_id, "
                   "extdata) VALUES (?,?,?,?,0,?)", (events, sid(category), corr, corr, extdata))
        return events

    def region(corr: int, name: str, category: str, start: int, end: int, extdata: str = "{}") -> None:
        e = event(category, corr, extdata)
        db.execute(f"INSERT INTO {T('rocpd_region')} (id, nid, pid, tid, start, end, name_id, event_id) "
                   "VALUES (?,1,1,1,?,?,?,?)", (corr, start, end, sid(name), e))

    corr, dispatch, t = 0, 0, t0
    for s in range(steps):
        corr += 1
        step_corr, step_start = corr, t
        t += 1_000
        for kid, stream in ((1, 1), (2, 2)):
            corr += 1
            dispatch += 1
            region(corr, "hipLaunchKernel", "HIP_RUNTIME_API", t, t + 5_000)
            e = event("KERNEL_DISPATCH", corr)
            db.execute(f"INSERT INTO {T('rocpd_kernel_dispatch')} (id, nid, pid, tid, agent_id, kernel_id, "
                       "dispatch_id, queue_id, stream_id, start, end, private_segment_size, group_segment_size, "
                       "workgroup_size_x, workgroup_size_y, workgroup_size_z, grid_size_x, grid_size_y, grid_size_z, "
                       "region_name_id, event_id) VALUES (?,1,1,1,2,?,?,?,?,?,?,0,512,128,1,1,?,1,1,?,?)",
                       (dispatch, kid, dispatch, stream, stream, t + 8_000, t + 158_000, 128 * 80, sid(""), e))
            t += 200_000
        corr += 1
        region(corr, "hipMemcpyAsync", "HIP_RUNTIME_API", t, t + 4_000)
        e = event("MEMORY_COPY", corr)
        db.execute(f"INSERT INTO {T('rocpd_memory_copy')} (nid, pid, tid, start, end, name_id, dst_agent_id, "
                   "src_agent_id, size, stream_id, event_id) VALUES (1,1,1,?,?,?,2,1,?,1,?)",
                   (t + 6_000, t + 66_000, sid("MEMORY_COPY_HOST_TO_DEVICE"), 1 << 22, e))
        t += 100_000
        region(step_corr, "roctxRangePushA", "MARKER_CORE_API", step_start, t,
               json.dumps({"message": f"ProfilerStep#{s}"}))
    db.execute(f"INSERT INTO {T('rocpd_track')} (id, nid, pid, tid, name_id) VALUES (1, 1, 1, 1, ?)",
               (sid("MARKER_CORE_API"),))
    e = event("MARKER_CORE_API", corr + 1, json.dumps({"message": "checkpoint"}))
    db.execute(f"INSERT INTO {T('rocpd_sample')} (id, track_id, timestamp, event_id) VALUES (?, 1, ?, ?)",
               (corr + 1, t + 10, e))
    db.commit()
    db.close()
    return {"kernels": 2 * steps, "rccl": steps, "copies": steps, "calls": 3 * steps, "ranges": steps, "marks": 1}


def rpd2tracing(rpd: Path, out: Path) -> None:
    """rocmProfileData's ``tools/rpd2tracing.py`` (``--format array``, no --start/--end) on ``rpd``:
    the same queries and output strings for the process and thread names, the ops, the API calls and
    UserMarker ranges, the api_op flows and the per-GPU QueueDepth/Idle and SMI counters. (Its
    "UserMarker frame" projections onto GPU queues and graph rows are not reproduced.)"""
    connection = sqlite3.connect(rpd)
    w = []
    w.append("[ {}\n")
    for row in connection.execute("select distinct gpuId from rocpd_op"):
        w.append(",{\"name\": \"process_name\", \"ph\": \"M\", \"pid\":\"%s\",\"args\":{\"name\":\"%s\"}}\n"
                 % (row[0], "GPU" + str(row[0])))
        w.append(",{\"name\": \"process_sort_index\", \"ph\": \"M\", \"pid\":\"%s\",\"args\":{\"sort_index\":\"%s\"}}\n"
                 % (row[0], row[0] + 1000000))
    for row in connection.execute("select distinct pid, tid from rocpd_api"):
        w.append(',{"name":"thread_name","ph":"M","pid":"%s","tid":"%s","args":{"name":"%s"}}\n'
                 % (row[0], row[1], "Hip " + str(row[1])))
        w.append(',{"name":"thread_sort_index","ph":"M","pid":"%s","tid":"%s","args":{"sort_index":"%s"}}\n'
                 % (row[0], row[1], row[1] * 2))
    for row in connection.execute(
            "select A.string as optype, B.string as description, gpuId, queueId, rocpd_op.start/1000, "
            "(rocpd_op.end-rocpd_op.start) / 1000 from rocpd_op INNER JOIN rocpd_string A on A.id = "
            "rocpd_op.opType_id INNER Join rocpd_string B on B.id = rocpd_op.description_id "):
        name = row[0] if len(row[1]) == 0 else row[1]
        w.append(",{\"pid\":\"%s\",\"tid\":\"%s\",\"name\":\"%s\",\"ts\":\"%s\",\"dur\":\"%s\",\"ph\":\"X\","
                 "\"args\":{\"desc\":\"%s\"}}\n" % (row[2], row[3], name, row[4], row[5], row[0]))
    for row in connection.execute(
            "select A.string as apiName, B.string as args, pid, tid, rocpd_api.start/1000, (rocpd_api.end-"
            "rocpd_api.start) / 1000, (rocpd_api.end != rocpd_api.start) as has_duration from rocpd_api INNER JOIN "
            "rocpd_string A on A.id = rocpd_api.apiName_id INNER Join rocpd_string B on B.id = rocpd_api.args_id "
            " order by rocpd_api.id"):
        if row[0] == "UserMarker":
            if row[6] == 0:
                w.append(",{\"pid\":\"%s\",\"tid\":\"%s\",\"name\":\"%s\",\"ts\":\"%s\",\"ph\":\"i\",\"s\":\"p\","
                         "\"args\":{\"desc\":\"%s\"}}\n"
                         % (row[2], row[3], row[1].replace('"', ''), row[4], row[1].replace('"', '')))
            else:
                w.append(",{\"pid\":\"%s\",\"tid\":\"%s\",\"name\":\"%s\",\"ts\":\"%s\",\"dur\":\"%s\",\"ph\":\"X\","
                         "\"args\":{\"desc\":\"%s\"}}\n"
                         % (row[2], row[3], row[1].replace('"', ''), row[4], row[5], row[1].replace('"', '')))
        else:
            w.append(",{\"pid\":\"%s\",\"tid\":\"%s\",\"name\":\"%s\",\"ts\":\"%s\",\"dur\":\"%s\",\"ph\":\"X\","
                     "\"args\":{\"desc\":\"%s\"}}\n"
                     % (row[2], row[3], row[0], row[4], row[5], row[1].replace('"', '').replace('\t', '')))
    for row in connection.execute(
            "select rocpd_api_ops.id, pid, tid, gpuId, queueId, rocpd_api.end/1000 - 2, rocpd_op.start/1000 from "
            "rocpd_api_ops INNER JOIN rocpd_api on rocpd_api_ops.api_id = rocpd_api.id INNER JOIN rocpd_op on "
            "rocpd_api_ops.op_id = rocpd_op.id "):
        fromtime = row[5] if row[5] < row[6] else row[6]
        w.append(",{\"pid\":\"%s\",\"tid\":\"%s\",\"cat\":\"api_op\",\"name\":\"api_op\",\"ts\":\"%s\",\"id\":\"%s\","
                 "\"ph\":\"s\"}\n" % (row[1], row[2], fromtime, row[0]))
        w.append(",{\"pid\":\"%s\",\"tid\":\"%s\",\"cat\":\"api_op\",\"name\":\"api_op\",\"ts\":\"%s\",\"id\":\"%s\","
                 "\"ph\":\"f\", \"bp\":\"e\"}\n" % (row[3], row[4], row[6], row[0]))
    t_end = 0
    for row in connection.execute("SELECT max(end)/1000 from (SELECT end from rocpd_api UNION ALL SELECT end from "
                                  "rocpd_op)"):
        t_end = int(row[0])
    for (gpu_id,) in connection.execute("SELECT DISTINCT gpuId FROM rocpd_op").fetchall():
        depth, idle = 0, 1
        for row in connection.execute(
                "select * from (select rocpd_api.start/1000 as ts, \"1\" from rocpd_api_ops INNER JOIN rocpd_api on "
                "rocpd_api_ops.api_id = rocpd_api.id INNER JOIN rocpd_op on rocpd_api_ops.op_id = rocpd_op.id AND "
                "rocpd_op.gpuId = %s UNION ALL select rocpd_op.end/1000, \"-1\" from rocpd_api_ops INNER JOIN "
                "rocpd_api on rocpd_api_ops.api_id = rocpd_api.id INNER JOIN rocpd_op on rocpd_api_ops.op_id = "
                "rocpd_op.id AND rocpd_op.gpuId = %s) order by ts" % (gpu_id, gpu_id)):
            if idle and int(row[1]) > 0:
                idle = 0
                w.append(',{"pid":"%s","name":"Idle","ph":"C","ts":%s,"args":{"idle":%s}}\n' % (gpu_id, row[0], idle))
            if depth == 1 and int(row[1]) < 0:
                idle = 1
                w.append(',{"pid":"%s","name":"Idle","ph":"C","ts":%s,"args":{"idle":%s}}\n' % (gpu_id, row[0], idle))
            depth = depth + int(row[1])
            w.append(',{"pid":"%s","name":"QueueDepth","ph":"C","ts":%s,"args":{"depth":%s}}\n' % (gpu_id, row[0], depth))
        if t_end > 0:
            w.append(',{"pid":"%s","name":"Idle","ph":"C","ts":%s,"args":{"idle":%s}}\n' % (gpu_id, t_end, idle))
            w.append(',{"pid":"%s","name":"QueueDepth","ph":"C","ts":%s,"args":{"depth":%s}}\n' % (gpu_id, t_end, depth))
    try:
        for row in connection.execute("select deviceId, monitorType, start/1000, value from rocpd_monitor"):
            w.append(',{"pid":"%s","name":"%s","ph":"C","ts":%s,"args":{"%s":%s}}\n' % (row[0], "", row[2], row[1],
                                                                                       row[3]))
        for row in connection.execute("select distinct deviceId, monitorType, max(end)/1000, value from rocpd_monitor "
                                      "group by deviceId, monitorType"):
            w.append(',{"pid":"%s","name":"%s","ph":"C","ts":%s,"args":{"%s":%s}}\n' % (row[0], "", row[2], row[1],
                                                                                       row[3]))
    except sqlite3.OperationalError:
        pass
    sizes: dict[str, int] = {}
    total = 0
    exp = re.compile(r"^ptr\((.*)\)\s+size\((.*)\)$")
    for row in connection.execute(
            "SELECT rocpd_api.end/1000 as ts, B.string, '1'  FROM rocpd_api INNER JOIN rocpd_string A ON "
            "A.id=rocpd_api.apiName_id INNER JOIN rocpd_string B ON B.id=rocpd_api.args_id WHERE A.string='hipFree' "
            "UNION ALL SELECT rocpd_api.start/1000, B.string, '0' FROM rocpd_api INNER JOIN rocpd_string A ON "
            "A.id=rocpd_api.apiName_id INNER JOIN rocpd_string B ON B.id=rocpd_api.args_id WHERE A.string='hipMalloc' "
            "ORDER BY ts asc"):
        m = exp.match(row[1])
        if row[2] == "0" and m:
            sizes[m.group(1)] = int(m.group(2), 16)
            total += sizes[m.group(1)]
            w.append(',{"pid":"0","name":"Allocated Memory","ph":"C","ts":%s,"args":{"depth":%s}}\n' % (row[0], total))
    if t_end > 0:
        w.append(',{"pid":"0","name":"Allocated Memory","ph":"C","ts":%s,"args":{"depth":%s}}\n' % (t_end, total))
    w.append("]\n")
    connection.close()
    out.write_text("".join(w), encoding="utf-8")
