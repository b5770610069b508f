"""The engine on the real traces in ../shared/traces: idle time per device against a plain count."""

from __future__ import annotations

import pytest
from conftest import needs_shared, shared_kineto, shared_nsys

import traceread
from traceread.config import Thresholds
from traceread.engine.gaps import find_gaps, with_fractions
from traceread.engine.step_totals import step_totals
from traceread.engine.steps import find_steps
from traceread.errors import UserFacingError

CFG = Thresholds()


def plain_busy(kernels: list[tuple[int, int]], lo: int, hi: int) -> int:
    """Covered length of [lo, hi) by the kernels: sort, then walk once."""
    total, reach = 0, lo
    for s, e in sorted(kernels):
        s, e = max(s, reach), min(e, hi)
        if e > s:
            total += e - s
            reach = e
    return total


@needs_shared
@pytest.mark.parametrize("path", shared_kineto() + shared_nsys(), ids=lambda p: p.name)
def test_idle_per_device_matches_a_plain_count(path):
    try:
        trace = traceread.load(path)
    except UserFacingError as exc:
        pytest.skip(f"not loadable: {exc}")
    steps = find_steps(trace, CFG).steps
    gaps = find_gaps(trace, steps)
    ev = trace.events
    compute = ev[(ev["lane"] == "gpu_compute") & ev["category"].isin(["kernel", "cuda_graph"])]
    by_dev = {k: list(zip(g["start_ns"].tolist(), g["end_ns"].tolist(), strict=True))
              for k, g in compute.groupby(["rank", "device"], observed=True)}
    gap_sum = gaps.groupby(["rank", "device", "step"])["dur_ns"].sum().to_dict()
    for st in steps.itertuples():
        kernels = by_dev.get((st.rank, st.device), [])
        busy = plain_busy(kernels, st.start_ns, st.end_ns)
        assert st.busy_ns == busy
        assert st.idle_ns == (st.end_ns - st.start_ns) - busy
        assert gap_sum.get((st.rank, st.device, st.step), 0) == st.idle_ns
    totals = step_totals(steps, gaps)
    assert (totals["busy_ns"] + totals["idle_ns"] == totals["step_ns"]).all()
    full = with_fractions(gaps)
    for k in [c for c in full.columns if c.endswith("_frac")]:
        assert full[k].between(0, 1).all(), k
