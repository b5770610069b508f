"""The bus-bound copies' own lever (issue 43): fewer bytes over the link, predicted against the run with a smaller
batch, simulated afresh by tracesynth (``tracesynth.bus_copies``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import SHARED_TRACES, needs_shared
from tracesynth.bus_copies import BusSpec, bus_copies
from tracesynth.files import load_as

import traceread
from traceread.runner import analyze
from traceread.whatif import Fix, predict
from traceread.whatif.fixes import Bus


def _load(tmp_path: Path, spec: BusSpec, fmt: str) -> traceread.Trace:
    return load_as(bus_copies(spec), tmp_path, f"bus{spec.factor:g}", fmt)


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
@pytest.mark.parametrize("jitter", [0.1, 0.2])
@pytest.mark.parametrize("seed", [1, 2])
def test_fewer_bytes_over_the_bus_predicts_the_smaller_batch_run(tmp_path, fmt, jitter, seed) -> None:
    """The batch crosses the link at its full rate while the GPU waits (data-starved, kind bus-bound: loader
    workers would not help); the after run moves a batch 4x smaller. The bus lever divides the bus-bound copies'
    time by 4 and leaves the rest, their order on the stream included."""
    tb = _load(tmp_path, BusSpec(seed=seed, jitter=jitter), fmt)
    ta = _load(tmp_path, BusSpec(seed=seed, jitter=jitter, factor=4.0), fmt)
    ab, aa = analyze([tb]), analyze([ta])
    assert ab.gaps["evidence_kind"].astype(str).eq("bus-bound").sum() >= 5  # the rule names the bus
    w = predict([tb], ab.steps, ab.gaps, ab.cfg, [Bus(4.0), Fix("data-starved")])
    measured = predict([ta], aa.steps, aa.gaps, aa.cfg, [])
    assert w is not None and measured is not None
    bus = w.prediction("bus-bound=4")
    assert bus is not None and bus.step_ns is not None
    target = measured.measured_step_ns
    assert target < 0.7 * w.measured_step_ns  # the smaller batch is a real fix
    assert abs(bus.step_ns / target - 1) <= 0.05, (bus.step_ns, target)
    # prefetching alone (the data fix) hides the copies behind compute but keeps their bytes on the bus
    starved = w.prediction("data-starved")
    assert starved is not None and starved.step_ns is not None and starved.step_ns > bus.step_ns


def test_whatif_command_pulls_the_bus_lever_by_the_rules_evidence_name(tmp_path) -> None:
    """``--fix bus-bound=F`` (the data-starved rule's evidence kind) is the API's Bus(F): the same row and figure;
    without a factor, or with a bad one, it is a usage error."""
    import json

    from traceread.cli import main

    t = _load(tmp_path, BusSpec(seed=1, jitter=0.1), "kineto")
    a = analyze([t])
    api = predict([t], a.steps, a.gaps, a.cfg, [Bus(4.0)])
    js = tmp_path / "w.json"
    assert main(["whatif", t.meta.path, "--fix", "bus-bound=4", "--json", str(js)]) == 0
    rows = json.loads(js.read_text())["fixes"]
    assert [r["fix"] for r in rows] == ["bus-bound=4"]
    assert api is not None and rows[0]["step_ns"] == api.fixes[0].step_ns < api.measured_step_ns
    for bad in ("bus-bound", "bus-bound=", "bus-bound=0", "bus-bytes=4"):
        assert main(["whatif", t.meta.path, "--fix", bad]) == 2


def test_prefetched_copies_keep_the_bus_concurrency_of_the_trace() -> None:
    """Each prefetched batch copy waits for the copy it followed on the bus in the trace (the one ending last by its
    start): copies one after another stay a chain, copies that overlapped (two copy engines) stay two chains, and a
    zero-length copy is not its own predecessor."""
    from types import SimpleNamespace

    from traceread.whatif.loading import _bus_predecessors

    def pairs(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
        m = SimpleNamespace(time=np.array([s for s, _ in spans], dtype=np.int64),
                            dur=np.array([e - s for s, e in spans], dtype=np.int64))
        prev, cur = _bus_predecessors(m, np.arange(len(spans)))
        return sorted(zip(prev.tolist(), cur.tolist(), strict=True), key=lambda p: p[1])

    assert pairs([(0, 10), (10, 20), (25, 30)]) == [(0, 1), (1, 2)]
    assert pairs([(0, 10), (5, 15), (10, 20), (15, 25), (20, 30)]) == [(0, 2), (1, 3), (2, 4)]
    assert pairs([(0, 10), (10, 10), (12, 20)]) == [(0, 1), (1, 2)]


@needs_shared
def test_a_fix_for_concurrent_batch_copies_does_not_serialize_them() -> None:
    """The TPU v6e trace's infeed copies run about five at once (their total is 5x their union): prefetched, they keep
    that concurrency, so the data fix predicts no longer a step than measured (chained one after another, it
    predicted 3,680 ms for a 784 ms step)."""
    a = analyze([traceread.load(str(SHARED_TRACES / "formats" / "xprof_tpu_v6e_inference.xplane.pb"))])
    assert a.whatif is not None
    p = a.whatif.prediction("data-starved")
    assert p is not None and p.step_ns is not None
    assert p.step_ns <= a.whatif.measured_step_ns * 1.001
