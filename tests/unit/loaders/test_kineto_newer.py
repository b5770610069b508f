"""Newer Kineto (2026): Stream Sync rows at ``tid = stream + 1,000,000``, job metadata and ``trace_id``,
``cuMem*`` driver calls, counter events. Small traces in Kineto's own shapes (output_json.cpp,
EnvMetadata.h), each loaded with and without the compiled scanner and checked against an independent
count by stdlib ``json``."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import FIXTURES, SHARED_TRACES, needs_shared, shared_kineto
from test_kineto_scanner import assert_same_trace

from traceread import schema
from traceread.cli import main
from traceread.host_calls import DEVICE_ALLOCATOR, MEMORY, SYNC, calls_matching
from traceread.loaders.kineto import chunks, load_kineto, scan
from traceread.loaders.kineto.source import Source
from traceread.ranks import group_jobs
from traceread.ranks.identity import identify
from traceread.trace import job_digest

OFFSET = 1_000_000  # Kineto's kSyncStreamTidOffset
BASE_NS = 1_750_000_000_000_000_000
JOB = {"PT_PROFILER_JOB_NAME": "llama_pretrain", "PT_PROFILER_JOB_VERSION": "3", "PT_PROFILER_JOB_ATTEMPT_INDEX": "1"}
ALLOC_CALLS = ("cuMemAddressReserve", "cuMemCreate", "cuMemMap", "cuMemSetAccess", "cuMemUnmap", "cuMemRelease",
               "cuMemAddressFree", "cuMemAlloc_v2", "cuMemFree_v2")


def _ts(us: float) -> float:
    return round(us, 3)


def newer_trace(steps: int = 3, streams: tuple[int, ...] = (7, 13), stream_arg: bool = True, counters: int = 2,
                job: dict[str, str] | None = None, trace_id: str | None = "7f3a9c", rank: int | None = 0,
                world: int = 2, t0_us: float = 1000.0) -> dict[str, Any]:
    """A Kineto 2026 trace: per step, kernels on ``streams``, a cudaStreamSynchronize on each stream with
    its CUPTI Stream Sync record on the stream's sync row, cuMem* driver calls (expandable segments),
    ``counters`` counter samples, flows; job metadata and ``trace_id`` at the top."""
    ev: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "ts": "0.000", "pid": 0, "tid": 0, "args": {"name": "python3"}},
        {"ph": "M", "name": "process_labels", "ts": "0.000", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}},
    ]
    for s in streams:
        ev.append({"ph": "M", "name": "thread_name", "ts": "0.000", "pid": 0, "tid": s, "args": {"name": f"stream {s} "}})
    t, corr, named = t0_us, 1000, set()
    for step in range(steps):
        ev.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 4242, "tid": 4242,
                   "ts": _ts(t), "dur": 900.0, "args": {"External id": corr}})
        k = 0
        for s in streams:
            for _ in range(3):
                corr += 1
                ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 4242, "tid": 4242,
                           "ts": _ts(t + 10 + k * 30), "dur": 4.0, "args": {"cbid": 211, "correlation": corr}})
                ev.append({"ph": "X", "cat": "kernel", "name": "void gemm_kernel<float, 128>(float*)", "pid": 0,
                           "tid": s, "ts": _ts(t + 16 + k * 30), "dur": 25.0,
                           "args": {"External id": corr, "queued": 0, "device": 0, "context": 1, "stream": s,
                                    "correlation": corr, "registers per thread": 64, "shared memory": 0,
                                    "blocks per SM": 1.0, "warps per SM": 4.0, "grid": [4, 1, 1],
                                    "block": [128, 1, 1], "est. achieved occupancy %": 12}})
                ev.append({"ph": "s", "id": corr, "pid": 4242, "tid": 4242, "ts": _ts(t + 10 + k * 30),
                           "cat": "ac2g", "name": "ac2g"})
                ev.append({"ph": "f", "id": corr, "pid": 0, "tid": s, "ts": _ts(t + 16 + k * 30), "cat": "ac2g",
                           "name": "ac2g", "bp": "e"})
                k += 1
        for j, name in enumerate(ALLOC_CALLS):
            corr += 1
            ev.append({"ph": "X", "cat": "cuda_driver", "name": name, "pid": 4242, "tid": 4242,
                       "ts": _ts(t + 400 + j * 6), "dur": 5.0, "args": {"cbid": 300 + j, "correlation": corr}})
        for i, s in enumerate(streams):
            corr += 1
            at = t + 500 + i * 100
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": 4242, "tid": 4242,
                       "ts": _ts(at), "dur": 80.0, "args": {"cbid": 131, "correlation": corr}})
            sync_tid = s + OFFSET
            if sync_tid not in named:  # Kineto names the sync row once, before its first record
                named.add(sync_tid)
                ev.append({"name": "thread_name", "ph": "M", "ts": _ts(at + 2), "pid": 0, "tid": sync_tid,
                           "args": {"name": f"stream {s} (sync)"}})
                ev.append({"name": "thread_sort_index", "ph": "M", "ts": _ts(at + 2), "pid": 0, "tid": sync_tid,
                           "args": {"sort_index": s}})
            args: dict[str, Any] = {"External id": corr, "cuda_sync_kind": "Stream Sync", "correlation": corr,
                                    "device": 0, "context": 1}
            if stream_arg:
                args["stream"] = s
            ev.append({"ph": "X", "cat": "cuda_sync", "name": "Stream Sync", "pid": 0, "tid": sync_tid,
                       "ts": _ts(at + 2), "dur": 75.0, "args": args})
            ev.append({"ph": "f", "id": corr, "pid": 0, "tid": sync_tid, "ts": _ts(at + 2), "cat": "ac2g",
                       "name": "ac2g", "bp": "e"})
        for c in range(counters):
            ev.append({"ph": "C", "cat": "mtia_counters", "name": "hbm_used", "pid": 0, "tid": 0,
                       "ts": _ts(t + 50 + c), "args": {"bytes": 1 << 30 + c}})
        t += 1000.0
    ev.append({"ph": "i", "s": "g", "name": "Record Window End", "pid": "", "tid": "", "ts": _ts(t)})
    doc: dict[str, Any] = {"schemaVersion": 1, "deviceProperties": [
        {"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85_000_000_000, "computeMajor": 9,
         "computeMinor": 0, "numSms": 132, "warpSize": 32}]}
    if rank is not None:
        doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": world, "pg_count": 1,
                                  "pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl",
                                                 "pg_size": world, "ranks": list(range(world))}],
                                  "nccl_version": "2.27.3"}
    doc.update(job or {})
    if job:
        doc["host_name"] = "gpu-node-17"
    if trace_id is not None:
        doc["trace_id"] = trace_id
    doc.update({"displayTimeUnit": "ms", "baseTimeNanoseconds": BASE_NS, "traceEvents": ev,
                "traceName": "/tmp/libkineto_activities_4242.json"})
    return doc


def write(doc: dict[str, Any], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(doc, indent=1).encode()
    path.write_bytes(gzip.compress(text) if path.name.endswith(".gz") else text)
    return path


def independent(doc: dict[str, Any]) -> dict[str, Any]:
    """What the file holds, counted by stdlib json alone."""
    ev = doc["traceEvents"]
    syncs = [e for e in ev if e.get("ph") == "X" and e.get("name") == "Stream Sync"]
    return {
        "stream_syncs": len(syncs),
        # the stream each record synchronizes, as Kineto wrote it: the tid less the offset
        "sync_streams": sorted(e["tid"] - OFFSET for e in syncs),
        "kernel_streams": sorted({e["tid"] for e in ev if e.get("cat") == "kernel"}),
        "kernels": sum(e.get("cat") == "kernel" for e in ev),
        "counters": sum(e.get("ph") == "C" for e in ev),
        "flows": sum(e.get("ph") in ("s", "f") for e in ev),
        "alloc_calls": sum(e.get("cat") == "cuda_driver" and e["name"].startswith("cuMem") for e in ev),
    }


def _load(path: Path, monkeypatch: pytest.MonkeyPatch, scanner: bool, **kw: Any):
    if scanner:
        monkeypatch.delenv(scan.DISABLE_ENV, raising=False)
    else:
        monkeypatch.setenv(scan.DISABLE_ENV, "1")
    return load_kineto(str(path), workers=1, **kw)


SCANNER = [pytest.param(True, id="scanner", marks=pytest.mark.skipif(not scan.BUILT, reason="scanner not built")),
           pytest.param(False, id="msgspec")]


@pytest.mark.parametrize("scanner", SCANNER)
@pytest.mark.parametrize("stream_arg", [True, False], ids=["args.stream", "tid-only"])
def test_stream_sync_rows_are_syncs_of_their_stream(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    scanner: bool, stream_arg: bool) -> None:
    doc = newer_trace(stream_arg=stream_arg)
    ref = independent(doc)
    t = _load(write(doc, tmp_path / "rank0.pt.trace.json"), monkeypatch, scanner)
    ev = t.events
    sync = ev[(ev["name"] == "Stream Sync").to_numpy()]
    assert len(sync) == ref["stream_syncs"] == 6
    assert (sync["lane"] == schema.LANE_GPU_SYNC).all() and (sync["category"] == schema.CAT_SYNC).all()
    assert sorted(sync["stream"].tolist()) == ref["sync_streams"]  # 7 and 13, never 1,000,007
    assert sorted(sync["tid"].tolist()) == [s + OFFSET for s in ref["sync_streams"]]  # the file's tid kept
    gpu = ev[ev["lane"].isin(schema.GPU_LANES).to_numpy()]
    # no lane of its own: every GPU row is on a stream that runs kernels, on device 0
    assert sorted(set(gpu["stream"].tolist())) == ref["kernel_streams"]
    assert set(gpu["device"].tolist()) == {0}
    assert int((ev["category"] == schema.CAT_KERNEL).sum()) == ref["kernels"]
    assert [d.id for d in t.meta.devices if d.used] == [0]
    assert t.meta.extra["stream_sync_rows"] == ref["stream_syncs"]
    assert t.meta.extra["thread_names"]["0:1000007"] == "stream 7 (sync)"


@pytest.mark.parametrize("scanner", SCANNER)
def test_counters_are_counted_not_dropped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scanner: bool) -> None:
    doc = newer_trace(counters=5)
    ref = independent(doc)
    t = _load(write(doc, tmp_path / "t.json"), monkeypatch, scanner)
    assert t.meta.extra["counter_events"] == ref["counters"] == 15
    assert t.meta.extra["non_row_events"] == ref["counters"] + ref["flows"]
    assert "mtia_counters" not in set(t.events["raw_category"].astype(str))  # samples, not rows


def test_counters_in_chunks_of_their_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Counters alone in a chunk (the file's tail, cut into many small chunks) are counted too, and
    both decoders agree on every column and count."""
    doc = newer_trace(steps=40, counters=3)
    doc["traceEvents"][-1:-1] = [{"ph": "C", "cat": "xpu_scope_profiler", "name": f"c{i}", "pid": 0, "tid": 0,
                                  "ts": 99_000.0 + i, "args": {"v": i}} for i in range(3000)]
    ref = independent(doc)
    path = write(doc, tmp_path / "t.json.gz")
    monkeypatch.setattr(chunks, "SERIAL_CHUNK", 40_000)
    loaded = [_load(path, monkeypatch, s) for s in ((True, False) if scan.BUILT else (False,))]
    for t in loaded:
        assert t.meta.extra["counter_events"] == ref["counters"] == 40 * 3 + 3000
    if len(loaded) == 2:
        assert loaded[0].meta.extra["kineto_decoder"]["scanner_chunks"] > 1
        assert_same_trace(*loaded)


