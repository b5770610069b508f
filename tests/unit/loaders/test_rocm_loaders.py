"""ROCm profiler outputs (issue 45): rocprofv3 JSON, rocpd SQLite, RPD SQLite, rpd2tracing JSON.

Core tests run on inputs written here (tracesynth.rocm: the tools' own layouts, the published rocpd
schema); the shared samples' counts are re-derived by an independent decode (plain ``json``, ``sqlite3``
queries), never through the loader.
"""

from __future__ import annotations

import gzip
import json
import re
import sqlite3
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from conftest import SHARED_TRACES, needs_shared
from tracesynth import rocm

from traceread import schema as S
from traceread.cli import main
from traceread.errors import TraceReadError
from traceread.loaders import load, sniff
from traceread.loaders import sqlite_kind as K
from traceread.loaders.nsys import load_nsys
from traceread.render.notes import text as words  # notes are data; the reports word them

FORMATS = SHARED_TRACES / "formats"
V3_SAMPLE = FORMATS / "tracelens_rocprofv3_mi350x_ddp.json.gz"
RPD_SAMPLE = FORMATS / "rocmprofiledata_matmul.rpd"


def cli(capsys, *argv: str) -> tuple[int, str]:
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out + out.err


def lane_count(tr, lane: str) -> int:
    return int(S.lane_is(tr.events, lane).sum())


def _linked(tr) -> set[tuple[int, int]]:
    """(host row, GPU row) pairs that share a correlation id (and a pid)."""
    ev = tr.events
    host = ev[(ev["lane"] == S.LANE_CPU_THREAD) & (ev["correlation"] >= 0)]
    gpu = ev[ev["lane"].isin(S.GPU_LANES) & (ev["correlation"] >= 0)]
    m = host.reset_index().merge(gpu.reset_index(), on=["pid", "correlation"], suffixes=("_h", "_g"))
    return set(zip(m["index_h"], m["index_g"], strict=True))


# --- rocprofv3 JSON -------------------------------------------------------------------------------

@pytest.fixture
def v3_file(tmp_path: Path) -> tuple[Path, dict]:
    doc = rocm.rocprofv3_json(steps=3)
    path = tmp_path / "run.json"
    path.write_text(json.dumps(doc))
    return path, doc


def test_rocprofv3_json_frame(v3_file):
    path, doc = v3_file
    tool = doc["rocprofiler-sdk-tool"][0]
    buf = tool["buffer_records"]
    assert sniff(str(path)) == "rocprofv3-json"
    tr = load(path)
    S.validate(tr.events)
    ev = tr.events
    kinds = [a["kind"] for a in tool["strings"]["buffer_records"]]
    names = {k["kernel_id"]: k["formatted_kernel_name"] for k in tool["kernel_symbols"]}
    rccl = sum("nccl" in names[d["dispatch_info"]["kernel_id"]] for d in buf["kernel_dispatch"])
    assert lane_count(tr, S.LANE_GPU_COMM) == rccl == 3
    assert lane_count(tr, S.LANE_GPU_COMPUTE) == len(buf["kernel_dispatch"]) - rccl
    assert lane_count(tr, S.LANE_MEMCPY) == len(buf["memory_copy"])
    assert lane_count(tr, S.LANE_CPU_THREAD) == len(buf["hip_api"])
    hip_ops = tool["strings"]["buffer_records"][kinds.index("HIP_RUNTIME_API")]["operations"]
    assert Counter(ev.loc[S.lane_is(ev, S.LANE_CPU_THREAD), "name"].astype(str)) == \
        Counter(hip_ops[a["operation"]] for a in buf["hip_api"])
    # every launch call is linked to the dispatch or copy with its correlation id
    links = _linked(tr)
    assert len(links) == len(buf["hip_api"])
    for h, g in links:
        assert ev.at[h, "end_ns"] <= ev.at[g, "start_ns"]
    # streams, devices, kernel launch configuration (grid in work-items -> blocks)
    k = ev[ev["category"] == S.CAT_KERNEL]
    assert sorted(k["stream"].unique()) == sorted({d["stream_id"]["handle"] for d in buf["kernel_dispatch"]})
    assert sorted(k["device"].unique()) == [0, 1]
    ka = tr.side["kernel_args"]
    assert set(ka["grid_x"]) == {40, 1} and set(ka["block_x"]) == {256, 64}
    assert [(d.id, d.name, d.sm_count, d.memory_bytes) for d in tr.meta.devices] == \
        [(i, "AMD Instinct MI300X", 304, 192 << 30) for i in (0, 1)]
    copies = tr.side["copy_args"]
    assert set(copies["copy_kind"]) == {"HtoD"} and set(copies["bytes"]) == {1 << 20}
    # roctx ranges named by their message are the steps
    assert list(tr.meta.steps["step"]) == [0, 1, 2]
    assert tr.meta.time_base == S.TIME_RELATIVE and tr.meta.format == "rocprofv3-json"
    assert [r.pid for r in tr.meta.ranks] == [tool["metadata"]["pid"]]


