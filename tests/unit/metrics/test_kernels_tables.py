"""``traceread kernels``' tables (per op, per module, ranges, copies, host API, collectives, memory
bandwidth) against an independent read of each file: plain json/gzip for Kineto, sqlite3 for Nsight
Systems, never traceread's loader. Durations are read as exact decimals and converted to ns as the
file wrote them."""

from __future__ import annotations

import gzip
import json
import re
import sqlite3
import statistics
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest
from conftest import FIXTURES, SHARED_TRACES, needs_shared

import traceread
from traceread.cli import main
from traceread.metrics.mem_bandwidth import PARTIAL_READ
from traceread.metrics.op_time import NO_LAUNCH, NO_OP
from traceread.metrics.tables import TABLES, kernel_tables
from traceread.render.notes import text_or_empty

RESNET = FIXTURES / "kineto2021_resnet50_bare_list.pt.trace.json.gz"
NCCL = FIXTURES / "hta_nccl_a100_rank0of2.json.gz"
SGLANG = FIXTURES / "tracelens_sglang_decode_mi300x.json.gz"
H100 = SHARED_TRACES / "nsys" / "nsysai_h100_2gpu_window_2026.sqlite"
NVFUSER = SHARED_TRACES / "nsys" / "nvfuser_h100_2024.sqlite"
BERT = SHARED_TRACES / "kineto" / "tracelens_bert_small_h100.json.gz"
_STEP = re.compile(r"^ProfilerStep#\d+$")


