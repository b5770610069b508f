"""Job grouping of the dev traces in ../shared/traces (all in one folder: "same directory" must not
merge them). The expectations were read by hand from the files (distributedInfo, timestamps, nsys
processes) and are re-read here independently of the loaders where that is cheap."""

from __future__ import annotations

import gzip
import json

import pytest

from tests.conftest import SHARED_TRACES, needs_shared
from traceread import load
from traceread.ranks import group_jobs, identify

# One xdist worker runs this module's tests (tests/conftest.py ONE_WORKER_MODULES): its module-scoped ``groups`` is made once.
pytestmark = needs_shared
K = SHARED_TRACES / "kineto"
N = SHARED_TRACES / "nsys"
FILES = ["hta_sampled_rank0of128.json.gz", "hta_sampled_rank1of128.json.gz", "hta_nccl_a100_rank0of2.json.gz",
         "hta_compare_base.json.gz", "hta_compare_test.json.gz", "tracelens_vllm_graph_capture_rocm.json.gz",
         "tracelens_vllm_graph_replay_rocm.json.gz", "hta_legacy_categories_rank1.json.gz",
         "param_linear_rtx2080ti.json.gz"]


@pytest.fixture(scope="module")
def groups():
    ids = [i for f in FILES for i in identify(load(str(K / f)))]
    ids += identify(load(str(N / "nsysai_h100_2gpu_window_2026.sqlite")))
    return group_jobs(ids)


def _of(groups, name: str):
    found = [g for g in groups if any(m.path.endswith(name) for m in g.members)]
    assert len(found) == 1, (name, [g.name for g in found])
    return found[0]


def _dist(name: str) -> dict:
    with gzip.open(K / name) as fh:
        return json.load(fh).get("distributedInfo") or {}


def test_sampled_pair_is_one_job_with_126_missing(groups):
    assert _dist("hta_sampled_rank0of128.json.gz")["world_size"] == 128
    g = _of(groups, "hta_sampled_rank0of128.json.gz")
    assert {m.path.rsplit("/", 1)[-1] for m in g.members} == {"hta_sampled_rank0of128.json.gz",
                                                             "hta_sampled_rank1of128.json.gz"}
    assert g.world_size == 128 and g.ranks == (0, 1) and g.missing_ranks == tuple(range(2, 128))
    assert any("126 of 128 ranks have no trace: 2-127" in e for e in g.evidence)
    assert g.rule == "metadata"


def test_nccl_a100_is_its_own_job_with_rank_1_missing(groups):
    g = _of(groups, "hta_nccl_a100_rank0of2.json.gz")
    assert len(g.members) == 1 and g.world_size == 2 and g.ranks == (0,) and g.missing_ranks == (1,)


def test_compare_pair_is_a_reported_duplicate(groups):
    assert _dist("hta_compare_base.json.gz") == _dist("hta_compare_test.json.gz") == {"rank": 1}
    g = _of(groups, "hta_compare_base.json.gz")
    assert len(g.members) == 2 and g.ranks == (1,)
    assert g.duplicate_ranks == ((1, ("hta_compare_base.json.gz", "hta_compare_test.json.gz")),)
    assert any("identical timestamps" in e and "duplicate" in e for e in g.evidence)
    # the unrelated rank-1 trace of another day is not pulled in by the shared directory
    assert _of(groups, "hta_legacy_categories_rank1.json.gz") is not g


def test_vllm_capture_and_replay_are_separate(groups):
    cap = _of(groups, "tracelens_vllm_graph_capture_rocm.json.gz")
    rep = _of(groups, "tracelens_vllm_graph_replay_rocm.json.gz")
    assert cap is not rep and len(cap.members) == len(rep.members) == 1
    gap_s = (rep.start_epoch_ns - cap.end_epoch_ns) / 1e9
    assert 250 < gap_s < 253
    assert any("251.6 s apart" in e and "separate" in e for e in cap.evidence)


def test_nsys_export_holds_two_ranks(groups):
    g = _of(groups, "nsysai_h100_2gpu_window_2026.sqlite")
    assert g.rule == "nsys-export" and len(g.members) == 2 and g.ranks == (0, 1) and not g.missing_ranks
    assert {m.member for m in g.members} == {0, 1} and all(m.rank_source == "nsys-process" for m in g.members)


def test_trace_without_rank_is_not_rank_0(groups):
    g = _of(groups, "param_linear_rtx2080ti.json.gz")
    assert g.members[0].rank is None and g.ranks == () and g.rule == "single"


def test_every_input_in_exactly_one_group(groups):
    keys = [m.key for g in groups for m in g.members]
    assert len(keys) == len(set(keys)) == len(FILES) + 2
    assert len({g.name for g in groups}) == len(groups)


def test_sampled_pair_aligns_by_nearest_end_time():
    """The sampled pair's records are incomplete (calls dropped on each rank): matched by end time;
    read by hand: end times 1682725898187835 us and ...899182485/...899182493 us agree across ranks."""
    from traceread.analysis import rank_summary
    from traceread.ranks import analyze_job
    from traceread.runner import analyze

    traces = [load(str(K / f)) for f in FILES[:2]]
    a = analyze(traces)
    ids = [i for t in traces for i in identify(t)]
    rep = analyze_job([rank_summary(a, i) for i in ids], group=group_jobs(ids)[0])
    al = rep.alignment[1]
    assert "nearest end time" in al.method and al.matched >= 3
    assert abs(al.offset_ns) < 100_000 and al.end_spread_ns < 100_000
