"""Scenario writers: nsys exports carry the real exports' table layouts; Kineto JSON carries exact ns."""

from __future__ import annotations

import decimal
import json
import os
import sqlite3

import pytest
from conftest import SHARED_TRACES, needs_shared
from tracesynth.kineto_writer import write_kineto
from tracesynth.nsys_example import example_scenario
from tracesynth.nsys_writer import global_tid, short_name, write_nsys

# Real exports whose layouts each generation copies (3.25.0 and 3.24.14 for 2026; 2.9.1 for 2022).
REAL = {"2026": ["nsys/nsysai_h100_2gpu_window_2026.sqlite", "nsys/nsysai_tiny_rtx3080_2026.sqlite"],
        "2022": ["nsys/pipit_saxpy_mpi_a100_2022.sqlite"]}
# Columns a downstream tool added to the pipit file after export (trace-formats.md §C).
ADDED_AFTER_EXPORT = {"name"}


def _layout(path, table: str) -> list[tuple] | None:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = conn.execute(f"PRAGMA table_info({table})").fetchall()
    conn.close()
    return [(r[1], r[2], r[3], r[5]) for r in rows if r[1] not in ADDED_AFTER_EXPORT] or None


@needs_shared
@pytest.mark.parametrize("schema", ["2026", "2022"])
def test_nsys_tables_have_the_real_column_layout(tmp_path, schema):
    path = tmp_path / "gen.sqlite"
    write_nsys(example_scenario(), path, schema=schema)
    conn = sqlite3.connect(path)
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    conn.close()
    compared = set()
    for table in tables:
        for real in REAL[schema]:
            want = _layout(SHARED_TRACES / real, table)
            if want is not None:
                assert _layout(path, table) == want, f"{table} differs from {real}"
                compared.add(table)
                break
    must = {"StringIds", "PROCESSES", "ThreadNames", "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME",
            "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
            "NVTX_EVENTS", "TARGET_INFO_GPU", "TARGET_INFO_SESSION_START_TIME", "TARGET_INFO_CUDA_STREAM"}
    must |= {"META_DATA_EXPORT", "TARGET_INFO_CUDA_DEVICE", "ENUM_CUDA_MEMCPY_OPER", "ENUM_NSYS_EVENT_TYPE"} \
        if schema == "2026" else {"EXPORT_META_DATA", "OSRT_API"}
    assert must <= compared


@pytest.mark.parametrize("schema,table,version", [("2026", "META_DATA_EXPORT", "3.25.0"),
                                                  ("2022", "EXPORT_META_DATA", "2.9.1")])
def test_nsys_identification_and_ids(tmp_path, schema, table, version):
    sc = example_scenario(n_ranks=2, steps=1)
    path = tmp_path / "gen.sqlite"
    write_nsys(sc, path, schema=schema)
    assert [p for p in os.listdir(tmp_path)] == ["gen.sqlite"]  # atomic: no temp file left
    conn = sqlite3.connect(path)
    meta = dict(conn.execute(f"SELECT name, value FROM {table}"))
    assert meta["EXPORT_SCHEMA_VERSION"] == version
    enums = conn.execute("SELECT COUNT(*) FROM sqlite_master WHERE name LIKE 'ENUM_%'").fetchone()[0]
    assert (enums > 0) == (schema == "2026")
    gtids = {r[0] for r in conn.execute("SELECT DISTINCT globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME")}
    assert gtids == {global_tid(r.pid, r.pid) for r in sc.ranks}
    assert {(g >> 24) & 0xFFFFFF for g in gtids} == {r.pid for r in sc.ranks}
    names = {r[0] for r in conn.execute("SELECT s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
                                        "JOIN StringIds s ON s.id = r.nameId")}
    assert "cudaLaunchKernel_v7000" in names and "cudaStreamSynchronize_v3020" in names
    types = {r[0] for r in conn.execute("SELECT DISTINCT eventType FROM NVTX_EVENTS")}
    assert types == {59}
    utc = conn.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()[0]
    assert utc == sc.origin_epoch_ns
    conn.close()
    with pytest.raises(ValueError, match="unknown nsys schema"):
        write_nsys(sc, tmp_path / "x.sqlite", schema="2019")


def test_short_name_strips_return_type_templates_and_args():
    assert short_name("void at::native::k<4, f<float> >(int, float*)") == "at::native::k"
    assert short_name("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)") == "ncclDevKernel_SendRecv"
    assert short_name("sm90_xmma_gemm") == "sm90_xmma_gemm"


def _events(path):
    doc = json.loads(open(path).read(), parse_float=decimal.Decimal)
    return doc, doc["traceEvents"]


def test_kineto_2024_exact_ns_and_base(tmp_path):
    sc = example_scenario(n_ranks=2, steps=2)
    paths = write_kineto(sc, tmp_path / "trace.json")
    assert [os.path.basename(p) for p in paths] == ["trace.rank0.json", "trace.rank1.json"]
    for rk, p in zip(sc.ranks, paths, strict=True):
        doc, evs = _events(p)
        assert doc["baseTimeNanoseconds"] == sc.origin_epoch_ns
        assert doc["distributedInfo"] == {"backend": "nccl", "rank": rk.rank, "world_size": 2}
        kern = [e for e in evs if e.get("cat") == "kernel" and not e["name"].startswith("CUDA graph")]
        got = sorted((int(e["ts"] * 1000), int((e["ts"] + e["dur"]) * 1000), e["pid"], e["tid"]) for e in kern)
        want = sorted((k.start_ns, k.end_ns, k.device, k.stream) for k in rk.kernels)
        assert got == want
        # the text itself has exactly three fraction digits (Kineto's fmtTs)
        raw = open(p).read()
        assert f'"ts": {rk.kernels[0].start_ns // 1000}.{rk.kernels[0].start_ns % 1000:03d}' in raw
        flows_s = {e["id"] for e in evs if e.get("ph") == "s"}
        flows_f = {e["id"] for e in evs if e.get("ph") == "f"}
        launched = {k.correlation for k in rk.kernels} | {c.correlation for c in rk.copies} | \
            {g.correlation for g in rk.graphs}
        assert flows_s == flows_f == launched
        cats = {e.get("cat") for e in evs}
        assert {"cpu_op", "user_annotation", "cuda_runtime", "kernel", "gpu_memcpy", "gpu_memset", "cuda_sync",
                "ac2g", "Trace"} <= cats


def test_kineto_int_us_generation_and_one_rank(tmp_path):
    sc = example_scenario(n_ranks=2, steps=1)
    (p,) = write_kineto(sc, tmp_path / "r{rank}.json", generation="int-us", rank=1)
    assert os.path.basename(p) == "r{rank}.json"  # one rank chosen: the path is used as given
    doc, evs = _events(p)
    assert "baseTimeNanoseconds" not in doc
    k0 = min(sc.ranks[1].kernels, key=lambda k: k.start_ns)
    first = min((e for e in evs if e.get("cat") == "kernel"), key=lambda e: e["ts"])
    assert isinstance(first["ts"], int) and first["ts"] == (sc.origin_epoch_ns + k0.start_ns) // 1000
    assert first["dur"] == (sc.origin_epoch_ns + k0.end_ns) // 1000 - first["ts"]
    both = write_kineto(sc, tmp_path / "r{rank}.json", generation="int-us")
    assert [os.path.basename(x) for x in both] == ["r0.json", "r1.json"]
    with pytest.raises(ValueError, match="generation"):
        write_kineto(sc, tmp_path / "x.json", generation="2019")
