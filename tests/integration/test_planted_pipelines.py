"""Planted pipeline schedules and a TorchRec-like all-to-all, in both formats, at +-20% jitter."""

from __future__ import annotations

from collections import Counter

import pytest
from tracesynth.kineto_writer import write_kineto
from tracesynth.nsys_writer import write_nsys
from tracesynth.pipeline_schedules import (
    SCHEDULES,
    AllToAllSpec,
    PipelineSpec,
    plant_all_to_all,
    plant_pipeline,
    stage_order,
)
from tracesynth.planted import classify_file, confusion, scores, truth_for

from traceread import load
from traceread.config import Thresholds
from traceread.engine.collective_identity import identify

CFG = Thresholds()


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("stage", [0, 1, 3])
def test_every_stage_runs_every_forward_and_backward_once(schedule, stage):
    order = stage_order(schedule, stage, 4, 8, 2)
    chunks = 2 if schedule == "interleaved" else 1
    assert Counter(order) == Counter((k, c, i) for k in "FB" for c in range(chunks) for i in range(8))
    kinds = "".join(k for k, _, _ in order)
    if schedule == "gpipe":
        assert kinds == "F" * 8 + "B" * 8
    elif schedule == "1f1b":
        assert kinds.startswith("F" * (4 - stage - 1) + "FB")  # warmup forwards, then one-forward-one-backward


def _score(planted, fmt, tmp_path):
    paths = (write_kineto(planted.scenario, str(tmp_path / "p.rank{rank}.pt.trace.json")) if fmt == "kineto"
             else [write_nsys(planted.scenario, str(tmp_path / "p.sqlite"))])
    total = None
    for path in paths:
        classified = classify_file(path, CFG)
        mat, _ = confusion(classified, truth_for(planted.truth, classified, planted.scenario.origin_epoch_ns))
        total = mat if total is None else total + mat
    return scores(total), paths


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
@pytest.mark.parametrize("schedule,steps,coalesced", [("gpipe", 5, False), ("1f1b", 9, True),
                                                       ("interleaved", 6, False)])
def test_pipeline_bubbles_under_jitter(fmt, schedule, steps, coalesced, tmp_path):
    planted = plant_pipeline(PipelineSpec(seed=11, schedule=schedule, steps=steps, jitter=0.2, microbatches=4,
                                          stages=3, coalesced=coalesced))
    sc, paths = _score(planted, fmt, tmp_path)
    for cls in ("pipeline-bubble", "comm-bound"):
        if sc.loc[cls, "truth_ns"] > 0:
            assert sc.loc[cls, "precision"] >= 0.95 and sc.loc[cls, "recall"] >= 0.95, sc
    # Every transfer is point-to-point, named by the host: c10d::send/recv_ (or the External id's
    # nccl:send/recv), or batch_isend_irecv when coalesced (nccl:coalesced names nothing).
    ident = identify(load(paths[-1]))
    sources = Counter(zip(ident.collective.tolist(), ident.source.tolist(), strict=True))
    p2p = {k: v for k, v in sources.items() if k[0] in ("send", "recv", "send-recv")}
    assert sum(p2p.values()) > 0
    want = {"host-range"} if coalesced else {"host-op", "host-range"}
    assert {src for _, src in p2p} <= want, sources


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
@pytest.mark.parametrize("broken_ext", [True, False])
def test_all_to_all_on_sendrecv_kernels_is_comm_bound_not_a_pipeline(fmt, broken_ext, tmp_path):
    planted = plant_all_to_all(AllToAllSpec(seed=3, steps=8, jitter=0.2, broken_ext=broken_ext))
    sc, paths = _score(planted, fmt, tmp_path)
    assert sc.loc["comm-bound", "precision"] >= 0.95 and sc.loc["comm-bound", "recall"] >= 0.95, sc
    assert sc.loc["unattributed", "recall"] >= 0.95, sc  # periodic invisible waits: no pipeline, no bubble
    assert not (sc.loc["pipeline-bubble", "precision"] >= 0), sc  # nothing is called a bubble (NaN)
    trace = load(paths[0])
    ident = identify(trace)
    ranks = set(trace.events["rank"].unique().tolist())
    sendrecv = sum("SendRecv" in k.name for r in planted.scenario.ranks if r.rank in ranks for k in r.kernels)
    assert Counter(ident.collective.tolist()) == Counter({"all-to-all": sendrecv, "all-reduce": 2 * 8 * len(ranks)})