def test_info_counts_counters_and_names_the_job_by_digest_only(tmp_path: Path, capsys) -> None:
    doc = newer_trace(counters=4, job=JOB)
    path = write(doc, tmp_path / "rank0.json")
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"counters        {independent(doc)['counters']} counter events" in out
    digest = job_digest({"name": "llama_pretrain", "version": "3", "attempt": "1"})
    assert f"digest {digest}" in out
    assert main(["info", "--json", "-", str(path)]) == 0
    text = capsys.readouterr().out
    info = json.loads(text)["traces"][0]
    assert info["counter_events"] == 12 and info["job_digest"] == digest
    for secret in ("llama_pretrain", "gpu-node-17"):  # environment and host values never reach output
        assert secret not in out and secret not in text
    plain = write(newer_trace(counters=0), tmp_path / "plain.json")
    assert main(["info", "--json", "-", str(plain)]) == 0
    info = json.loads(capsys.readouterr().out)["traces"][0]
    assert info["counter_events"] == 0 and info["job_digest"] == ""


@pytest.mark.parametrize("scanner", SCANNER)
def test_job_metadata_and_trace_id_in_meta(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scanner: bool) -> None:
    t = _load(write(newer_trace(job=JOB, trace_id="a1b2"), tmp_path / "t.json"), monkeypatch, scanner)
    assert t.meta.job == {"name": "llama_pretrain", "version": "3", "attempt": "1"}
    assert t.meta.trace_id == "a1b2"
    assert "host_name" not in json.dumps(t.meta.extra) and "gpu-node-17" not in repr(t.meta)
    odd = newer_trace(job={"PT_PROFILER_JOB_NAME": 17, "PT_PROFILER_JOB_VERSION": True}, trace_id=None)
    t = _load(write(odd, tmp_path / "odd.json"), monkeypatch, scanner)
    assert t.meta.job == {"name": "17"} and t.meta.trace_id is None  # a bool is no version
    t = _load(write(newer_trace(), tmp_path / "none.json"), monkeypatch, scanner)
    assert t.meta.job == {}


