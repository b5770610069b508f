"""Perfetto flow arrows as a user follows them in ui.perfetto.dev: every launch call to its GPU op
exactly once, and every gap slice to the event its class rests on."""

from __future__ import annotations

import io
from collections import Counter

import numpy as np
import pytest
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace as PfTrace
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TrackEvent
from tracesynth.stragglers import StragglerSpec, make_job, write_job

from traceread import schema
from traceread.loaders import load
from traceread.render import perfetto, timeline
from traceread.runner import analyze

# One xdist worker runs this module's tests (tests/conftest.py ONE_WORKER_MODULES): its module-scoped ``job`` is made once.

@pytest.fixture(scope="module")
def job(tmp_path_factory):
    d = tmp_path_factory.mktemp("flows")
    paths = write_job(make_job(StragglerSpec(ranks=2, straggler=1, steps=5)), str(d))
    return analyze([load(p) for p in paths])


def _slices(a, steps: str):
    buf = io.BytesIO()
    perfetto.render(a, buf, steps=steps)
    t = PfTrace()
    t.ParseFromString(buf.getvalue())
    names = {p.track_descriptor.uuid: (p.track_descriptor.name or p.track_descriptor.process.process_name)
             for p in t.packet if p.HasField("track_descriptor")}
    out = []
    for p in t.packet:
        ev = p.track_event
        if p.HasField("track_event") and ev.type == TrackEvent.TYPE_SLICE_BEGIN:
            out.append((names[ev.track_uuid], ev.name, p.timestamp, list(ev.flow_ids), list(ev.terminating_flow_ids)))
    return out


def _expected_launch_pairs(a, steps: str) -> int:
    """Independently: GPU ops and launch calls overlapping the drawn steps, joined by correlation."""
    wins = timeline.windows(a, steps)
    n = 0
    for t, tr in enumerate(a.inputs):
        ev = tr.events
        w = wins[wins["trace"] == t]
        over = np.zeros(len(ev), dtype=bool)
        for lo, hi in zip(w["start_ns"], w["end_ns"], strict=True):
            over |= (ev["end_ns"].to_numpy() > lo) & (ev["start_ns"].to_numpy() < hi)
        gpu = ev[over & ev["lane"].isin(timeline.DEVICE_LANES).to_numpy() & (ev["correlation"] >= 0).to_numpy()]
        host = ev[over & ev["category"].isin([schema.CAT_RUNTIME, schema.CAT_DRIVER]).to_numpy()
                  & (ev["correlation"] >= 0).to_numpy()]
        n += int(gpu["correlation"].isin(set(host["correlation"])).sum())
    return n


@pytest.mark.parametrize("steps", ["key", "all"])
def test_every_gpu_op_with_a_launch_gets_exactly_one_arrow(job, steps) -> None:
    sl = _slices(job, steps)
    gpu = [s for s in sl if " stream " in s[0] or s[0].endswith(("memcpy", "memset"))]
    cpu = [s for s in sl if s[0].startswith("CPU thread")]
    from_cpu = Counter(i for s in cpu for i in s[3])
    ins = [(s, [i for i in s[4] if i in from_cpu]) for s in gpu]  # arrows from launches (gaps' come too)
    ended = [(s, ids) for s, ids in ins if ids]
    assert all(len(ids) == 1 for _, ids in ended)  # one arrow into each GPU op
    assert len(ended) == _expected_launch_pairs(job, steps) > 0
    ends = [ids[0] for _, ids in ended]
    assert len(set(ends)) == len(ends) and all(from_cpu[i] == 1 for i in ends)  # each from one launch call
    launch_of = {i: s for s in cpu for i in s[3]}
    assert all(launch_of[ids[0]][1].startswith("cuda") and launch_of[ids[0]][2] <= s[2] for s, ids in ended)


def test_every_gap_points_to_its_evidence(job) -> None:
    sl = _slices(job, "all")
    gaps = [s for s in sl if s[0].startswith(perfetto.DIAGNOSIS_TRACK)]
    target = {i: s for s in sl for i in s[4]}
    comm = [g for g in gaps if g[1] == "comm-bound"]
    assert comm and all(len(g[3]) == 1 for g in comm)
    for g in comm:  # a comm-bound gap points at a communication kernel
        assert " comm stream " in target[g[3][0]][0]
    others = [g for g in gaps if g[1] != "comm-bound" and g[3]]
    assert all(target[g[3][0]][0].startswith("CPU thread") for g in others)  # the launch that ended it
    assert sum(1 for g in gaps if g[3]) >= 0.9 * len(gaps)
