"""find_gaps against a plain, slow reference on random micro-traces (hypothesis)."""

from __future__ import annotations

from _frames import annotation, api, comm, kernel, make_events
from hypothesis import given, settings
from hypothesis import strategies as st

from traceread.config import Thresholds
from traceread.engine.gaps import OVERLAP_KINDS, find_gaps, with_fractions
from traceread.engine.step_totals import step_totals
from traceread.engine.steps import find_steps

CFG = Thresholds()
span = st.tuples(st.integers(0, 120), st.integers(0, 25)).map(lambda t: (t[0], t[0] + t[1]))


def points(ivs):
    out = set()
    for s, e in ivs:
        out.update(range(s, e))
    return out


def runs(ts):
    res = []
    for t in sorted(ts):
        if res and res[-1][1] == t:
            res[-1][1] = t + 1
        else:
            res.append([t, t + 1])
    return [tuple(r) for r in res]


@settings(max_examples=40, deadline=None)
@given(k7=st.lists(span, max_size=8), k8=st.lists(span, max_size=8), cm=st.lists(span, max_size=4),
       calls=st.lists(span, max_size=6), cuts=st.lists(st.integers(1, 140), min_size=1, max_size=4, unique=True))
def test_gaps_equal_reference(k7, k8, cm, calls, cuts):
    bounds = [0, *sorted(cuts)]
    if bounds[-1] == 0:
        return
    rows = [annotation(f"ProfilerStep#{i + 1}", a, b) for i, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False))]
    rows += [kernel(s, e, stream=7) for s, e in k7] + [kernel(s, e, stream=8) for s, e in k8]
    rows += [comm(s, e) for s, e in cm] + [api("cudaLaunchKernel", s, e) for s, e in calls]
    if not k7 and not k8 and not cm:
        rows.append(kernel(0, 0))  # the device must exist
    trace = make_events(rows)
    steps = find_steps(trace, CFG).steps
    gaps = find_gaps(trace, steps)
    busy = points(k7 + k8)
    want = []
    for i, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False)):
        want += [(i + 1, s, e) for s, e in runs(set(range(a, b)) - busy)]
    got = list(zip(gaps["step"], gaps["start_ns"], gaps["end_ns"], strict=False))
    assert got == want
    comm_pts, cpu_pts = points(cm), points(calls)
    for g in gaps.itertuples():
        gap = set(range(g.start_ns, g.end_ns))
        assert not gap & busy  # gaps never overlap compute
        assert g.comm_ns == len(gap & comm_pts)
        assert g.cpu_runtime_ns == len(gap & cpu_pts)
        assert g.launch_count == sum(g.start_ns <= s < g.end_ns for s, _ in calls)
        assert g.longest_cpu_ns == max([len(gap & set(range(s, e))) for s, e in calls], default=0)
    full = with_fractions(gaps)
    for k in OVERLAP_KINDS:
        assert ((full[f"{k}_frac"] >= 0) & (full[f"{k}_frac"] <= 1)).all()
    totals = step_totals(steps, gaps)
    assert (totals["busy_ns"] + totals["idle_ns"] == totals["step_ns"]).all()
    for t in totals.itertuples():
        a, b = bounds[t.step - 1], bounds[t.step]
        assert t.busy_ns == len(set(range(a, b)) & busy)