def test_cumem_driver_calls_are_allocator_work(tmp_path: Path) -> None:
    doc = newer_trace()
    t = load_kineto(str(write(doc, tmp_path / "t.json")), workers=1)
    driver = t.events[(t.events["category"] == schema.CAT_DRIVER).to_numpy()]
    assert int(calls_matching(driver["name"], DEVICE_ALLOCATOR).sum()) == independent(doc)["alloc_calls"] == 27
    assert int(calls_matching(driver["name"], MEMORY).sum()) == 27
    for name in ALLOC_CALLS + ("cuMemPoolTrimTo", "cuMemGetAllocationGranularity", "cuMemAllocAsync"):
        assert DEVICE_ALLOCATOR.match(name) and MEMORY.match(name), name
    for name in ("cuMemGetInfo_v2", "cuMemsetD32Async", "cuMemcpyHtoDAsync_v2", "cuModuleLoad"):
        assert not DEVICE_ALLOCATOR.match(name) and not MEMORY.match(name), name
    # only the freeing calls synchronize the device
    assert [n for n in ALLOC_CALLS if SYNC.match(n)] == ["cuMemFree_v2"]


def _identities(paths: list[Path]) -> list:
    return [i for p in paths for i in identify(load_kineto(str(p), workers=1))]


def test_job_metadata_groups_jobs_and_splits_attempts(tmp_path: Path) -> None:
    d = tmp_path / "run"
    other = {**JOB, "PT_PROFILER_JOB_NAME": "llama_finetune"}
    retry = {**JOB, "PT_PROFILER_JOB_ATTEMPT_INDEX": "2"}
    paths = [write(newer_trace(job=JOB, rank=r), d / f"a_{r}.json") for r in (0, 1)]
    # another job in the same folder, same world size and backend, same time: never blended with it
    paths += [write(newer_trace(job=other, rank=r), d / f"b_{r}.json") for r in (0, 1)]
    # the same job's next attempt, right after the first: a capture of its own
    paths += [write(newer_trace(job=retry, rank=r, t0_us=3_900.0), d / f"c_{r}.json") for r in (0, 1)]
    groups = group_jobs(_identities(paths))
    by_files = sorted(sorted(Path(p).name for p in g.paths) for g in groups)
    assert by_files == [["a_0.json", "a_1.json"], ["b_0.json", "b_1.json"], ["c_0.json", "c_1.json"]]
    same_job = [g for g in groups if Path(g.paths[0]).name[0] in "ac"]
    assert len({g.job_key for g in same_job}) == 1 and sorted(g.capture for g in same_job) == [0, 1]
    assert all(g.captures == 2 and g.ranks == (0, 1) for g in same_job)
    digest = job_digest({"name": "llama_pretrain", "version": "3"})
    text = json.dumps([g.to_dict() for g in groups])
    assert f"job {digest}" in text and "llama" not in text  # the digest names it, the value never
    # without job metadata the first and second files are one job (the windows overlap)
    plain = [write(newer_trace(rank=r), tmp_path / "plain" / f"x_{r}.json") for r in (0, 1)]
    plain += [write(newer_trace(rank=r), tmp_path / "plain" / f"y_{r}.json") for r in (0, 1)]
    [g] = group_jobs(_identities(plain))
    assert len(g.members) == 4 and g.duplicate_ranks