def test_rocprofv3_json_gzip_and_damage(v3_file, tmp_path):
    path, _ = v3_file
    gz = tmp_path / "run.json.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    assert len(load(gz).events) == len(load(path).events)
    cut = tmp_path / "cut.json"
    cut.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])
    with pytest.raises(TraceReadError, match="rocprofv3 JSON") as err:
        load(cut)
    assert "\n" not in str(err.value)
    cutgz = tmp_path / "cut.json.gz"
    cutgz.write_bytes(gz.read_bytes()[: len(gz.read_bytes()) // 2])
    with pytest.raises(TraceReadError, match="rocprofv3 JSON"):
        load(cutgz)
    bad = json.loads(path.read_text())
    bad["rocprofiler-sdk-tool"][0]["buffer_records"]["kernel_dispatch"][0]["start_timestamp"] = "soon"
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps(bad))
    with pytest.raises(TraceReadError, match="rocprofv3 JSON"):
        load(wrong)


def test_gpu_only_capture_is_not_cpu_only(tmp_path, capsys):
    doc = rocm.rocprofv3_json(steps=4)
    for table in ("hip_api", "marker_api", "memory_copy"):
        doc["rocprofiler-sdk-tool"][0]["buffer_records"][table] = []
    path = tmp_path / "kernels_only.json"
    path.write_text(json.dumps(doc))
    tr = load(path)
    assert lane_count(tr, S.LANE_CPU_THREAD) == 0 and lane_count(tr, S.LANE_GPU_COMPUTE) == 9
    assert any("no host API calls" in w for w in map(words, tr.meta.warnings))
    rc, text = cli(capsys, "analyze", str(path))
    assert rc == 0, text
    assert "CPU-only" not in text and "No GPU activity" not in text


@needs_shared
def test_rocprofv3_sample_counts():
    """43,915 dispatches on one MI350X of 8 GPU agents; RCCL kernels on the communication lane;
    streams and queues as the file has them (decoded here with plain json)."""
    doc = json.loads(gzip.decompress(V3_SAMPLE.read_bytes()))
    tool = doc["rocprofiler-sdk-tool"][0]
    kd = tool["buffer_records"]["kernel_dispatch"]
    names = {k["kernel_id"]: k["formatted_kernel_name"] for k in tool["kernel_symbols"]}
    gpus = [a for a in tool["agents"] if a["type"] == 2]
    used_agents = {d["dispatch_info"]["agent_id"]["handle"] for d in kd}
    rccl = sum(bool(re.search("nccl|rccl", names[d["dispatch_info"]["kernel_id"]], re.I)) for d in kd)
    streams = Counter(d["stream_id"]["handle"] for d in kd)
    queues = {d["dispatch_info"]["queue_id"]["handle"] for d in kd}
    assert (len(kd), len(gpus), len(used_agents), rccl) == (43_915, 8, 1, 1_310)

    tr = load(V3_SAMPLE)
    S.validate(tr.events)
    ev = tr.events
    assert len(ev) == len(kd)
    assert lane_count(tr, S.LANE_GPU_COMM) == rccl
    assert lane_count(tr, S.LANE_GPU_COMPUTE) == len(kd) - rccl
    assert Counter(ev["stream"].tolist()) == streams
    assert sum(n > 2 for n in streams.values()) == 7  # the streams that carry the run's work
    assert tr.meta.extra["queues"] == len(queues) and tr.meta.extra["gpu_agents"] == len(gpus)
    used = [d for d in tr.meta.devices if d.used]
    agent = next(a for a in gpus if a["id"]["handle"] in used_agents)
    assert [(d.id, d.name, d.sm_count) for d in used] == \
        [(agent["logical_node_type_id"], agent["product_name"], agent["cu_count"])]
    assert used[0].name == "AMD Instinct MI350X"
    assert used[0].memory_bytes == sum(b["size_in_bytes"] for b in agent["mem_banks"])
    assert len(tr.meta.devices) == len(gpus)
    # exact ns: the frame's times are the file's integers
    starts = np.sort(np.array([d["start_timestamp"] for d in kd], dtype=np.int64))
    assert np.array_equal(np.sort(ev["start_ns"].to_numpy()), starts)


@needs_shared
@pytest.mark.parametrize("cmd", ["info", "analyze"])
def test_rocm_samples_cli(cmd, capsys):
    for path in (V3_SAMPLE, RPD_SAMPLE):
        rc, text = cli(capsys, cmd, str(path))
        assert rc == 0, text
        assert "CPU-only" not in text and "No GPU activity" not in text
        if cmd == "info":
            assert ("AMD Instinct MI350X" in text) == (path == V3_SAMPLE)


# --- RPD -----------------------------------------------------------------------------------------

def _rpd_truth(path: Path) -> dict:
    db = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    q = lambda sql: db.execute(sql).fetchone()[0]  # noqa: E731
    op_type = "SELECT COUNT(*) FROM rocpd_op o JOIN rocpd_string s ON s.id = o.opType_id WHERE s.string "
    api = "SELECT COUNT(*) FROM rocpd_api a JOIN rocpd_string s ON s.id = a.apiName_id WHERE s.string "
    out = {"kernels": q(op_type + "= 'KernelExecution'"), "copies": q(op_type + "LIKE 'Copy%'"),
           "fills": q(op_type + "LIKE 'Fill%'"), "calls": q(api + "!= 'UserMarker'"),
           "markers": q(api + "= 'UserMarker'"),
           "links": set(db.execute("SELECT o.start, a.start FROM rocpd_api_ops l JOIN rocpd_op o ON o.id = l.op_id "
                                   "JOIN rocpd_api a ON a.id = l.api_id").fetchall())}
    db.close()
    return out


def _check_rpd(tr, truth: dict, exact_times: bool = True) -> None:
    S.validate(tr.events)
    ev = tr.events
    assert (ev["category"] == S.CAT_KERNEL).sum() == truth["kernels"]
    assert lane_count(tr, S.LANE_MEMCPY) == truth["copies"]
    assert lane_count(tr, S.LANE_MEMSET) == truth["fills"]
    assert lane_count(tr, S.LANE_CPU_THREAD) == truth["calls"]
    assert lane_count(tr, S.LANE_CPU_ANNOTATION) == truth["markers"]
    got = {(ev.at[g, "start_ns"], ev.at[h, "start_ns"]) for h, g in _linked(tr)}
    want = truth["links"] if exact_times else {(o // 1000 * 1000, a // 1000 * 1000) for o, a in truth["links"]}
    assert got == want


def test_rpd_frame(tmp_path):
    path = tmp_path / "trace.rpd"
    made = rocm.write_rpd(path, steps=3)
    truth = _rpd_truth(path)
    assert {k: (len(v) if k == "links" else v) for k, v in truth.items()} == made
    assert sniff(str(path)) == "rpd"
    tr = load(path)
    _check_rpd(tr, truth)
    assert list(tr.meta.steps["step"]) == [0, 1, 2]
    assert set(tr.side["copy_args"].loc[lambda d: d["copy_kind"] != "", "bytes"]) == {4096}
    assert [(d.id, d.used) for d in tr.meta.devices] == [(1, True)]
    db = sqlite3.connect(path)
    db.execute("DROP TABLE rocpd_api_ops")
    db.commit()
    db.close()
    with pytest.raises(TraceReadError, match=r"rocmProfileData \(RPD\) database \(no rocpd_api_ops table\)"):
        load(path)


@needs_shared
def test_rpd_sample_counts():
    truth = _rpd_truth(RPD_SAMPLE)
    assert (truth["kernels"], truth["copies"], truth["fills"], truth["calls"], len(truth["links"])) == \
        (29, 55, 1, 125, 85)
    _check_rpd(load(RPD_SAMPLE), truth)


# --- rpd2tracing JSON ----------------------------------------------------------------------------

def test_rpd2tracing_json_reads_as_gpu_work(tmp_path, capsys):
    rpd = tmp_path / "trace.rpd"
    rocm.write_rpd(rpd, steps=4)
    out = tmp_path / "trace.json"
    rocm.rpd2tracing(rpd, out)
    assert sniff(str(out)) == "rpd-json"
    tr = load(out)
    _check_rpd(tr, _rpd_truth(rpd), exact_times=False)
    rc, text = cli(capsys, "analyze", str(out))
    assert rc == 0, text
    assert "CPU-only" not in text and "No GPU activity" not in text
    # rpd2tracing's marker frames projected onto a GPU queue are GPU annotations, never kernels
    text = out.read_text().rstrip().rstrip("]")
    frame = ',{"pid":"1","tid":"0","name":"ProfilerStep#0","ts":"5000018","dur":"200","ph":"X",' \
            '"args":{"desc":"UserMarker frame: 2 ops"}}\n]\n'
    framed = tmp_path / "framed.json"
    framed.write_text(text + frame)
    tr2 = load(framed)
    assert lane_count(tr2, S.LANE_GPU_ANNOTATION) == 1
    assert (tr2.events["category"] == S.CAT_KERNEL).sum() == (tr.events["category"] == S.CAT_KERNEL).sum()
    # damaged: cut in the middle
    cut = tmp_path / "cut.json"
    cut.write_bytes(out.read_bytes()[: len(out.read_bytes()) // 2])
    with pytest.raises(TraceReadError, match="rpd2tracing JSON"):
        load(cut)


@needs_shared
def test_rpd2tracing_of_the_sample(tmp_path):
    out = tmp_path / "matmul.json"
    rocm.rpd2tracing(RPD_SAMPLE, out)
    tr = load(out)
    truth = _rpd_truth(RPD_SAMPLE)
    _check_rpd(tr, truth, exact_times=False)
    assert (tr.events["category"] == S.CAT_KERNEL).sum() == 29 and lane_count(tr, S.LANE_MEMCPY) == 55


def test_kineto_json_is_still_kineto(tmp_path):
    p = tmp_path / "k.json"
    p.write_text(json.dumps({"traceEvents": [{}, {"ph": "X", "name": "x", "pid": 1, "tid": 1, "ts": 1, "dur": 1,
                                                  "cat": "cpu_op"}]}))
    assert sniff(str(p)) == "kineto"


# --- rocpd ---------------------------------------------------------------------------------------

def test_rocpd_schema_excerpt_is_the_published_text():
    """The fixture's statements are rocprofiler-sdk's: spot checks of the published layout."""
    text = rocm.ROCPD_SCHEMA.read_text()
    assert "-- RocPD schema version 3.0.1" in text
    assert text.count("CREATE TABLE IF NOT EXISTS") == 17 and text.count("CREATE VIEW IF NOT EXISTS") == 17
    assert '"stream_id" INTEGER NOT NULL,\n        "start" BIGINT NOT NULL,' in text


def test_rocpd_frame(tmp_path, capsys):
    path = tmp_path / "results.db"
    made = rocm.write_rocpd(path, steps=3)
    assert sniff(str(path)) == "rocpd"
    db = sqlite3.connect(path)
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    n_kernels = db.execute("SELECT COUNT(*) FROM rocpd_kernel_dispatch").fetchone()[0]
    n_copies = db.execute("SELECT COUNT(*) FROM rocpd_memory_copy").fetchone()[0]
    pairs = db.execute("SELECT R.start, K.start FROM rocpd_region R JOIN rocpd_event RE ON RE.id = R.event_id "
                       "JOIN rocpd_event KE ON KE.stack_id = RE.stack_id JOIN rocpd_kernel_dispatch K ON "
                       "K.event_id = KE.id").fetchall()
    db.close()
    assert "rocpd_kernel_dispatch" not in tables and any(t.startswith("rocpd_kernel_dispatch_") for t in tables)
    assert (n_kernels, n_copies) == (made["kernels"], made["copies"])
    tr = load(path)
    S.validate(tr.events)
    ev = tr.events
    assert (ev["category"] == S.CAT_KERNEL).sum() == made["kernels"]
    assert lane_count(tr, S.LANE_GPU_COMM) == made["rccl"]
    assert lane_count(tr, S.LANE_MEMCPY) == made["copies"]
    assert lane_count(tr, S.LANE_CPU_THREAD) == made["calls"]
    assert lane_count(tr, S.LANE_CPU_ANNOTATION) == made["ranges"]
    assert lane_count(tr, S.LANE_INSTANT) == made["marks"]
    got = {(ev.at[h, "start_ns"], ev.at[g, "start_ns"]) for h, g in _linked(tr)}
    assert set(pairs) <= got and len(got) == made["calls"]
    assert list(tr.meta.steps["step"]) == [0, 1, 2]
    assert [(d.id, d.name, d.sm_count, d.memory_bytes, d.used) for d in tr.meta.devices] == \
        [(0, "AMD Instinct MI300X", 304, 192 << 30, True), (1, "AMD Instinct MI300X", 304, 192 << 30, False)]
    assert {r.pid for r in tr.meta.ranks} == {5150} and set(ev["tid"][S.lane_is(ev, S.LANE_CPU_THREAD)]) == {5151}
    rc, text = cli(capsys, "analyze", str(path))
    assert rc == 0, text


def test_rocpd_missing_table_names_the_format(tmp_path):
    path = tmp_path / "results.db"
    rocm.write_rocpd(path)
    db = sqlite3.connect(path)
    for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type='view' AND name='rocpd_event'").fetchall():
        db.execute(f"DROP VIEW {name}")
    for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type='table' AND name LIKE 'rocpd_event_%'"
                              ).fetchall():
        db.execute(f"DROP TABLE `{name}`")
    db.commit()
    db.close()
    with pytest.raises(TraceReadError, match="rocprofv3 rocpd database"):
        load(path)


# --- detection by content ------------------------------------------------------------------------

def test_every_sqlite_kind_is_named(tmp_path):
    from tracesynth.nsys_example import example_scenario
    from tracesynth.nsys_writer import write_nsys

    nsys = tmp_path / "a.rpd"  # extensions say nothing
    write_nsys(example_scenario(), str(nsys))
    rpd = tmp_path / "b.sqlite"
    rocm.write_rpd(rpd)
    rocpd = tmp_path / "c.rpd"
    rocm.write_rocpd(rocpd)
    v1 = tmp_path / "results.db"
    db = sqlite3.connect(v1)
    db.execute("CREATE TABLE KERN (a INT)")
    db.commit()
    db.close()
    other = tmp_path / "d.sqlite"
    db = sqlite3.connect(other)
    db.execute("CREATE TABLE t (a INT)")
    db.commit()
    db.close()
    assert [K.sqlite_kind(str(p)) for p in (nsys, rpd, rocpd, v1, other)] == \
        [K.NSYS, K.RPD, K.ROCPD, K.ROCPROF_V1, K.UNKNOWN]
    assert load(nsys).meta.format == "nsys"
    assert load(rpd).meta.format == "rpd" and load(rocpd).meta.format == "rocpd"
    with pytest.raises(TraceReadError, match=r"legacy rocprof v1 database.*not supported.*rocprofv3"):
        load(v1)
    with pytest.raises(TraceReadError, match="no trace format traceread reads"):
        load(other)
    # the nsys reader names what it was given
    with pytest.raises(TraceReadError, match=r"not an Nsight Systems export: a rocmProfileData \(RPD\) database"):
        load_nsys(rpd)
    with pytest.raises(TraceReadError, match="not an Nsight Systems export: a rocprofv3 rocpd database"):
        load_nsys(rocpd)
    with pytest.raises(TraceReadError, match="legacy rocprof v1"):
        load_nsys(v1)


def test_inputs_are_not_modified(tmp_path):
    rpd = tmp_path / "x.rpd"
    rocm.write_rpd(rpd)
    rocpd = tmp_path / "y.db"
    rocm.write_rocpd(rocpd)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    load(rpd)
    load(rocpd)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
