"""Nsight Systems loader: real exports against independent sqlite3 counts, generated exports against
the scenario they were written from, and the error paths (not nsys, .nsys-rep with/without nsys)."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sqlite3
import stat

import numpy as np
import pandas as pd
import pytest
from conftest import needs_shared, shared_nsys
from tracesynth.model import HostRange, Kernel, Rank, Scenario
from tracesynth.nsys_example import COMM_STREAM, NCCL, example_scenario
from tracesynth.nsys_writer import write_nsys

from traceread import schema as S
from traceread.errors import TraceReadError
from traceread.loaders import load
from traceread.loaders.nsys import load_nsys
from traceread.render.notes import text as words  # notes are data; the reports word them

K = "CUPTI_ACTIVITY_KIND_"


def _count(path, sql: str) -> int:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute(sql).fetchone()[0]
    except sqlite3.OperationalError:  # table not captured
        return 0
    finally:
        conn.close()


def _raw_count(ev: pd.DataFrame, raw: str) -> int:
    return int((ev["raw_category"] == raw).sum())


def _check_counts(path) -> None:
    tr = load_nsys(path)
    ev = tr.events
    S.validate(ev)
    assert _raw_count(ev, K + "KERNEL") == _count(path, f"SELECT COUNT(*) FROM {K}KERNEL")
    assert _raw_count(ev, K + "RUNTIME") == _count(
        path, f"SELECT COUNT(*) FROM {K}RUNTIME WHERE eventClass IN (0, 1)")
    assert _raw_count(ev, K + "MEMCPY") == _count(path, f"SELECT COUNT(*) FROM {K}MEMCPY")
    assert _raw_count(ev, K + "MEMSET") == _count(path, f"SELECT COUNT(*) FROM {K}MEMSET")
    assert _raw_count(ev, "NVTX_EVENTS") == _count(
        path, "SELECT COUNT(*) FROM NVTX_EVENTS WHERE eventType = 34 OR "
              "(eventType IN (59, 60) AND end IS NOT NULL)")
    # Linking: every kernel whose (process, correlation) has a runtime/driver row is linked to it.
    linked_sql = (f"SELECT COUNT(*) FROM {K}KERNEL k WHERE ((k.globalPid >> 24) & 16777215, k.correlationId) IN "
                  f"(SELECT (r.globalTid >> 24) & 16777215, r.correlationId FROM {K}RUNTIME r "
                  "WHERE r.eventClass IN (0, 1))")
    kern = ev[ev["raw_category"] == K + "KERNEL"]
    api = ev[ev["category"].isin([S.CAT_RUNTIME, S.CAT_DRIVER])]
    api_keys = pd.MultiIndex.from_arrays([api["pid"], api["correlation"]])
    linked = pd.MultiIndex.from_arrays([kern["pid"], kern["correlation"]]).isin(api_keys)
    assert int(linked.sum()) == _count(path, linked_sql)
    # names: kernels by their demangled name, API calls without the _vNNNN suffix (independent join)
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        want_k = sorted(r[0] for r in conn.execute(
            f"SELECT s.value FROM {K}KERNEL k JOIN StringIds s ON s.id = k.demangledName"))
        want_api = sorted(re.sub(r"_v\d+$", "", r[0]) for r in conn.execute(
            f"SELECT s.value FROM {K}RUNTIME r JOIN StringIds s ON s.id = r.nameId WHERE r.eventClass IN (0, 1)"))
    except sqlite3.OperationalError:
        want_k, want_api = [], []
    finally:
        conn.close()
    assert sorted(kern["name"].astype(str)) == want_k
    assert sorted(api["name"].astype(str)) == want_api
    # kernel device/stream/times exactly as stored
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    raw = pd.read_sql(f"SELECT start, end, deviceId, streamId FROM {K}KERNEL", conn) if len(kern) else None
    conn.close()
    if raw is not None:
        got = kern[["start_ns", "end_ns", "device", "stream"]].to_numpy()
        want = raw[["start", "end", "deviceId", "streamId"]].to_numpy()
        assert np.array_equal(np.sort(got, axis=0), np.sort(want, axis=0))


@needs_shared
@pytest.mark.parametrize("path", shared_nsys(), ids=lambda p: p.name)
def test_real_exports_counts_and_links(path):
    _check_counts(path)


@needs_shared
def test_real_multi_process_export_is_two_ranks():
    path = next(p for p in shared_nsys() if "2gpu" in p.name)
    tr = load_nsys(path)
    assert [r.rank for r in tr.meta.ranks] == [0, 1]
    assert len({r.pid for r in tr.meta.ranks}) == 2
    # emit_nvtx op ranges lose their ", op_id = N" suffix and sit on the CPU-thread lane as ops
    ops = tr.events[tr.events["category"] == S.CAT_CPU_OP]
    assert len(ops) > 1000
    assert not ops["name"].astype(str).str.contains("op_id = ").any()
    assert (ops["lane"] == S.LANE_CPU_THREAD).all()
    assert tr.meta.time_base == S.TIME_EPOCH and tr.meta.epoch_offset_ns > 1.7e18
    used = {(d.rank, d.id) for d in tr.meta.devices if d.used}
    assert used == {(0, 0), (1, 1)}


@needs_shared
def test_real_2022_export_reads_old_metadata_table():
    path = next(p for p in shared_nsys() if p.name.startswith("pipit_") and "2022" in p.name)
    tr = load_nsys(path)
    assert "2.9.1" in tr.meta.generation
    names = set(tr.events.loc[tr.events["category"] == S.CAT_RUNTIME, "name"].astype(str))
    assert names and not any(n.rsplit("_v", 1)[-1].isdigit() for n in names)
    assert tr.meta.devices and tr.meta.devices[0].sm_count == 108


@pytest.mark.parametrize("schema", ["2026", "2022"])
def test_generated_export_matches_scenario(tmp_path, schema):
    sc = example_scenario(n_ranks=2, steps=3)
    path = tmp_path / f"ex_{schema}.sqlite"
    write_nsys(sc, path, schema=schema)
    _check_counts(path)
    tr = load(str(path))
    ev = tr.events
    assert [r.pid for r in tr.meta.ranks] == [r.pid for r in sc.ranks]
    for rk in sc.ranks:
        mine = ev[ev["rank"] == rk.rank]
        k = mine[mine["category"] == S.CAT_KERNEL].sort_values("start_ns")
        want = sorted(rk.kernels, key=lambda x: x.start_ns)
        assert k["start_ns"].tolist() == [x.start_ns for x in want]
        assert k["end_ns"].tolist() == [x.end_ns for x in want]
        assert k["stream"].tolist() == [x.stream for x in want]
        assert k["device"].tolist() == [x.device for x in want]
        comm = k[k["lane"] == S.LANE_GPU_COMM]
        assert set(comm["name"].astype(str)) == {NCCL} and set(comm["stream"]) == {COMM_STREAM}
        counts = mine.groupby("category", observed=True).size()
        assert counts[S.CAT_GRAPH] == len(rk.graphs)
        assert counts[S.CAT_SYNC] == len(rk.syncs)
        assert counts[S.CAT_OS_RUNTIME] == len(rk.os_calls)
        assert counts[S.CAT_CPU_OP] == sum(r.is_op for r in rk.host_ranges)
        assert counts[S.CAT_USER_ANNOTATION] == sum(not r.is_op for r in rk.host_ranges)
    sync_names = set(ev.loc[ev["lane"] == S.LANE_GPU_SYNC, "name"].astype(str))
    assert sync_names == {"Stream Sync"}
    assert set(ev.loc[ev["category"] == S.CAT_CPU_OP, "name"].astype(str)) == {"aten::mm", "aten::add"}
    steps = tr.meta.steps
    assert steps.groupby("rank")["step"].apply(list).to_dict() == {0: [4, 5, 6], 1: [4, 5, 6]}
    copies = tr.side_table("copy_args").merge(ev[["name"]], left_on="row", right_index=True)
    htod = copies[copies["copy_kind"] == "HtoD"]
    assert len(htod) == 6 and set(htod["bytes"]) == {8 << 20}
    assert set(htod["name"].astype(str)) == {"Memcpy HtoD (Pinned -> Device)"}
    assert set(copies.loc[copies["copy_kind"] == "", "name"].astype(str)) == {"Memset (Device)"}
    kargs = tr.side_table("kernel_args")
    assert set(kargs["grid_x"]) == {132, 4} and set(kargs["shared_mem_bytes"]) == {4096, 0}
    assert tr.meta.time_base == S.TIME_EPOCH and tr.meta.epoch_offset_ns == sc.origin_epoch_ns
    assert [(d.rank, d.id, d.sm_count, d.used) for d in tr.meta.devices] == [(0, 0, 132, True), (1, 1, 132, True)]


def test_correlation_ids_repeat_across_processes_and_link_per_process(tmp_path):
    path = tmp_path / "ex.sqlite"
    write_nsys(example_scenario(n_ranks=2, steps=1), path)
    ev = load_nsys(path).events
    kern = ev[ev["category"] == S.CAT_KERNEL]
    api = ev[ev["category"] == S.CAT_RUNTIME]
    # same correlation ids in both processes ...
    assert set(kern.loc[kern["rank"] == 0, "correlation"]) == set(kern.loc[kern["rank"] == 1, "correlation"])
    # ... and each kernel's launch is the one in its own process, which starts before it
    m = kern.merge(api, on=["pid", "correlation"], suffixes=("", "_api"))
    assert len(m) == len(kern)
    assert (m["start_ns_api"] < m["start_ns"]).all()
    assert set(m["name_api"].astype(str)) == {"cudaLaunchKernel"}


def test_step_range_names_user_steps(tmp_path):
    ranges = [HostRange(5, f"train_step#{i}", 1000 + i * 100, 1090 + i * 100) for i in range(3)]
    ranges.append(HostRange(5, "train_step", 2000, 2050))
    kernels = [Kernel(0, 7, "gemm_kernel", 1010, 1020, 1)]
    sc = Scenario([Rank(0, 5, kernels=kernels, host_ranges=ranges)])
    path = tmp_path / "user.sqlite"
    write_nsys(sc, path)
    assert load_nsys(path).meta.steps is None
    tr = load_nsys(path, step_range="train_step")
    assert tr.meta.steps["step"].tolist() == [0, 1, 2, 3]
    assert tr.meta.steps["start_ns"].tolist() == [1000, 1100, 1200, 2000]
    warned = [words(w) for w in load_nsys(path, step_range="nope").meta.warnings]
    assert any("nope" in w for w in warned)


def test_read_only_nothing_written_beside(tmp_path):
    path = tmp_path / "ex.sqlite"
    write_nsys(example_scenario(n_ranks=1, steps=1), path)
    os.chmod(path, stat.S_IRUSR)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    before = sorted(os.listdir(tmp_path))
    load_nsys(path)
    assert sorted(os.listdir(tmp_path)) == before
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest


def test_invalid_utf8_text_is_replaced(tmp_path):
    path = tmp_path / "bad.sqlite"
    write_nsys(example_scenario(n_ranks=1, steps=1), path)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE NVTX_EVENTS SET text = CAST(x'50726f66ff' AS TEXT) WHERE text LIKE 'enumerate%'")
    conn.execute("UPDATE StringIds SET value = CAST(x'637564614c61756e63684b65726e656cff' AS TEXT) "
                 "WHERE value = 'cudaLaunchKernel_v7000'")
    conn.commit()
    conn.close()
    names = set(load_nsys(path).events["name"].astype(str))
    assert "Prof\ufffd" in names
    assert "cudaLaunchKernel\ufffd" in names


def test_missing_tables_mean_not_captured_and_session_time(tmp_path):
    path = tmp_path / "bare.sqlite"
    write_nsys(example_scenario(n_ranks=1, steps=1), path)
    conn = sqlite3.connect(path)
    for t in ("NVTX_EVENTS", "OSRT_API", "TARGET_INFO_SESSION_START_TIME", "META_DATA_EXPORT", "TARGET_INFO_GPU",
              "TARGET_INFO_CUDA_DEVICE", K + "SYNCHRONIZATION", "ENUM_CUDA_MEM_KIND", "ENUM_CUDA_MEMCPY_OPER"):
        conn.execute(f"DROP TABLE {t}")
    conn.commit()
    conn.close()
    tr = load_nsys(path)
    S.validate(tr.events)
    assert tr.meta.time_base == S.TIME_SESSION and tr.meta.epoch_offset_ns is None
    assert not tr.meta.profiler_options["nvtx"] and tr.meta.steps is None
    assert not tr.events["lane"].isin([S.LANE_CPU_ANNOTATION, S.LANE_GPU_SYNC]).any()
    assert "2021-era" in tr.meta.generation
    assert [d.name for d in tr.meta.devices] == [""]
    names = set(tr.events.loc[tr.events["lane"] == S.LANE_MEMCPY, "name"].astype(str))
    assert names == {"Memcpy HtoD (Pinned -> Device)"}  # hard-coded enum fallback


def test_2021_style_backtrace_duplicates_and_cuda_gpu_table(tmp_path):
    path = tmp_path / "old.sqlite"
    write_nsys(example_scenario(n_ranks=1, steps=1), path, schema="2022")
    conn = sqlite3.connect(path)
    conn.execute(f"INSERT INTO {K}RUNTIME SELECT start, end, 67, globalTid, correlationId, nameId, 0, 1 "
                 f"FROM {K}RUNTIME")
    conn.execute("DROP TABLE TARGET_INFO_GPU")
    conn.execute("DROP TABLE EXPORT_META_DATA")
    conn.execute("CREATE TABLE TARGET_INFO_CUDA_GPU (vmId INT, name TEXT, numMultiprocessors INT, "
                 "globalMemorySize INT, computeCapabilityMajor INT, computeCapabilityMinor INT, deviceId INT, pid INT)")
    conn.execute("INSERT INTO TARGET_INFO_CUDA_GPU VALUES (1, 'NVIDIA A100-SXM4-40GB', 108, 42297524224, 8, 0, 0, 41000)")
    conn.commit()
    conn.close()
    _check_counts(path)
    tr = load_nsys(path)
    assert (tr.events["category"] == S.CAT_RUNTIME).sum() == _count(path, f"SELECT COUNT(*) FROM {K}RUNTIME") // 2
    assert [(d.name, d.sm_count, d.compute_capability) for d in tr.meta.devices] == \
        [("NVIDIA A100-SXM4-40GB", 108, "8.0")]


def test_not_an_nsys_export(tmp_path):
    other = tmp_path / "other.sqlite"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE test (a INT)")
    conn.commit()
    conn.close()
    with pytest.raises(TraceReadError, match="not an Nsight Systems export") as err:
        load(str(other))
    assert "\n" not in str(err.value) and str(other) in str(err.value)
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not sqlite at all" * 100)
    with pytest.raises(TraceReadError, match="not a readable SQLite database"):
        load_nsys(junk)


def test_nsys_rep_without_nsys_names_the_command(tmp_path, monkeypatch):
    rep = tmp_path / "run 1.nsys-rep"
    rep.write_bytes(b"opaque")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(TraceReadError) as err:
        load(str(rep))
    msg = str(err.value)
    assert "\n" not in msg
    assert f"nsys export --type sqlite -o '{tmp_path}/run 1.sqlite' '{rep}'" in msg


def test_nsys_rep_with_nsys_on_path_is_exported_to_a_temp_file(tmp_path, monkeypatch):
    export = tmp_path / "prepared.sqlite"
    write_nsys(example_scenario(n_ranks=1, steps=1), export)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "nsys"
    # Stand-in nsys: `nsys export --type sqlite -o OUT REP` copies the prepared export to OUT.
    fake.write_text(f'#!/bin/sh\n[ "$1" = export ] || exit 3\nshift 3\ncp "{export}" "$2"\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ.get('PATH', '')}")
    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(b"opaque")
    before = sorted(os.listdir(tmp_path))
    tr = load(str(rep))
    assert tr.meta.path == str(rep) and set(tr.events["trace"].astype(str)) == {str(rep)}
    assert (tr.events["category"] == S.CAT_KERNEL).sum() == 5  # 4 compute + 1 NCCL
    assert sorted(os.listdir(tmp_path)) == before  # the temp export is gone, nothing beside the report
    fake.write_text("#!/bin/sh\necho 'cannot open report' >&2\nexit 1\n")
    with pytest.raises(TraceReadError, match="nsys export' failed \\(cannot open report\\)"):
        load(str(rep))
    assert shutil.which("nsys") == str(fake)


@needs_shared
def test_the_device_named_is_the_one_the_kernels_ran_on():
    """TARGET_INFO_GPU of a Windows export lists three rows with cuDevice 0 (the GTX 1060, the integrated
    Intel GPU, the Microsoft Basic Render Driver): the kernels' device 0 is the CUDA-capable one."""
    path = next(p for p in shared_nsys() if p.name.startswith("extrap_"))
    tr = load_nsys(path)
    used = [d for d in tr.meta.devices if d.used]
    assert [d.name for d in used] == ["GeForce GTX 1060 with Max-Q Design"]
    assert used[0].sm_count == 10