def test_rank_only_distributed_info_groups_by_the_named_job(tmp_path: Path) -> None:
    paths = []
    for r in (0, 1):
        doc = newer_trace(job=JOB, rank=r)
        doc["distributedInfo"] = {"rank": r}
        paths.append(write(doc, tmp_path / f"t{r}.json"))
    groups = group_jobs(_identities(paths))
    assert len(groups) == 1 and groups[0].rule == "metadata" and groups[0].ranks == (0, 1)


def test_scan_counts_a_trace_id_once(tmp_path: Path, capsys) -> None:
    tree = tmp_path / "tree"
    doc = newer_trace(job=JOB, trace_id="cap-1")
    write(doc, tree / "run" / "rank0.pt.trace.json")
    write(doc, tree / "backup" / "rank0.pt.trace.json.gz")  # the same capture, copied and gzipped
    write(newer_trace(trace_id="cap-2", rank=1), tree / "run" / "rank1.pt.trace.json")
    # the profiler session's next capture: the same trace_id (as real sessions write it), other events
    write(newer_trace(job=JOB, trace_id="cap-1", t0_us=9_000.0), tree / "later" / "rank0.pt.trace.json")
    write(newer_trace(trace_id=None, rank=1), tree / "other" / "rank1.pt.trace.json")  # no id: analysed
    write(newer_trace(trace_id=None, rank=1), tree / "other2" / "rank1.pt.trace.json")
    out = tmp_path / "out"
    assert main(["scan", str(tree), "--out", str(out), "--workers", "1"]) == 0
    index = json.loads((out / "index.json").read_text())
    analysed = sorted(t["path"] for t in index["traces"])
    assert analysed == ["backup/rank0.pt.trace.json.gz", "later/rank0.pt.trace.json", "other/rank1.pt.trace.json",
                        "other2/rank1.pt.trace.json", "run/rank1.pt.trace.json"]
    assert index["scan"]["files_found"] == 5
    assert list(index["scan"]["skipped"].values()) == [1] and "trace_id" in next(iter(index["scan"]["skipped"]))
    printed = capsys.readouterr().out
    for f in out.rglob("*"):
        if f.is_file() and ".traceread-cache" not in f.parts and f.suffix in (".json", ".md"):
            assert b"llama_pretrain" not in f.read_bytes() and b"cap-1" not in f.read_bytes(), f
    assert "llama_pretrain" not in printed


