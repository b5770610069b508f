"""The Perfetto protobuf reader against an independent decode of the same files.

The files are written as rocprofv3 and Kineto's Perfetto builder write them (tests/tracesynth/
pftrace_writer.py); the expected counts, times and links are re-derived here from the whole
``Trace`` message parsed at once, by code that shares nothing with the reader.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace as PbTrace
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TracePacket, TrackEvent
from perfetto.trace_builder.proto_builder import TraceProtoBuilder
from tracesynth.pftrace_writer import RCCL_KERNEL, write_kineto_pftrace, write_rocprofv3_pftrace

from traceread import load, schema
from traceread.cli import main
from traceread.errors import TraceReadError
from traceread.render.notes import text as words  # notes are data; the reports word them


def independent(path) -> list[dict]:
    """Every slice as {track, name, cat, start, end, args} from the whole message, begin/end matched
    per track; timestamps through the incremental clock the writer declared."""
    msg = PbTrace.FromString(path.read_bytes())
    names: dict[int, str] = {}
    tracks: dict[int, str] = {}
    state: dict[int, dict] = {}
    open_: dict[int, list[dict]] = {}
    out = []
    for p in msg.packet:
        s = state.setdefault(p.trusted_packet_sequence_id, {"names": {}, "cats": {}, "ann": {}, "clock": None,
                                                             "incr": {}})
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            tracks[d.uuid] = d.name or d.thread.thread_name or d.process.process_name
        if p.trace_packet_defaults.HasField("timestamp_clock_id"):
            s["clock"] = p.trace_packet_defaults.timestamp_clock_id
        for c in p.clock_snapshot.clocks:
            if c.is_incremental:
                s["incr"][c.clock_id] = c.timestamp
        for e in p.interned_data.event_names:
            s["names"][e.iid] = e.name
        for e in p.interned_data.event_categories:
            s["cats"][e.iid] = e.name
        for e in p.interned_data.debug_annotation_names:
            s["ann"][e.iid] = e.name
        if not p.HasField("track_event"):
            continue
        clock = p.timestamp_clock_id if p.HasField("timestamp_clock_id") else s["clock"]
        if clock in s["incr"]:
            s["incr"][clock] += p.timestamp
            ts = s["incr"][clock]
        else:
            ts = p.timestamp
        ev = p.track_event
        if ev.type == TrackEvent.TYPE_SLICE_BEGIN:
            args = {}
            for a in ev.debug_annotations:
                key = a.name or s["ann"][a.name_iid]
                args[key] = a.int_value if a.HasField("int_value") else a.string_value
            open_.setdefault(ev.track_uuid, []).append({
                "track": tracks.get(ev.track_uuid, ""), "name": ev.name or s["names"].get(ev.name_iid, ""),
                "cat": ev.categories[0] if ev.categories else s["cats"].get(
                    ev.category_iids[0], "") if ev.category_iids else "",
                "start": ts, "args": args, "uuid": ev.track_uuid})
        elif ev.type == TrackEvent.TYPE_SLICE_END:
            sl = open_[ev.track_uuid].pop()
            sl["end"] = ts
            out.append(sl)
    del names
    return out


def test_rocprofv3_pftrace_counts_lanes_and_links(tmp_path) -> None:
    path = write_rocprofv3_pftrace(tmp_path / "run.pftrace", iterations=9)
    truth = independent(path)
    t = load(str(path))
    ev = t.events
    schema.validate(ev)
    assert t.meta.format == "perfetto" and "rocprofv3" in t.meta.generation
    kernels = [s for s in truth if s["cat"] == "kernel_dispatch"]
    comm = [s for s in kernels if s["name"] == RCCL_KERNEL]
    copies = [s for s in truth if s["cat"] == "memory_copy"]
    calls = [s for s in truth if s["cat"] == "hip_api"]
    lanes = Counter(ev["lane"].astype(str))
    assert lanes["gpu_compute"] == len(kernels) - len(comm) > 0
    assert lanes["gpu_comm"] == len(comm) > 0
    assert lanes["memcpy"] == len(copies) > 0
    assert lanes["cpu_thread"] == len(calls) > 0
    assert len(ev) == len(truth)
    # streams from the track names, and the comm kernels on their own stream
    gpu = ev[ev["device"] >= 0]
    truth_streams = {int(s["track"].split("STREAM [")[1].split("]")[0]) for s in kernels}
    assert set(gpu.loc[gpu["category"] == "kernel", "stream"]) == truth_streams
    assert set(ev.loc[ev["lane"] == "gpu_comm", "stream"]) == {
        int(s["track"].split("STREAM [")[1].split("]")[0]) for s in comm}
    # times: exact ns through the incremental clock
    k = ev[ev["category"] == "kernel"].sort_values("start_ns")
    assert k["start_ns"].tolist() == sorted(s["start"] for s in kernels)
    assert k["end_ns"].tolist() == [s["end"] for s in sorted(kernels, key=lambda s: s["start"])]
    # every GPU op's launch call shares its correlation id (the corr_id annotation)
    host_corr = set(ev.loc[ev["lane"] == "cpu_thread", "correlation"])
    gpu_corr = ev.loc[ev["device"] >= 0, "correlation"]
    assert (gpu_corr >= 0).all() and set(gpu_corr) <= host_corr
    assert set(gpu_corr) == {s["args"]["corr_id"] for s in kernels + copies}
    # host threads: the main thread's tid and the rocprofv3 "THREAD k (tid)" track's tid
    assert set(ev.loc[ev["lane"] == "cpu_thread", "tid"]) == {4242, 4249}
    # the "agent" annotation's GPU index (the track names the agent's node id, 2): copies, which name
    # no agent, sit on the same GPU as the kernels
    assert [d.id for d in t.meta.devices] == [0]
    assert set(ev.loc[ev["lane"] == "memcpy", "device"]) == {0}


def test_rocprofv3_pftrace_is_not_cpu_only(tmp_path, capsys) -> None:
    path = write_rocprofv3_pftrace(tmp_path / "run.pftrace")
    assert main(["analyze", str(path)]) == 0
    out = capsys.readouterr().out
    assert "CPU-only" not in out and "No GPU activity" not in out


def test_kineto_pftrace_steps_streams_and_correlation(tmp_path) -> None:
    path = write_kineto_pftrace(tmp_path / "k.pftrace", steps=4)
    truth = independent(path)
    t = load(str(path))
    ev = t.events
    assert "kineto" in t.meta.generation
    steps = [s for s in truth if s["name"].startswith("ProfilerStep#")]
    assert t.meta.steps is not None and sorted(t.meta.steps["step"]) == sorted(
        int(s["name"].split("#")[1]) for s in steps)
    kernels = [s for s in truth if s["name"].startswith("ampere_")]
    k = ev[ev["category"] == "kernel"]
    assert len(k) == len(kernels) and set(k["stream"]) == {7} and set(k["device"]) == {0}
    launches = ev[ev["name"] == "cudaLaunchKernel"]
    assert (launches["category"] == "runtime").all()
    assert sorted(launches["correlation"]) == sorted(k["correlation"])
    assert (k["external_id"] >= 0).all()
    assert Counter(ev["lane"].astype(str))["cpu_annotation"] == len(steps)
    assert [(dv.id, dv.name) for dv in t.meta.devices] == [(0, "NVIDIA H100 80GB HBM3")]


def test_rank_from_the_file_name(tmp_path) -> None:
    t = load(str(write_kineto_pftrace(tmp_path / "train_rank3.pftrace", steps=1)))
    assert set(t.events["rank"]) == {3} and t.meta.ranks[0].rank_source == "file name"


def test_cut_pftrace_keeps_the_packets_before_the_cut(tmp_path) -> None:
    path = write_rocprofv3_pftrace(tmp_path / "run.pftrace", iterations=8)
    data = path.read_bytes()
    cut = tmp_path / "cut.pftrace"
    cut.write_bytes(data[: len(data) * 3 // 4])
    t = load(str(cut))
    assert t.meta.truncated and 0 < len(t.events) < len(load(str(path)).events)


def test_flows_link_a_call_and_its_op_without_correlation_annotations(tmp_path) -> None:
    b = TraceProtoBuilder()
    for uuid, name in ((1, "THREAD 1 (55)"), (2, "COMPUTE AGENT [3] STREAM [0] (GPU)")):
        p = b.add_packet()
        p.track_descriptor.uuid, p.track_descriptor.name = uuid, name
    for track, name, cat, s, e, flow in ((1, "hipLaunchKernel", "hip_api", 100, 200, 9001),
                                         (2, "Cijk_gemm", "kernel_dispatch", 300, 900, 9001),
                                         (1, "hipLaunchKernel", "hip_api", 250, 260, 9002)):
        p = b.add_packet()
        p.trusted_packet_sequence_id, p.timestamp = 3, s
        p.track_event.type, p.track_event.track_uuid, p.track_event.name = TrackEvent.TYPE_SLICE_BEGIN, track, name
        p.track_event.categories.append(cat)
        p.track_event.flow_ids.append(flow)
        p = b.add_packet()
        p.trusted_packet_sequence_id, p.timestamp = 3, e
        p.track_event.type, p.track_event.track_uuid = TrackEvent.TYPE_SLICE_END, track
    path = tmp_path / "flows.pftrace"
    path.write_bytes(b.serialize())
    ev = load(str(path)).events
    k = ev[ev["name"] == "Cijk_gemm"]
    assert int(k["device"].iloc[0]) == 3 and int(k["stream"].iloc[0]) == 0
    linked = ev[ev["correlation"] == 9001]
    assert sorted(linked["name"].astype(str)) == ["Cijk_gemm", "hipLaunchKernel"]
    assert int(ev.loc[ev["start_ns"] == 250, "correlation"].iloc[0]) == -1  # a flow with no GPU end


@pytest.mark.parametrize("garbage", [b"\x0a\x05\xff\xff\xff\xff\xff", b"\x0a\x03\x0b\x0c\x0d" + b"\x00" * 40])
def test_undecodable_packets_are_one_line_errors(tmp_path, garbage) -> None:
    path = tmp_path / "bad.pftrace"
    path.write_bytes(garbage)
    from traceread.loaders.perfetto import load_perfetto

    with pytest.raises(TraceReadError) as err:
        load_perfetto(str(path))
    assert "\n" not in str(err.value) and "Perfetto" in str(err.value)


def test_slices_never_ended_are_counted_not_kept(tmp_path) -> None:
    b = TraceProtoBuilder()
    p = b.add_packet()
    p.track_descriptor.uuid, p.track_descriptor.name = 5, "COMPUTE AGENT [1] STREAM [2] (GPU)"
    for ts, kind in ((10, TrackEvent.TYPE_SLICE_BEGIN), (20, TrackEvent.TYPE_SLICE_END),
                     (30, TrackEvent.TYPE_SLICE_BEGIN)):
        p = b.add_packet()
        p.trusted_packet_sequence_id, p.timestamp = 1, ts
        p.sequence_flags = TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
        p.track_event.type, p.track_event.track_uuid, p.track_event.name = kind, 5, "k"
    path = tmp_path / "open.pftrace"
    path.write_bytes(b.serialize())
    t = load(str(path))
    assert len(t.events) == 1 and np.array_equal(t.events["start_ns"].to_numpy(), [10])
    assert any("never ended" in w for w in map(words, t.meta.warnings))


def test_report_json_of_a_pftrace_fits_the_schema(tmp_path) -> None:
    import json
    from importlib import resources

    import jsonschema

    path = write_rocprofv3_pftrace(tmp_path / "run.pftrace")
    out = tmp_path / "r.json"
    assert main(["analyze", str(path), "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    schema_doc = json.loads(resources.files("traceread").joinpath("data/report.schema.json").read_text("utf-8"))
    jsonschema.validate(doc, schema_doc)
    assert doc["traces"][0]["format"] == "perfetto"


def test_a_pftrace_with_no_slice_is_refused_not_called_cpu_only(tmp_path, capsys) -> None:
    # found by scripts/fuzz_long.py (seed 78): a damaged file left with no slice reached the diagnosis
    # (an internal error, then "a CPU-only capture"): a Perfetto trace with no slice is refused, saying so
    b = TraceProtoBuilder()
    p = b.add_packet()
    p.track_descriptor.uuid, p.track_descriptor.name = 5, "COMPUTE AGENT [1] STREAM [2] (GPU)"
    p = b.add_packet()
    p.trusted_packet_sequence_id, p.timestamp = 1, 10
    p.track_event.type, p.track_event.track_uuid, p.track_event.counter_value = TrackEvent.TYPE_COUNTER, 5, 3
    path = tmp_path / "empty.pftrace"
    path.write_bytes(b.serialize())
    with pytest.raises(TraceReadError, match="holding no track-event slice .*counter values"):
        load(str(path))
    assert main(["analyze", str(path)]) == 2
    err = capsys.readouterr().err
    assert "internal error" not in err and "empty.pftrace" in err
