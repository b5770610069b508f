"""The rules' context built for the claimable gaps only (``rules.JUDGED_SUBSET_SHARE``) classifies
exactly as the context of every gap does: same classes, evidence kinds, sentences and notes, on
planted traces of every class (both formats, with capture edges) and on the real traces."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import needs_shared, shared_kineto, shared_nsys
from tracesynth.kineto_writer import write_kineto
from tracesynth.nsys_writer import write_nsys
from tracesynth.planted import CLASSES, PlantSpec, plant

from traceread import load, rules
from traceread.config import Thresholds
from traceread.engine.gaps import find_gaps
from traceread.engine.steps import find_steps
from traceread.rules import evidence
from traceread.rules._base import RuleContext
from traceread.rules._columns import column_cache
from traceread.vocabulary import CAPTURE_BOUNDARY

CFG = Thresholds()


def _both_ways(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[pd.DataFrame, pd.DataFrame, int]:
    """The classification with the context of every gap and with that of the claimable ones only,
    and how many gaps the second left out."""
    trace = load(str(path))
    steps = find_steps(trace, CFG).steps.reset_index(drop=True)
    gaps = find_gaps(trace, steps, CFG)
    out = []
    for share in (0.0, 1.0):  # 0: never a subset; 1: whenever some gap is not claimable
        monkeypatch.setattr(rules, "JUDGED_SUBSET_SHARE", share)
        data = rules.classify(gaps, steps, trace, CFG, text=False)
        shown = data[[c for c in data.columns if not evidence.is_data(c)]].copy()
        shown["evidence"] = evidence.evidence_text(data, None, CFG)
        shown.attrs = dict(data.attrs)
        out.append(shown)
    with column_cache(gaps) as cols:
        left_out = int(np.count_nonzero(~rules._claimable(cols, rules._whole(cols, steps, trace, CFG), CFG)))
    return out[0], out[1], left_out


def _same(a: pd.DataFrame, b: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(a, b)
    assert a.attrs == b.attrs


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_planted_classes_alike(fmt: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = plant(PlantSpec(seed=5, ranks=2, steps=12, weights={c: 1.0 for c in CLASSES}))
    if fmt == "kineto":
        path = Path(write_kineto(p.scenario, str(tmp_path / "planted.pt.trace.json"))[0])
    else:
        path = Path(write_nsys(p.scenario, str(tmp_path / "planted.sqlite")))
    full, part, left_out = _both_ways(path, monkeypatch)
    assert left_out > 0  # the subset was taken: some gaps were not claimable
    assert full["class"].nunique() >= 5, full["class"].value_counts()  # most classes planted and found
    _same(full, part)


@needs_shared
@pytest.mark.parametrize("path", shared_kineto() + shared_nsys(), ids=lambda p: p.name)
def test_real_traces_alike(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trace = load(str(path))
    if find_steps(trace, CFG).steps.empty:
        pytest.skip("no steps")
    full, part, _ = _both_ways(path, monkeypatch)
    _same(full, part)


def test_only_the_capture_boundary_claims_an_unjudged_gap() -> None:
    """Why the context may leave out the gaps not judged: every mask but the capture boundary's
    requires ``judged`` (a rule added without it must be read for every gap)."""
    n = 6
    gaps = pd.DataFrame({"rank": np.zeros(n, np.int32), "device": np.zeros(n, np.int32), "step": np.ones(n),
                         "start_ns": np.arange(n) * 10**7, "end_ns": np.arange(n) * 10**7 + 5 * 10**6,
                         "dur_ns": np.full(n, 5 * 10**6), "comm_ns": np.full(n, 5 * 10**6),
                         "comm_collective_ns": np.full(n, 5 * 10**6), "comm_p2p_ns": np.full(n, 5 * 10**6),
                         "dataloader_ns": np.full(n, 5 * 10**6), "memcpy_htod_ns": np.full(n, 5 * 10**6),
                         "cpu_runtime_ns": np.full(n, 5 * 10**6), "sync_ns": np.full(n, 5 * 10**6),
                         "launch_count": np.full(n, 500), "step_p2p_count": np.ones(n)})
    every = np.ones(n, dtype=bool)
    ctx = RuleContext(judged=~every, queued=every, late=every, sync_at_drain=every, sync_name=np.full(n, "x", object),
                      sync_end_ns=gaps["end_ns"].to_numpy(),
                      sync_origin=np.full(n, "x", object), sync_wait_ns=np.full(n, 10**7),
                      dispatch=np.ones(n), dispatch_op=np.full(n, "x", object), api_call_ns=np.zeros(n, np.int64),
                      api_call_name=np.full(n, "", object), periodic=every, presence=np.ones(n), cv=np.zeros(n),
                      one_time_ns=np.full(n, 10**7), one_time_kind=np.full(n, "compile", object),
                      one_time_label=np.full(n, "x", object), one_time_count=np.ones(n, np.int64),
                      sync_blocked_ns=np.full(n, 10**7), sync_alloc_ns=np.zeros(n, np.int64),
                      sync_alloc_calls=np.zeros(n, np.int64), sync_block_start_ns=np.zeros(n, np.int64),
                      capture_kind=np.full(n, "", object), capture_text=np.full(n, "", object),
                      host_work_ns=np.full(n, 10**7), host_work_label=np.full(n, "x", object),
                      turnaround=~every, comm_tail_ns=np.zeros(n, np.int64),
                      host_stall_ns=np.full(n, 10**7), host_stall_op=np.full(n, "x", object), host_stall_recurs=every,
                      h2d_bytes=np.full(n, 1e10), h2d_copy_ns=np.full(n, 10**7), link_bps=np.full(n, 1e9),
                      host_comm_ns=np.full(n, 10**7), host_comm_name=np.full(n, "MPI_Recv", object),
                      sampled_ns=np.full(n, 10**7), sampled_label=np.full(n, "x", object))
    claims = {r.name: bool(np.asarray(r.mask(gaps, ctx, CFG)).any()) for r in rules.RULES}
    assert claims == {r.name: False for r in rules.RULES}
    judged = RuleContext(**{**{f: getattr(ctx, f) for f in ctx.__dataclass_fields__}, "judged": every})
    # the same evidence, judged: the masks do claim it (the test above is not vacuous)
    assert any(np.asarray(r.mask(gaps, judged, CFG)).any() for r in rules.RULES if r.name != CAPTURE_BOUNDARY)
