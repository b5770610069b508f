"""Small Perfetto protobuf traces laid out as their real writers lay them out.

``write_rocprofv3_pftrace``: as rocprofiler-sdk's ``--output-format pftrace`` writes it (the Perfetto
SDK's encoding: interned event names, categories and annotation names, an incremental sequence
clock, packet defaults; tracks ``THREAD k (tid)``, ``COMPUTE AGENT [n] STREAM [s] (GPU)``, ``COPY to
AGENT [n] STREAM [s] (GPU)``; categories ``hip_api``, ``kernel_dispatch``, ``memory_copy``; each API
call and its GPU op share a process-scoped flow and a ``corr_id`` annotation).
``write_kineto_pftrace``: as Kineto's PerfettoTraceBuilder writes it (a "Kineto Trace" process,
one process per device, resource threads ``stream N``, a child track per activity, plain names,
``metadata`` (the activity's JSON args without their braces) and ``correlation_id`` annotations).
"""

from __future__ import annotations

import json
from pathlib import Path

from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TracePacket, TrackEvent
from perfetto.trace_builder.proto_builder import TraceProtoBuilder

INCREMENTAL_CLOCK = 64
BOOTTIME = 6
RCCL_KERNEL = "ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)"
GEMM_KERNEL = "Cijk_Alik_Bljk_BBS_BH_MT128x128x64_MI16x16x1"
ELEMENTWISE_KERNEL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float> >"


class _Seq:
    """One packet sequence of the Perfetto SDK: interning and the incremental clock."""

    def __init__(self, b: TraceProtoBuilder, seq_id: int, start_ns: int) -> None:
        self.b, self.seq_id, self.last = b, seq_id, start_ns
        self.names: dict[str, int] = {}
        self.cats: dict[str, int] = {}
        self.ann: dict[str, int] = {}
        p = self.packet()
        p.sequence_flags = TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
        p.trace_packet_defaults.timestamp_clock_id = INCREMENTAL_CLOCK
        snap = p.clock_snapshot
        c = snap.clocks.add()
        c.clock_id, c.timestamp = BOOTTIME, start_ns
        c = snap.clocks.add()
        c.clock_id, c.timestamp, c.is_incremental = INCREMENTAL_CLOCK, start_ns, True

    def packet(self) -> TracePacket:
        p = self.b.add_packet()
        p.trusted_packet_sequence_id = self.seq_id
        return p

    def _iid(self, table: dict[str, int], value: str, p: TracePacket, kind: str) -> int:
        if value not in table:
            table[value] = len(table) + 1
            entry = getattr(p.interned_data, kind).add()
            entry.iid = table[value]
            if kind == "debug_annotation_names" or kind == "event_categories" or kind == "event_names":
                entry.name = value
        return table[value]

    def event(self, ts: int, kind: int, track: int, name: str = "", cat: str = "",
              args: dict[str, int | str] | None = None, flow: int | None = None) -> None:
        p = self.packet()
        if ts >= self.last:
            p.timestamp = ts - self.last  # the incremental clock: a delta from the previous packet
            self.last = ts
        else:  # back in time: the SDK writes it absolute, on the trace clock
            p.timestamp_clock_id, p.timestamp = BOOTTIME, ts
        ev = p.track_event
        ev.type = kind
        ev.track_uuid = track
        if kind == TrackEvent.TYPE_SLICE_BEGIN:
            ev.name_iid = self._iid(self.names, name, p, "event_names")
            ev.category_iids.append(self._iid(self.cats, cat, p, "event_categories"))
            for k, v in (args or {}).items():
                a = ev.debug_annotations.add()
                a.name_iid = self._iid(self.ann, k, p, "debug_annotation_names")
                if isinstance(v, int):
                    a.int_value = v
                else:
                    a.string_value = v
            if flow is not None:
                ev.flow_ids.append(flow)


def _track(b: TraceProtoBuilder, uuid: int, name: str, thread: tuple[int, int] | None = None,
           process: int | None = None) -> int:
    p = b.add_packet()
    d = p.track_descriptor
    d.uuid = uuid
    if thread is not None:
        d.thread.pid, d.thread.tid = thread
        d.thread.thread_name = name
    elif process is not None:
        d.process.pid = process
        d.process.process_name = name
    else:
        d.name = name
    return uuid


