"""nsys CPU sampling read by the loader (``loaders.nsys.samples``: side table ``cpu_samples``).

A planted export gets sampling tables written into it as nsys writes them (``tracesynth.nsys_samples``);
the loader reads each sample's thread, time and innermost function, never a path or an address.
"""

from __future__ import annotations

import collections
import sqlite3

import numpy as np
from conftest import SHARED_TRACES, needs_shared
from tracesynth.nsys_samples import PERIOD, add_cpu_samples
from tracesynth.nsys_writer import write_nsys
from tracesynth.one_time import plant_scenario

from traceread import load


def _planted(tmp_path):
    planted = plant_scenario("untraced-host", seed=0, jitter=0.2, steps=6, ranks=1, uniform=True)
    path = write_nsys(planted.scenario, str(tmp_path / "h.sqlite"))
    truth = planted.truth
    return path, truth[truth["class"] == "launch-bound"].sort_values("start_ns")


def test_the_loader_reads_each_samples_thread_time_and_function_never_a_path(tmp_path):
    path, planted = _planted(tmp_path)
    spans = list(zip(planted["start_ns"], planted["end_ns"], strict=True))
    odd = [(int(spans[0][0]) + 1, "/home/someone/bin/app"), (int(spans[0][0]) + 2, "0x7fd99b3515d4")]
    gtid = add_cpu_samples(path, spans, ["update_metrics", "std::abs(double)"], odd)
    t = load(path)
    s = t.side["cpu_samples"]
    want = sum(len(range(a, b, PERIOD)) for a, b in spans) + len(odd)
    assert len(s) == want and (np.diff(s["time_ns"].to_numpy()) >= 0).all()
    assert set(s["tid"]) == {gtid & 0xFFFFFF} and set(s["tid"]) <= set(t.events["tid"])
    names = s["function"].astype(str)
    assert set(names) == {"update_metrics", "std::abs(double)", ""}  # the path and the address read as ''
    assert int((names == "").sum()) == 2
    # an export without the sampling tables has no such table (and loads as before)
    (tmp_path / "bare").mkdir()
    bare, _ = _planted(tmp_path / "bare")
    assert "cpu_samples" not in load(bare).side


def test_samples_of_a_process_with_no_events_are_left_out(tmp_path):
    path, planted = _planted(tmp_path)
    spans = list(zip(planted["start_ns"], planted["end_ns"], strict=True))[:1]
    gtid = add_cpu_samples(path, spans, ["update_metrics"])
    db = sqlite3.connect(path)
    other = ((gtid >> 24) + 1) << 24 | 5  # another pid, no event of it in the export
    n = db.execute("SELECT count(*) FROM COMPOSITE_EVENTS").fetchone()[0]
    db.execute("INSERT INTO COMPOSITE_EVENTS VALUES (?, ?, 3, 1, ?, 1)", (n + 1, int(spans[0][0]) + 7, other))
    db.commit()
    db.close()
    assert len(load(path).side["cpu_samples"]) == n


@needs_shared
def test_the_mpi_exports_samples_are_read_as_the_raw_tables_hold_them():
    path = SHARED_TRACES / "nsys/pipit_saxpy_mpi_a100_2022.sqlite"
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    raw = collections.Counter(name for (name,) in db.execute(
        "SELECT s.value FROM COMPOSITE_EVENTS c JOIN SAMPLING_CALLCHAINS k ON k.id = c.id AND k.stackDepth = 0 "
        "JOIN StringIds s ON s.id = k.symbol"))
    total = db.execute("SELECT count(*) FROM COMPOSITE_EVENTS").fetchone()[0]
    db.close()
    s = load(str(path)).side["cpu_samples"]
    assert len(s) == total == 5451
    got = s["function"].astype(str).value_counts()
    assert got["main"] == raw["main"] and got["std::abs(double)"] == raw["std::abs(double)"]
    # every name kept is the raw symbol; unresolved addresses and paths read as ''
    assert int(got.get("", 0)) == sum(v for k, v in raw.items() if k.startswith("0x") or "/" in k)