def test_traces_without_the_new_features_load_as_before(tmp_path: Path) -> None:
    doc = newer_trace(counters=0, trace_id=None)
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("name") != "Stream Sync"]
    t = load_kineto(str(write(doc, tmp_path / "t.json")), workers=1)
    assert t.meta.extra["counter_events"] == 0 and t.meta.extra["stream_sync_rows"] == 0
    assert t.meta.job == {} and t.meta.trace_id is None
    assert np.array_equal(np.unique(t.events["stream"].to_numpy()), np.array([-1, 7, 13]))


@needs_shared
def test_real_session_ids_are_not_copies(tmp_path: Path) -> None:
    """Two distinct vLLM captures of the reference traces share one trace_id (a profiler session's id):
    both are analysed; a decompressed copy of one is the one skipped."""
    real = SHARED_TRACES / "kineto"
    replay, piecewise = real / "tracelens_vllm_graph_replay_rocm.json.gz", real / "tracelens_vllm_piecewise_exec_mi300x.json.gz"
    ids = []
    for p in (replay, piecewise):
        text = gzip.decompress(p.read_bytes())
        top = json.loads(text)
        ids.append(top["trace_id"])
        t = load_kineto(str(p), workers=1)
        assert t.meta.trace_id == top["trace_id"]
        # independent count: counter samples by stdlib json (none in these files), flows and counters
        phases = [e.get("ph") for e in top["traceEvents"]]
        assert t.meta.extra["counter_events"] == phases.count("C")
        assert t.meta.extra["non_row_events"] == sum(ph not in ("X", "i", "I", "M") for ph in phases)
    assert ids[0] == ids[1]
    tree = tmp_path / "tree"
    (tree / "a").mkdir(parents=True)
    (tree / "b").mkdir()
    (tree / "a" / replay.name).write_bytes(replay.read_bytes())
    (tree / "a" / piecewise.name).write_bytes(piecewise.read_bytes())
    (tree / "b" / "replay_copy.json").write_bytes(gzip.decompress(replay.read_bytes()))
    out = tmp_path / "out"
    assert main(["scan", str(tree), "--out", str(out), "--workers", "1"]) == 0
    index = json.loads((out / "index.json").read_text())
    assert sorted(t["path"] for t in index["traces"]) == sorted([f"a/{piecewise.name}", f"a/{replay.name}"])
    assert sum(index["scan"]["skipped"].values()) == 1


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.json*")) + shared_kineto(), ids=lambda p: p.name)
def test_peek_header_is_the_loaders_header(path: Path) -> None:
    """scan's look at a file's first bytes reads the header the loader reads (bare lists have none)."""
    src = Source(str(path), ahead=False)
    try:
        top, bare, _ = chunks.read_header(src)
    finally:
        src.close()
    assert chunks.peek_header(str(path)) == (None if bare else top)


def test_peek_header_of_other_files(tmp_path: Path) -> None:
    (tmp_path / "list.json").write_text("[1, 2]")
    (tmp_path / "cfg.json").write_text('{"lr": 0.1}')
    (tmp_path / "bad.json.gz").write_bytes(b"\x1f\x8b\x08\x00not deflate")
    long_header = {"schemaVersion": 1, "pad": "x" * (chunks.PEEK_HEADER + 10), "traceEvents": []}
    (tmp_path / "long.json").write_text(json.dumps(long_header))
    for name in ("list.json", "cfg.json", "bad.json.gz", "long.json", "missing.json"):
        assert chunks.peek_header(str(tmp_path / name)) is None, name
    doc = newer_trace(trace_id="z9")
    doc["traceEvents"] = doc.pop("traceEvents")  # the id before the array, as Kineto writes it
    assert chunks.peek_header(str(write(doc, tmp_path / "t.json.gz")))["trace_id"] == "z9"