def write_rocprofv3_pftrace(path: Path, *, iterations: int = 6, agent: int = 2, pid: int = 4242,
                            start_ns: int = 63_855_948_165_371) -> Path:
    """A DDP-like step loop on one MI-class GPU: per iteration a host-to-device copy, GEMM and
    elementwise kernels on stream 1, an RCCL all-reduce kernel on stream 2, each launched by a hip
    call on the main thread or a second thread."""
    b = TraceProtoBuilder()
    main = _track(b, 1, "python3", thread=(pid, pid))
    other = _track(b, 2, f"THREAD 1 ({pid + 7})")
    compute = _track(b, 11, f"COMPUTE AGENT [{agent}] STREAM [1] (GPU)")
    comm = _track(b, 12, f"COMPUTE AGENT [{agent}] STREAM [2] (GPU)")
    copy = _track(b, 13, f"COPY to AGENT [{agent}] STREAM [1] (GPU)")
    # rocprofv3 writes each kind of record in its own pass (API calls, then copies, then kernels)
    host = _Seq(b, 7, start_ns)
    gpu = _Seq(b, 8, start_ns)
    calls, ops = [], []
    corr = 100
    t = start_ns + 1_000
    for _ in range(iterations):
        for kind, name, track_host in (("copy", "hipMemcpyAsync", main), ("kernel", "hipLaunchKernel", main),
                                       ("kernel", "hipLaunchKernel", main), ("rccl", "hipExtLaunchKernel", other)):
            corr += 1
            calls.append((t, t + 4_000, track_host, name, corr))
            op_name = {"copy": "MEMORY_COPY_HOST_TO_DEVICE", "rccl": RCCL_KERNEL}.get(
                kind, GEMM_KERNEL if len(ops) % 3 == 1 else ELEMENTWISE_KERNEL)
            track = {"copy": copy, "rccl": comm}.get(kind, compute)
            cat = "memory_copy" if kind == "copy" else "kernel_dispatch"
            ops.append((t + 6_000, t + 26_000, track, op_name, cat, corr))
            t += 30_000
        t += 50_000
    for s, e, trk, name, c in calls:
        host.event(s, TrackEvent.TYPE_SLICE_BEGIN, trk, name, "hip_api",
                   {"begin_ns": s, "end_ns": e, "delta_ns": e - s, "tid": pid, "corr_id": c}, flow=c)
        host.event(e, TrackEvent.TYPE_SLICE_END, trk)
    for s, e, trk, name, cat, c in sorted(ops, key=lambda o: (o[4], o[0])):
        args: dict[str, int | str] = {"begin_ns": s, "end_ns": e, "delta_ns": e - s, "corr_id": c}
        if cat == "kernel_dispatch":  # the agent's index among GPUs; copies name their source and target
            args.update({"agent": "GPU-0", "queue": 1, "grid_size": 65536, "workgroup_size": 256})
        else:
            args.update({"src_agent": "CPU-0", "dst_agent": "GPU-0", "copy_bytes": 1 << 20})
        gpu.event(s, TrackEvent.TYPE_SLICE_BEGIN, trk, name, cat, args, flow=c)
        gpu.event(e, TrackEvent.TYPE_SLICE_END, trk)
    path.write_bytes(b.serialize())
    return path


def write_kineto_pftrace(path: Path, *, steps: int = 3, pid: int = 777, device: int = 0,
                         start_ns: int = 1_700_000_000_000_000_000) -> Path:
    """ProfilerStep#N ranges with aten ops and cudaLaunchKernel calls on one host thread, each kernel on
    stream 7 of the device, as Kineto's Perfetto builder writes them."""
    b = TraceProtoBuilder()
    seq = 99
    nxt = [1]

    def uuid() -> int:
        nxt[0] += 1
        return nxt[0]

    def packet() -> TracePacket:
        p = b.add_packet()
        p.trusted_packet_sequence_id = seq
        return p

    def proc(name: str, pid_: int) -> int:
        u = uuid()
        p = packet()
        p.track_descriptor.uuid = u
        p.track_descriptor.name = name
        p.track_descriptor.process.pid = pid_
        p.track_descriptor.process.process_name = name
        return u

    def thread(name: str, parent: int, pid_: int, tid: int) -> int:
        u = uuid()
        p = packet()
        d = p.track_descriptor
        d.uuid, d.parent_uuid, d.name = u, parent, name
        d.thread.pid, d.thread.tid, d.thread.thread_name = pid_, tid, name
        return u

    def activity(res: int, name: str, s: int, e: int, meta: dict, corr: int = 0) -> None:
        child = uuid()
        p = packet()
        p.track_descriptor.uuid, p.track_descriptor.parent_uuid = child, res
        p.track_descriptor.name = "PLACE_HOLDER"
        p = packet()
        p.timestamp = s
        ev = p.track_event
        ev.type, ev.name, ev.track_uuid = TrackEvent.TYPE_SLICE_BEGIN, name, child
        if meta:  # metadataJson(): the args as the Chrome JSON writes them inside "args": {...}, no braces
            a = ev.debug_annotations.add()
            a.name, a.string_value = "metadata", json.dumps(meta)[1:-1]
        if corr:
            a = ev.debug_annotations.add()
            a.name, a.int_value = "correlation_id", corr
        p = packet()
        p.timestamp = e
        p.track_event.type, p.track_event.track_uuid = TrackEvent.TYPE_SLICE_END, child

    top = proc("Kineto Trace", 0)
    dev = proc(f"Device {device}", device)
    p = packet()  # handleDeviceInfo names the device's process after it
    p.track_descriptor.uuid, p.track_descriptor.name = dev, "NVIDIA H100 80GB HBM3 [GPU 0]"
    p.track_descriptor.process.pid, p.track_descriptor.process.process_name = device, "NVIDIA H100 80GB HBM3"
    host = thread(f"thread {pid} (python)", top, pid, pid)
    stream = thread("stream 7", dev, device, 7)
    t = start_ns
    corr = 1
    for step in range(steps):
        activity(host, f"ProfilerStep#{step + 10}", t, t + 900_000, {})
        for k in range(4):
            s = t + 10_000 + k * 200_000
            activity(host, "aten::mm", s, s + 150_000, {"External id": 50 + corr})
            activity(host, "cudaLaunchKernel", s + 20_000, s + 40_000, {"correlation": corr, "External id": 50 + corr},
                     corr)
            activity(stream, "ampere_sgemm_128x64_tn", s + 60_000, s + 180_000,
                     {"device": device, "stream": 7, "correlation": corr, "External id": 50 + corr}, corr)
            corr += 1
        t += 1_000_000
    path.write_bytes(b.serialize())
    return path
