"""Hostile shapes and values in the writers and the per-name / per-device work (issue 26).

- The Perfetto writer accepts every trace the analysis accepts: a host event before the first GPU
  event of an integer-microsecond trace, ranks near 2^31, nsys device ids up to 2^63-1.
- Name shortening and per-device work scale with what is shown or used: counted, not timed.
- Sizes are written as sizes (``512M`` was reported as "0 GiB").
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace as PfTrace
from tracesynth.nsys_writer import write_nsys
from tracesynth.planted import PlantSpec, plant

from traceread.cli import main
from traceread.limits import configure, format_size, parse_size
from traceread.render import names


def _kineto(path: Path, rank: int = 0, t0: int = 1_700_000_000_000_000, host_before_us: int = 1000,
            devices: int = 1, kernel_names: list[str] | None = None, steps: int = 6, kernels: int = 3) -> Path:
    """Integer-microsecond Kineto JSON: ``steps`` steps, ``kernels`` kernels per step per device, and
    a host op that starts ``host_before_us`` before the first kernel."""
    evs, corr, names_iter = [], 1, iter(kernel_names or [])
    span = 2000 * kernels + 3000
    for s in range(steps):
        base = t0 + s * span
        evs.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}", "pid": 1, "tid": 1,
                    "ts": base, "dur": span - 1000})
        for d in range(devices):
            for k in range(kernels):
                ts = base + 100 + k * 2000
                evs.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
                            "ts": ts, "dur": 10, "args": {"correlation": corr}})
                evs.append({"ph": "X", "cat": "kernel", "name": next(names_iter, f"gemm_{k}"), "pid": d, "tid": 7,
                            "ts": ts + 50, "dur": 1500, "args": {"device": d, "stream": 7, "correlation": corr}})
                corr += 1
    first = min(e["ts"] for e in evs if e["cat"] == "kernel")
    evs.append({"ph": "X", "cat": "cpu_op", "name": "aten::early", "pid": 1, "tid": 1, "ts": first - host_before_us,
                "dur": host_before_us + 200})
    path.write_text(json.dumps({"schemaVersion": 1, "distributedInfo": {"rank": rank}, "traceEvents": evs}))
    return path


def _perfetto_ok(argv: list[str], out: Path) -> PfTrace:
    assert main(argv + ["-o", str(out.with_suffix(".md")), "--perfetto", str(out), "--perfetto-steps", "all"]) == 0
    trace = PfTrace()
    trace.ParseFromString(out.read_bytes())
    assert len(trace.packet) > 10
    assert min(p.timestamp for p in trace.packet if p.HasField("track_event")) >= 0
    return trace


def test_perfetto_host_event_before_the_first_gpu_event(tmp_path) -> None:
    src = _kineto(tmp_path / "early.json", t0=500)  # the host op starts before time 0 of the trace
    _perfetto_ok(["analyze", str(src)], tmp_path / "t.pftrace")


def test_perfetto_ranks_near_int32_max(tmp_path) -> None:
    a = _kineto(tmp_path / "a.json", rank=2**31 - 2)
    b = _kineto(tmp_path / "b.json", rank=2**31 - 1)
    trace = _perfetto_ok(["analyze", str(a), str(b)], tmp_path / "t.pftrace")
    pids = {p.track_descriptor.process.pid for p in trace.packet
            if p.HasField("track_descriptor") and p.track_descriptor.HasField("process")}
    assert pids == {1, 2}  # labels stay in the names; the ids are small


@pytest.mark.parametrize("device_id", [2**31 - 1, 2**32 + 3, 2**63 - 1])
def test_perfetto_huge_nsys_device_id(tmp_path, device_id) -> None:
    path = Path(write_nsys(plant(PlantSpec(seed=3, ranks=1, steps=4)).scenario, tmp_path / "d.sqlite"))
    with sqlite3.connect(path) as db:
        for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY"):
            db.execute(f"UPDATE {table} SET deviceId = ?", (device_id,))
        db.execute("UPDATE TARGET_INFO_GPU SET id = ?, cuDevice = ?", (device_id, device_id))
    _perfetto_ok(["analyze", str(path)], tmp_path / "t.pftrace")


def _long_names(n: int) -> list[str]:
    # Families of templated names that shorten alike: each needs its telling characters kept.
    return [f"void at::native::kernel_{i % 7}<float, {i}, at::native::Functor<{'x' * 200}, {i}>>(int, float*)"
            for i in range(n)]


def _count_shortening(monkeypatch) -> dict[str, int]:
    """Count calls of the name shortener from now on: ``calls["n"]``."""
    calls = {"n": 0}
    real = names._shorten_chars

    def counting(*args, **kwargs):
        calls["n"] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(names, "_shorten_chars", counting)
    return calls


def test_name_shortening_work_is_bounded_by_the_rows_shown(monkeypatch) -> None:
    calls = _count_shortening(monkeypatch)
    every = _long_names(3000)
    shown = every[:10]
    short = names.ShortNames(every, shown=shown)
    assert len({short(n) for n in shown}) == len(shown)  # the rows shown stay distinct
    # 10 shown, each with its neighbours: a few passes over at most 10 x 49 names, not 3,000.
    assert calls["n"] <= 4 * 10 * (2 * names.SHOWN_NEIGHBOURS + 1)


def test_kernels_and_analyze_shorten_only_what_they_show(tmp_path, monkeypatch, capsys) -> None:
    src = _kineto(tmp_path / "n.json", kernel_names=_long_names(600), steps=6, kernels=100)
    calls = _count_shortening(monkeypatch)
    assert main(["kernels", str(src), "--top", "2"]) == 0
    kernels_calls, calls["n"] = calls["n"], 0
    assert main(["analyze", str(src), "-o", str(tmp_path / "r.md")]) == 0
    capsys.readouterr()
    # Before: every distinct name was shortened (600, some again); now the rows shown and their
    # neighbours only. Measured as a count, not a time.
    assert 0 < kernels_calls <= 2 * 2 * (2 * names.SHOWN_NEIGHBOURS + 1)
    assert 0 < calls["n"] <= 2 * 10 * (2 * names.SHOWN_NEIGHBOURS + 1)


def _work(argv: list[str], monkeypatch) -> tuple[int, int]:
    """(elements compared by pandas ``==``, items pandas deep-copied from ``attrs``) during one run."""
    import pandas as pd
    import pandas.core.generic as generic

    compared, copied = 0, 0
    real_eq, real_deepcopy = pd.Series.__eq__, generic.deepcopy

    def eq(self, other):
        nonlocal compared
        compared += len(self)
        return real_eq(self, other)

    def deepcopy(obj, *args):
        nonlocal copied
        copied += sum(len(v) for v in obj.values() if isinstance(v, list)) if isinstance(obj, dict) else 0
        return real_deepcopy(obj, *args)

    with monkeypatch.context() as m:
        m.setattr(pd.Series, "__eq__", eq)
        m.setattr(generic, "deepcopy", deepcopy)
        assert main(argv) == 0
    return compared, copied


def test_per_device_work_grows_linearly(tmp_path, monkeypatch, capsys) -> None:
    """Work of ``analyze`` for 16 and 64 GPUs in one trace, counted (not timed): 4x the GPUs must
    cost about 4x, not 16x. It was quadratic twice over: every GPU's rows were found by comparing
    every row of the frame, and a note per GPU in the gaps frame's ``attrs`` was deep-copied by
    pandas into every frame derived from it (10k GPUs: 279 s)."""
    # three steps: each GPU gets a "cannot be judged" note
    small = _kineto(tmp_path / "s.json", devices=16, steps=3)
    big = _kineto(tmp_path / "b.json", devices=64, steps=3)
    eq_small, copied_small = _work(["analyze", str(small), "-o", str(tmp_path / "s.md")], monkeypatch)
    eq_big, copied_big = _work(["analyze", str(big), "-o", str(tmp_path / "b.md")], monkeypatch)
    capsys.readouterr()
    assert eq_big < 6 * eq_small, (eq_small, eq_big)
    assert copied_big <= 6 * max(copied_small, 16), (copied_small, copied_big)


@pytest.mark.parametrize("text, shown", [("512M", "512 MiB"), ("64G", "64 GiB"), ("1.5T", "1.5 TiB"),
                                         ("1000000", "976.6 KiB"), ("100", "100 bytes"), ("1K", "1 KiB")])
def test_sizes_are_formatted_in_the_units_they_are_given(text, shown) -> None:
    assert format_size(parse_size(text)) == shown


def test_max_json_size_message_names_the_limit(tmp_path, capsys) -> None:
    import gzip

    src = _kineto(tmp_path / "t.json")
    gz = tmp_path / "t.json.gz"
    gz.write_bytes(gzip.compress(src.read_bytes()))
    try:
        assert main(["--max-json-size", "1.5K", "info", str(gz)]) == 2
    finally:
        configure()  # the limits are process-wide: later tests in this process load with the defaults
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(gz) in err and "more than 1.5 KiB of JSON" in err