# --- an independent reader of Kineto JSON ---------------------------------------------------------
def _events(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as fh:
        doc = json.load(fh, parse_float=Decimal)
    events = doc if isinstance(doc, list) else doc["traceEvents"]
    return [e for e in events if e.get("ph") == "X"]


def _ns(x) -> int:
    return int(Decimal(x) * 1000)


def _cat(e: dict) -> str:
    return str(e.get("cat", "")).lower()


def _kernels(events: list[dict]) -> list[dict]:
    return [e for e in events if _cat(e) == "kernel"]


def _dur(e: dict) -> int:
    return max(_ns(e.get("dur", 0)), 0)


def _owners(events: list[dict]) -> list[tuple[dict, dict | None, dict | None]]:
    """Per kernel: (kernel, its launch call by correlation, the innermost op around the launch on the launch's
    thread): a sweep with a stack of open ops per thread."""
    launches = {e["args"]["correlation"]: e for e in events
                if _cat(e) in ("runtime", "cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    ops_by_thread: dict = defaultdict(list)
    for e in events:
        if _cat(e) in ("cpu_op", "operator"):
            ops_by_thread[(e["pid"], str(e["tid"]))].append(e)
    kernels = _kernels(events)
    linked = [(k, launches.get(k.get("args", {}).get("correlation"))) for k in kernels]
    queries: dict = defaultdict(list)
    for i, (_k, lc) in enumerate(linked):
        if lc is not None:
            queries[(lc["pid"], str(lc["tid"]))].append((_ns(lc["ts"]), i))
    owner: dict[int, dict] = {}
    for thread, qs in queries.items():
        ops = sorted(ops_by_thread.get(thread, []), key=lambda o: (_ns(o["ts"]), -_dur(o)))
        stack: list[dict] = []
        j = 0
        for t, i in sorted(qs):
            while j < len(ops) and _ns(ops[j]["ts"]) <= t:
                while stack and _ns(stack[-1]["ts"]) + _dur(stack[-1]) <= _ns(ops[j]["ts"]):
                    stack.pop()
                stack.append(ops[j])
                j += 1
            while stack and _ns(stack[-1]["ts"]) + _dur(stack[-1]) <= t:
                stack.pop()
            if stack:
                owner[i] = stack[-1]
    return [(k, lc, owner.get(i)) for i, (k, lc) in enumerate(linked)]


# --- per-op GPU time -------------------------------------------------------------------------------
@pytest.mark.parametrize("path", [RESNET, NCCL, SGLANG], ids=lambda p: p.name)
def test_op_table_matches_an_independent_attribution(path: Path) -> None:
    events = _events(path)
    want_n: Counter = Counter()
    want_ns: Counter = Counter()
    for k, lc, op in _owners(events):
        key = op["name"] if op is not None else (NO_OP if lc is not None else NO_LAUNCH)
        want_n[key] += 1
        want_ns[key] += _dur(k)
    t = kernel_tables(traceread.load(path)).frames["ops"]
    got = t.set_index("op")
    assert dict(got["kernels"]) == dict(want_n)
    for name, ns in want_ns.items():
        assert int(got.loc[name, "total_ns"]) == pytest.approx(ns, abs=want_n[name])  # <= 1 ns rounding a kernel
    # the rows sum to the kernel total (of the file, and of the kernel table)
    total = sum(_dur(k) for k in _kernels(events))
    assert int(t["total_ns"].sum()) == pytest.approx(total, abs=len(_kernels(events)))
    assert t["share"].sum() == pytest.approx(1.0)


def test_op_table_names_kernels_outside_any_op() -> None:
    t = kernel_tables(traceread.load(RESNET)).frames["ops"].set_index("op")
    assert NO_OP in t.index and int(t.loc[NO_OP, "kernels"]) > 0  # the optimizer's kernels in a 2021 trace


# --- per module ------------------------------------------------------------------------------------
def _module_gpu(events: list[dict]) -> tuple[Counter, int]:
    """GPU ns per module name (inclusive: kernels launched inside its frame on its thread), and the kernel total."""
    launched = defaultdict(list)
    for k, lc, _op in _owners(events):
        if lc is not None:
            launched[(lc["pid"], str(lc["tid"]))].append((_ns(lc["ts"]), _dur(k)))
    out: Counter = Counter()
    for e in events:
        if _cat(e) == "python_function" and str(e["name"]).startswith("nn.Module: "):
            lo, hi = _ns(e["ts"]), _ns(e["ts"]) + _dur(e)
            out[e["name"][len("nn.Module: "):]] += sum(d for t, d in launched[(e["pid"], str(e["tid"]))] if lo <= t < hi)
    return out, sum(_dur(k) for k in _kernels(events))


@pytest.mark.parametrize("path", [SGLANG, pytest.param(BERT, marks=needs_shared)], ids=lambda p: p.name)
def test_module_table_matches_the_module_frames(path: Path) -> None:
    events = _events(path)
    want, total = _module_gpu(events)
    t = kernel_tables(traceread.load(path)).frames["modules"]
    got = t[t["module"] != "(no module)"].groupby("module")["gpu_ns"].sum()
    assert set(got.index) == set(want)
    for name, ns in want.items():
        assert int(got[name]) == pytest.approx(ns, abs=max(1, len(_kernels(events))))
    assert int(t["self_ns"].sum()) == pytest.approx(total, abs=len(_kernels(events)))  # self time sums to the total


def test_module_table_is_empty_with_a_reason_when_not_recorded() -> None:
    tables = kernel_tables(traceread.load(RESNET))
    assert tables.frames["modules"].empty
    assert "no nn.Module hierarchy" in text_or_empty(tables.notes["modules"])
    # the API hands the frames out alone: the worded note travels with each
    assert traceread.tables(RESNET)["modules"].attrs["note"] == text_or_empty(tables.notes["modules"])


# --- annotation ranges -----------------------------------------------------------------------------
def test_range_summary_matches_the_kineto_annotations() -> None:
    events = _events(NCCL)
    by: dict[str, list[int]] = defaultdict(list)
    for e in events:
        if _cat(e) == "user_annotation":
            by["ProfilerStep#*" if _STEP.match(e["name"]) else e["name"]].append(_dur(e))
    t = kernel_tables(traceread.load(NCCL)).frames["ranges"].set_index("range")
    assert set(t.index) == set(by)
    for name, durs in by.items():
        row = t.loc[name]
        assert (int(row["count"]), int(row["min_ns"]), int(row["max_ns"])) == (len(durs), min(durs), max(durs))
        assert int(row["total_ns"]) == sum(durs)
        assert float(row["median_ns"]) == pytest.approx(statistics.median(durs))


@needs_shared
def test_range_summary_matches_the_nvtx_table() -> None:
    con = sqlite3.connect(f"file:{NVFUSER}?mode=ro", uri=True)
    try:
        rows = con.execute("SELECT COALESCE(text, s.value), n.end - n.start FROM NVTX_EVENTS n "
                           "LEFT JOIN StringIds s ON s.id = n.textId WHERE eventType = 59 AND n.end IS NOT NULL").fetchall()
    finally:
        con.close()
    by: dict[str, list[int]] = defaultdict(list)
    for name, d in rows:
        by[name].append(d)
    t = kernel_tables(traceread.load(NVFUSER)).frames["ranges"].set_index("range")
    assert int(t["count"].sum()) == len(rows) > 0
    for name, durs in by.items():
        row = t.loc[name]
        assert (int(row["count"]), int(row["total_ns"]), int(row["max_ns"])) == (len(durs), sum(durs), max(durs))
        assert float(row["p90_ns"]) == pytest.approx(statistics.quantiles(durs, n=10, method="inclusive")[8]
                                                     if len(durs) > 1 else durs[0])


# --- copies ----------------------------------------------------------------------------------------
_KIND = {"HtoD": "H2D", "DtoH": "D2H", "DtoD": "D2D", "PtoP": "P2P", "HtoH": "H2H"}
_MEMCPY_NAME = re.compile(r"^Memcpy (\w+) \((\w+) -> (\w+)\)")


@pytest.mark.parametrize("path", [RESNET, NCCL], ids=lambda p: p.name)
def test_copy_summary_matches_the_kineto_copies(path: Path) -> None:
    want: dict[tuple[int, str, str], list[int]] = defaultdict(lambda: [0, 0, 0])
    for e in _events(path):
        cat = _cat(e)
        if cat in ("memcpy", "gpu_memcpy"):
            kind, src, dst = _MEMCPY_NAME.match(e["name"]).groups()
            host = src if src in ("Pinned", "Pageable") else dst if dst in ("Pinned", "Pageable") else ""
            key = (int(e["args"]["device"]), _KIND.get(kind, kind), host)
        elif cat in ("memset", "gpu_memset"):
            key = (int(e["args"]["device"]), "memset", "")
        else:
            continue
        w = want[key]
        w[0] += 1
        w[1] += int(e["args"]["bytes"])
        w[2] += _dur(e)
    t = kernel_tables(traceread.load(path)).frames["copies"]
    got = {(r.device, r.kind, r.host_memory): [r.count, r.bytes, r.total_ns] for r in t.itertuples()}
    assert got.keys() == want.keys()
    for key, (n, nbytes, ns) in want.items():
        assert got[key][:2] == [n, nbytes]
        assert got[key][2] == pytest.approx(ns, abs=n)
        row = t[(t["device"] == key[0]) & (t["kind"] == key[1]) & (t["host_memory"] == key[2])].iloc[0]
        assert row["gbps"] == pytest.approx(nbytes / ns, rel=1e-3)  # bytes per ns = GB/s


@needs_shared
def test_copy_summary_matches_the_nsys_copies() -> None:
    con = sqlite3.connect(f"file:{H100}?mode=ro", uri=True)
    try:
        kinds = dict(con.execute("SELECT id, name FROM ENUM_CUDA_MEMCPY_OPER").fetchall())
        mem = dict(con.execute("SELECT id, label FROM ENUM_CUDA_MEM_KIND").fetchall())
        copies = con.execute("SELECT deviceId, copyKind, srcKind, dstKind, COUNT(*), SUM(bytes), SUM(end - start) "
                             "FROM CUPTI_ACTIVITY_KIND_MEMCPY GROUP BY 1, 2, 3, 4").fetchall()
        memset = con.execute("SELECT deviceId, COUNT(*), SUM(bytes), SUM(end - start) FROM CUPTI_ACTIVITY_KIND_MEMSET "
                             "GROUP BY 1").fetchall()
    finally:
        con.close()
    want: dict[tuple[int, str, str], list[int]] = defaultdict(lambda: [0, 0, 0])
    for dev, ck, sk, dk, n, nbytes, ns in copies:
        kind = {"HTOD": "H2D", "DTOH": "D2H", "DTOD": "D2D", "PTOP": "P2P", "HTOH": "H2H"}[kinds[ck].rsplit("_", 1)[1]]
        host = next((mem[k] for k in (sk, dk) if mem[k] in ("Pinned", "Pageable")), "")
        w = want[(dev, kind, host)]
        w[0], w[1], w[2] = w[0] + n, w[1] + nbytes, w[2] + ns
    for dev, n, nbytes, ns in memset:
        want[(dev, "memset", "")] = [n, nbytes, ns]
    t = kernel_tables(traceread.load(H100)).frames["copies"]
    got = {(r.device, r.kind, r.host_memory): [r.count, r.bytes, r.total_ns] for r in t.itertuples()}
    assert got == dict(want)
    pinned = t[(t["kind"] == "H2D") & (t["host_memory"] == "Pinned")]
    assert len(pinned) == 2  # one row per GPU of the export
    for r in pinned.itertuples():  # ~25 GB of pinned host-to-device copies each, with their bytes and GB/s
        nbytes, ns = want[(r.device, "H2D", "Pinned")][1:]
        assert r.bytes == nbytes > 25e9
        assert r.gbps == pytest.approx(nbytes / ns)


# --- host API --------------------------------------------------------------------------------------
def test_host_api_summary_matches_the_kineto_runtime_calls() -> None:
    by: dict[str, list[int]] = defaultdict(list)
    for e in _events(NCCL):
        if _cat(e) in ("cuda_runtime", "cuda_driver", "runtime"):
            by[e["name"]].append(_dur(e))
    t = kernel_tables(traceread.load(NCCL)).frames["host_api"].set_index("api")
    assert set(t.index) == set(by)
    total = sum(sum(d) for d in by.values())
    for name, durs in by.items():
        row = t.loc[name]
        assert (int(row["count"]), int(row["total_ns"]), int(row["min_ns"]), int(row["max_ns"])) == \
            (len(durs), sum(durs), min(durs), max(durs))
        if len(durs) > 1:  # numpy's linear percentile is statistics' inclusive method
            q = statistics.quantiles(durs, n=100, method="inclusive")
            assert (float(row["p90_ns"]), float(row["p99_ns"])) == (pytest.approx(q[89]), pytest.approx(q[98]))
        assert float(row["share"]) == pytest.approx(sum(durs) / total)
    assert t.loc["cudaLaunchKernel", "role"] == "launch"


@needs_shared
def test_host_api_summary_matches_the_nsys_runtime_table() -> None:
    con = sqlite3.connect(f"file:{H100}?mode=ro", uri=True)
    try:
        rows = con.execute("SELECT s.value, COUNT(*), SUM(r.end - r.start), MIN(r.end - r.start), "
                           "MAX(r.end - r.start) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s "
                           "ON s.id = r.nameId GROUP BY s.value").fetchall()
    finally:
        con.close()
    t = kernel_tables(traceread.load(H100)).frames["host_api"]
    # nsys writes versioned names (cudaLaunchKernel_v7000); the table names the API without the version
    want: dict[str, list[int]] = {}
    for name, n, ns, lo, hi in rows:
        w = want.setdefault(re.sub(r"_v\d+$", "", name), [0, 0, lo, hi])
        w[:] = [w[0] + n, w[1] + ns, min(w[2], lo), max(w[3], hi)]
    got = {r.api: [r.count, r.total_ns, r.min_ns, r.max_ns] for r in t.itertuples()}
    assert got == want


# --- collectives -----------------------------------------------------------------------------------
def test_kernels_json_has_collectives_and_every_table(tmp_path: Path) -> None:
    out = tmp_path / "k.json"
    assert main(["kernels", str(NCCL), "--json", str(out), "--csv", str(tmp_path / "csv")]) == 0
    doc = json.loads(out.read_text())
    assert list(doc["tables"]) == list(TABLES)
    nccl = sum(1 for k in _kernels(_events(NCCL)) if "nccl" in k["name"].lower())
    coll = doc["tables"]["collectives"]["rows"]
    assert nccl > 0 and sum(r["count"] for r in coll) == nccl
    assert all(r["busbw_gbps"] is None or r["busbw_gbps"] > 0 for r in coll)
    assert any(r["busbw_gbps"] for r in coll)
    # one CSV per table, the same rows as the JSON
    for name in TABLES:
        csv = pd.read_csv(tmp_path / "csv" / f"{name}.csv", keep_default_na=False)
        assert len(csv) == len(doc["tables"][name]["rows"])
    copies = pd.read_csv(tmp_path / "csv" / "copies.csv")
    assert copies["bytes"].tolist() == [r["bytes"] for r in doc["tables"]["copies"]["rows"]]


def test_kernels_csv_into_a_file_is_a_usage_error(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    assert main(["kernels", str(NCCL), "--csv", str(f)]) == 2
    assert f.read_text() == "x"


# --- memory bandwidth ------------------------------------------------------------------------------
def _input_bytes(op: dict) -> int | None:
    size = {"float": 4, "c10::bfloat16": 2, "c10::half": 2, "long int": 8, "int": 4, "bool": 1, "long": 8,
            "double": 8, "unsigned char": 1, "bfloat16": 2, "half": 2}
    dims, types = op.get("args", {}).get("Input Dims"), op.get("args", {}).get("Input type")
    if not dims or not types:
        return None
    total, known = 0, False
    for d, ty in zip(dims, types, strict=False):
        if ty.lower() in size and isinstance(d, list) and all(isinstance(x, int) for x in d):
            n = 1
            for x in d:
                n *= x
            total += n * size[ty.lower()]
            known = True
    return total if known else None


@pytest.mark.parametrize("path", [SGLANG, pytest.param(BERT, marks=needs_shared)], ids=lambda p: p.name)
def test_mem_bandwidth_bytes_are_the_launching_ops_inputs(path: Path) -> None:
    owners = _owners(_events(path))
    per_op = Counter(id(op) for _k, _lc, op in owners if op is not None)
    t = kernel_tables(traceread.load(path)).frames["mem_bandwidth"]
    assert not t.empty
    for r in t.itertuples():
        n, nbytes, ns = 0, 0, 0
        for k, _lc, op in owners:
            if k["name"] != r.name or op is None or per_op[id(op)] != 1 or PARTIAL_READ.search(op["name"]):
                continue
            b = _input_bytes(op)
            if b is not None:
                n, nbytes, ns = n + 1, nbytes + b, ns + _dur(k)
        assert (r.kernels, r.input_bytes) == (n, nbytes)
        assert r.total_ns == pytest.approx(ns, abs=n)
        assert r.tbs == pytest.approx(nbytes / ns / 1e3)


def test_mem_bandwidth_says_why_when_no_bytes_are_recorded() -> None:
    tables = kernel_tables(traceread.load(NCCL))  # no record_shapes
    assert tables.frames["mem_bandwidth"].empty
    assert "no recorded bytes" in text_or_empty(tables.notes["mem_bandwidth"])


def test_mem_bandwidth_note_has_no_share_when_the_kernels_last_no_time() -> None:
    # an export whose memory-bound kernels end where they start (the loaders clamp an end before its start)
    from scoreboard_frames import kernel, launch, make_trace

    rows = [launch("cudaLaunchKernel", 0, 5, corr=1), launch("cudaLaunchKernel", 10, 15, corr=2),
            kernel("vectorized_elementwise_kernel<FillFunctor>", 20, 20, correlation=1),
            kernel("reduce_kernel<ReduceOp>", 30, 30, correlation=2)]
    tables = kernel_tables(make_trace(rows))
    assert tables.frames["mem_bandwidth"].empty
    words = text_or_empty(tables.notes["mem_bandwidth"])
    assert words.startswith("2 of 2 memory-bound kernels have no recorded bytes") and "GPU time" not in words


@needs_shared
def test_nsys_op_table_sums_to_the_kernel_table_and_guesses_no_bytes() -> None:
    con = sqlite3.connect(f"file:{H100}?mode=ro", uri=True)
    try:
        n, total = con.execute("SELECT COUNT(*), SUM(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
        # correlation ids are per process: (process, correlation), the process in globalTid's/globalPid's upper bits
        runtime = set(con.execute("SELECT globalTid >> 24, correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME"))
        unlinked = sum(1 for key in con.execute("SELECT globalPid >> 24, correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL")
                       if key not in runtime)
    finally:
        con.close()
    tables = kernel_tables(traceread.load(H100))
    ops = tables.frames["ops"].set_index("op")
    assert (int(ops["kernels"].sum()), int(ops["total_ns"].sum())) == (n, total)
    # kernels whose launch call the export's window cut are their own row, not an op's
    assert int(ops.loc[NO_LAUNCH, "kernels"]) == unlinked > 0
    assert "aten::mm" in ops.index
    assert tables.frames["mem_bandwidth"].empty and "no recorded bytes" in text_or_empty(tables.notes["mem_bandwidth"])


# --- hand-built traces: the rules the tables follow --------------------------------------------------
def test_op_table_takes_the_innermost_op_on_the_launching_thread() -> None:
    from scoreboard_frames import ev, kernel, launch, make_trace

    from traceread import schema

    rows = [
        ev(schema.LANE_CPU_THREAD, "aten::linear", 0, 100),
        ev(schema.LANE_CPU_THREAD, "aten::addmm", 10, 50),
        launch("cudaLaunchKernel", 20, 25, corr=1),  # inside addmm (inside linear): addmm's
        launch("cudaLaunchKernel", 60, 65, corr=2),  # inside linear only
        ev(schema.LANE_CPU_THREAD, "aten::mul", 200, 300, tid=2),  # another thread's op around launch 3
        launch("cudaLaunchKernel", 210, 215, corr=3),  # thread 1: no op around it
        kernel("k1", 30, 40, correlation=1), kernel("k2", 70, 90, correlation=2),
        kernel("k3", 220, 250, correlation=3), kernel("k4", 260, 265),  # k4: no launch call
    ]
    t = kernel_tables(make_trace(rows)).frames["ops"].set_index("op")
    assert dict(t["total_ns"]) == {"aten::addmm": 10, "aten::linear": 20, NO_OP: 30, NO_LAUNCH: 5}
    assert dict(t["calls"]) == {"aten::addmm": 1, "aten::linear": 1, NO_OP: 0, NO_LAUNCH: 0}


def test_module_table_counts_inclusive_and_self_time() -> None:
    from scoreboard_frames import ev, kernel, launch, make_trace

    from traceread import schema

    py = {"category": schema.CAT_PYTHON}
    rows = [
        ev(schema.LANE_CPU_THREAD, "nn.Module: Net_0", 0, 100, **py),
        ev(schema.LANE_CPU_THREAD, "nn.Module: Linear_0", 10, 40, **py),
        launch("cudaLaunchKernel", 20, 25, corr=1), launch("cudaLaunchKernel", 50, 55, corr=2),
        launch("cudaLaunchKernel", 150, 155, corr=3),  # outside every module (backward)
        kernel("k1", 30, 40, correlation=1), kernel("k2", 60, 80, correlation=2), kernel("k3", 160, 200, correlation=3),
    ]
    t = kernel_tables(make_trace(rows)).frames["modules"].set_index("module")
    assert dict(t["gpu_ns"]) == {"Net_0": 30, "Linear_0": 10, "(no module)": 40}
    assert dict(t["self_ns"]) == {"Net_0": 20, "Linear_0": 10, "(no module)": 40}
    assert dict(t["depth"]) == {"Net_0": 0, "Linear_0": 1, "(no module)": 0}


def test_duration_statistics_are_numpys() -> None:
    import numpy as np

    from traceread.metrics.durations import by_name

    rng = np.random.default_rng(7)
    code = rng.integers(0, 5, 1000)
    dur = rng.integers(1, 10_000, 1000)
    t = by_name(code, np.array(list("abcde"), dtype=object), dur).set_index("name")
    for i, name in enumerate("abcde"):
        d = dur[code == i]
        assert t.loc[name, "count"] == len(d) and t.loc[name, "total_ns"] == d.sum()
        assert t.loc[name, "median_ns"] == pytest.approx(np.median(d))
        assert t.loc[name, "p90_ns"] == pytest.approx(np.percentile(d, 90))
        assert t.loc[name, "p99_ns"] == pytest.approx(np.percentile(d, 99))
        assert (t.loc[name, "min_ns"], t.loc[name, "max_ns"]) == (d.min(), d.max())


def test_a_trace_without_gpu_work_gives_empty_tables_that_say_why(tmp_path: Path) -> None:
    from scoreboard_frames import ev, make_trace

    from traceread import schema
    from traceread.render.tables import render_tables, write_csv

    tables = kernel_tables(make_trace([ev(schema.LANE_CPU_THREAD, "aten::add", 0, 10)]))
    for name in ("ops", "modules", "ranges", "copies", "host_api", "collectives"):
        assert tables.frames[name].empty and text_or_empty(tables.notes[name]), name
    text = render_tables(tables)
    assert "no GPU kernels" in text and "no GPU copies" in text
    paths = write_csv(tables, str(tmp_path / "out"))
    assert [Path(p).name for p in paths] == [f"{n}.csv" for n in TABLES]
    assert (tmp_path / "out" / "copies.csv").read_text().startswith("rank,device,kind,host_memory,count,bytes")
