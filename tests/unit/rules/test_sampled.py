"""The host's own computation seen by nsys CPU sampling (issue 42: the CPU's own work, ``rules.sampled``).

A planted nsys export (``untraced-host``: every step the training thread computes between two kernels
with nothing recorded) gets CPU sampling tables written into it as nsys writes them (``COMPOSITE_EVENTS``:
a sample's time and thread; ``SAMPLING_CALLCHAINS``: its stack, depth 0 the frame it was taken in;
``StringIds``: the symbols). Without samples the gaps have no signature; with samples over them they are
launch-bound, kind host-work, the sampled functions named by their share of the samples
(``tracesynth.nsys_samples`` writes the tables).
"""

from __future__ import annotations

import re
import sqlite3

import numpy as np
from tracesynth.nsys_samples import PERIOD, add_cpu_samples
from tracesynth.nsys_writer import write_nsys
from tracesynth.one_time import plant_scenario
from tracesynth.planted import classify_file, confusion, scores, truth_for

from traceread import load
from traceread.config import Thresholds
from traceread.engine.gaps import find_gaps
from traceread.engine.steps import find_steps
from traceread.rules import sampled
from traceread.rules.evidence import with_evidence
from traceread.rules.host_work import launching_thread

CFG = Thresholds()


def _planted(tmp_path, seed: int = 0):
    planted = plant_scenario("untraced-host", seed=seed, jitter=0.2, steps=6, ranks=1, uniform=True)
    path = write_nsys(planted.scenario, str(tmp_path / "h.sqlite"))
    truth = planted.truth
    return planted, path, truth[truth["class"] == "launch-bound"].sort_values("start_ns")


def _long(gaps):
    return with_evidence(gaps[gaps["dur_ns"].to_numpy() >= 1_000_000].sort_values("start_ns"), CFG)


def test_untraced_host_work_is_launch_bound_host_work_where_samples_show_it(tmp_path):
    planted, path, truth = _planted(tmp_path)
    before = _long(classify_file(path, CFG))
    assert len(before) == len(truth) and set(before["class"]) == {"unattributed"}  # nothing shows the host
    spans = list(zip(truth["start_ns"], truth["end_ns"] - 20_000, strict=True))
    add_cpu_samples(path, spans, ["update_metrics", "update_metrics", "update_metrics", "std::abs(double)"])
    gaps = classify_file(path, CFG)
    mat, _ = confusion(gaps, truth_for(planted.truth, gaps, planted.scenario.origin_epoch_ns))
    s = scores(mat)
    assert s.loc["launch-bound", "recall"] == 1.0 and s.loc["launch-bound", "precision"] == 1.0
    after = _long(gaps)
    assert set(after["class"]) == {"launch-bound"} and set(after["evidence_kind"].astype(str)) == {"host-work"}
    for (a, b), (_, g) in zip(spans, after.iterrows(), strict=True):
        got = re.search(r"for (\d+)% of the gap \(CPU samples outside CUDA calls and communication ranges: "
                        r"update_metrics (\d+)%, std::abs\(double\) (\d+)%\)", g["evidence"])
        assert got is not None, g["evidence"]
        n = len(range(a, b, PERIOD))  # every fourth sample of a span is in std::abs
        assert abs(int(got.group(3)) - 100 * (n // 4) / n) <= 0.5 and abs(int(got.group(2)) - 100 * (n - n // 4) / n) <= 0.5
        # each sample stands for one period: the samples cover the gap but its last 20 us and the launch
        assert 90 <= int(got.group(1)) <= 100


def test_samples_under_half_the_gap_do_not_claim_it(tmp_path):
    planted, path, truth = _planted(tmp_path, seed=1)
    # samples over only the first 40% of each gap: not the host's most of it
    spans = [(int(a), int(a + 0.4 * (b - a))) for a, b in zip(truth["start_ns"], truth["end_ns"], strict=True)]
    add_cpu_samples(path, spans, ["update_metrics"])
    gaps = _long(classify_file(path, CFG))
    assert len(gaps) == len(truth) and set(gaps["class"]) == {"unattributed"}


def test_samples_inside_communication_ranges_are_not_the_hosts_own_work(tmp_path):
    """The samples' time over each gap, measured against the same sum made here: an MPI range over the first
    30% of each gap takes its samples out (the thread was communicating, not computing for itself)."""
    _, path, truth = _planted(tmp_path, seed=2)
    spans = [(int(a), int(b)) for a, b in zip(truth["start_ns"], truth["end_ns"], strict=True)]
    gtid = add_cpu_samples(path, spans, ["update_metrics"])
    db = sqlite3.connect(path)
    for a, b in spans:
        db.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) VALUES (?, ?, 59, 'MPI_Send', ?)",
                   (a, a + (b - a) * 3 // 10, gtid))
    db.commit()
    db.close()
    t = load(path)
    steps = find_steps(t, CFG).steps
    gaps = find_gaps(t, steps, CFG)
    gaps = gaps[gaps["dur_ns"].to_numpy() >= 1_000_000].reset_index(drop=True)
    assert len(gaps) == len(spans)
    ns, label = sampled.sampled_work(gaps, t, launching_thread(gaps, t), CFG)
    db = sqlite3.connect(path)
    calls = db.execute("SELECT start, end FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchall()
    db.close()
    for k, (a, b) in enumerate(spans):
        gs, ge = int(gaps["start_ns"][k]), int(gaps["end_ns"][k])
        # samples every PERIOD from a, each standing for PERIOD (the last one too), in the gap, nanosecond by
        # nanosecond outside the MPI range and the CUDA calls
        held = np.zeros(ge - gs, dtype=bool)
        for x in range(a, b, PERIOD):
            held[max(x, gs) - gs:max(min(x + PERIOD, ge) - gs, 0)] = True
        for c0, c1 in [(a, a + (b - a) * 3 // 10)] + calls:
            held[min(max(c0 - gs, 0), ge - gs):max(min(c1, ge) - gs, 0)] = False
        assert int(ns[k]) == int(held.sum()), (ns[k], held.sum())
        assert label[k] == ("update_metrics 100%" if ns[k] >= 0.5 * (b - a) else "")
