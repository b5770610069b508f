"""Peer waits: a communication kernel that starts late with nothing local to wait for is waiting for its peer.

tests/tracesynth/dp_pp.py ``peer_start=True``: every rank's all-reduce kernel starts only once the last rank
is there (launched where the rank reached it), so all kernels of one all-reduce start together and the
arrivals, read from kernel starts, are equal. The job model reads each rank's arrival from when it was ready
(``ready_ns``: its launch, the kernel before it on its stream, its compute before), the straggler is named, and the
straggler-free prediction (each rank's own step without its peer waits) matches the job simulated afresh
without the slow worker, Kineto and nsys.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from tracesynth.dp_pp import DpPpSpec, make_job, write_job

from traceread import load
from traceread.analysis import rank_summary
from traceread.ranks import identify
from traceread.runner import analyze

SPEC = DpPpSpec(dp=4, pp=1, slow_rank=2, slow_factor=1.5, seed=7, jitter=0.1, host_lead=True, peer_start=True)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    cache: dict[tuple[bool, str], tuple] = {}

    def get(slow: bool, fmt: str):
        if (slow, fmt) not in cache:
            spec = SPEC if slow else dataclasses.replace(SPEC, slow_factor=1.0)
            job = make_job(spec)
            analysis = analyze([load(p) for p in write_job(job, str(tmp_path_factory.mktemp("peer")), fmt=fmt)])
            assert analysis.job is not None
            cache[(slow, fmt)] = (job, analysis.job.reports[0], analysis)
        return cache[(slow, fmt)]
    return get


def test_kernels_start_together_but_ranks_were_ready_apart(runs):
    """The premise and the reading: equal kernel starts per all-reduce; ready times apart, the slow rank last."""
    _, _, analysis = runs(True, "kineto")
    sums = {i.rank: rank_summary(analysis, i) for t in analysis.inputs for i in identify(t)}
    starts = np.array([sums[r].collectives["start_ns"] + sums[r].identity.epoch_offset_ns for r in range(4)])
    ready = np.array([sums[r].collectives["ready_ns"] + sums[r].identity.epoch_offset_ns for r in range(4)])
    # every rank's clock is offset in the generator: compare within each rank (start minus ready)
    waited = starts - ready
    assert (waited[2] == 0).all()  # the slow rank never waits: it arrives last
    fast = [r for r in range(4) if r != 2]
    assert (waited[fast][:, 1:] > 1_000_000).all()  # the others wait milliseconds for it, every step after the first


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_straggler_named_and_removal_predicted(runs, fmt):
    job, rep, _ = runs(True, fmt)
    assert [s.rank for s in rep.stragglers] == [job.truth["slow_rank"]]
    s = rep.stragglers[0]
    assert s.cause == "compute" and s.attributed_share >= 0.9
    for r in rep.ranks:  # per-rank shares stay shares of the others' time
        assert r.waits is not None and 0.0 <= r.waits.share_of_others_time <= 1.0
    after_job, after, _ = runs(False, fmt)
    measured_after = after.step.median_job_step_ns
    assert abs(measured_after / float(np.median(after_job.truth["job_step_ns"][1:])) - 1) <= 0.01
    pred = rep.prediction
    assert pred is not None and pred.straggler_free_step_ns is not None
    # the peer waits are the others' waiting, not their own time: removing the straggler gains it all
    assert abs(pred.straggler_free_step_ns / measured_after - 1) <= 0.05, (pred.straggler_free_step_ns, measured_after)
    assert rep.step.median_job_step_ns >= 1.3 * measured_after
