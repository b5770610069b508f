"""Steps inferred with no step markers: planted loops in both formats, and real traces stripped of theirs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import SHARED_TRACES, needs_shared
from tracesynth.kineto_writer import write_kineto
from tracesynth.nsys_writer import write_nsys
from tracesynth.repeating import forward_passes, loop

from traceread.config import Thresholds
from traceread.engine.steps import find_steps
from traceread.loaders import load
from traceread.render.notes import text as words  # notes are data; the reports word them
from traceread.trace import Trace

MARKERS = r"^(?:ProfilerStep#\d+|Optimizer\.step#.*|Optimizer\.zero_grad#.*|enumerate\(DataLoader\)#.*)$"


def _load(lp, fmt: str, tmp_path) -> Trace:
    path = tmp_path / ("t.json" if fmt == "kineto" else "t.sqlite")
    (write_kineto if fmt == "kineto" else write_nsys)(lp.scenario, path)
    return load(path)


def _truth(lp, rank: int = 0) -> np.ndarray:
    """Planted step times: start to the next step's start; the last to its last kernel's end."""
    s = lp.step_starts[rank]
    return np.append(np.diff(s), lp.step_ends[rank][-1] - s[-1])


def _steady_median(res) -> float:
    s = res.steps
    return float(np.median((s["end_ns"] - s["start_ns"]).to_numpy()))


CASES = [(fmt, n, seed) for fmt in ("kineto", "nsys") for n, seed in ((4, 0), (5, 1), (8, 2), (11, 3), (16, 4))]


@pytest.mark.parametrize(("fmt", "steps", "seed"), CASES)
def test_kernel_period_finds_every_step(fmt: str, steps: int, seed: int, tmp_path) -> None:
    lp = loop(steps=steps, layers=2 + seed % 3, seed=seed, jitter=0.2, profiler=False)
    res = find_steps(_load(lp, fmt, tmp_path), Thresholds())
    assert res.source == "inferred:kernel-period"
    assert len(res.steps) == steps
    assert _steady_median(res) == pytest.approx(np.median(_truth(lp)), rel=0.02)
    assert any("repeating sequence of kernels" in n for n in map(words, res.notes))


@pytest.mark.parametrize(("fmt", "steps", "seed"), CASES)
def test_repeating_nvtx_range_is_the_step(fmt: str, steps: int, seed: int, tmp_path) -> None:
    lp = loop(steps=steps, layers=3, seed=seed + 10, jitter=0.2, profiler=False, nvtx_name="train_step")
    res = find_steps(_load(lp, fmt, tmp_path), Thresholds())
    assert res.source == "inferred:nvtx:train_step"
    assert len(res.steps) == steps
    assert _steady_median(res) == pytest.approx(np.median(_truth(lp)), rel=0.02)


def test_two_ranks_each_get_their_steps(tmp_path) -> None:
    lp = loop(steps=6, ranks=2, seed=7, jitter=0.2, profiler=False)
    res = find_steps(_load(lp, "nsys", tmp_path), Thresholds())
    assert res.source == "inferred:kernel-period"
    assert res.steps.groupby("rank").size().tolist() == [6, 6]


def test_markers_still_win(tmp_path) -> None:
    lp = loop(steps=6, seed=3, jitter=0.2, profiler=True, nvtx_name="train_step")
    assert find_steps(_load(lp, "kineto", tmp_path), Thresholds()).source == "ProfilerStep"


def test_a_range_holding_part_of_the_work_is_not_the_step(tmp_path) -> None:
    """A range per step around only its first kernels (a 'forward' range) does not make steps."""
    lp = loop(steps=6, seed=5, jitter=0.2, profiler=False)
    rk = lp.scenario.ranks[0]
    from tracesynth.model import HostRange

    for s in lp.step_starts[0]:
        rk.host_ranges.append(HostRange(100, "forward", int(s), int(s) + 200_000))
    res = find_steps(_load(lp, "kineto", tmp_path), Thresholds())
    assert res.source == "inferred:kernel-period" and len(res.steps) == 6


def test_no_repetition_stays_one_window(tmp_path) -> None:
    lp = loop(steps=5, seed=2, jitter=0.2, profiler=False)
    rng = np.random.default_rng(0)
    for k in lp.scenario.ranks[0].kernels:  # every kernel a different name: nothing repeats
        k.name = f"kernel_{rng.integers(1 << 40)}"
    res = find_steps(_load(lp, "nsys", tmp_path), Thresholds())
    assert res.source == "gpu-span" and len(res.steps) == 1


FORMATS_JITTER = [(fmt, jitter, seed) for fmt in ("kineto", "nsys") for jitter, seed in ((0.1, 0), (0.2, 1))]


@pytest.mark.parametrize(("fmt", "jitter", "seed"), FORMATS_JITTER)
def test_one_forward_with_repeated_layers_is_one_step(fmt: str, jitter: float, seed: int, tmp_path) -> None:
    """No annotation: 24 layers between an embedding and a head are one pass, not 24 steps."""
    lp = forward_passes(passes=1, layers=24, jitter=jitter, seed=seed)
    res = find_steps(_load(lp, fmt, tmp_path), Thresholds())
    assert res.source == "gpu-span" and len(res.steps) == 1
    assert any("One forward pass with 24 repeated layers: treated as one step" in n for n in map(words, res.notes))


@pytest.mark.parametrize(("fmt", "jitter", "seed"), FORMATS_JITTER)
def test_a_single_range_spanning_the_forward_is_the_step(fmt: str, jitter: float, seed: int, tmp_path) -> None:
    lp = forward_passes(passes=1, layers=24, jitter=jitter, seed=seed, annotation="execute_8192_context_9")
    res = find_steps(_load(lp, fmt, tmp_path), Thresholds())
    assert res.source == "inferred:nvtx:execute_8192_context_9" and len(res.steps) == 1
    assert any("One forward pass with 24 repeated layers" in n for n in map(words, res.notes))
    step = res.steps.iloc[0]
    assert step["end_ns"] >= lp.step_ends[0][-1]  # the whole pass, its GPU lag included


@pytest.mark.parametrize(("fmt", "jitter", "seed"), FORMATS_JITTER)
@pytest.mark.parametrize("passes", [2, 5])
def test_uniquely_numbered_ranges_are_the_steps(fmt: str, jitter: float, seed: int, passes: int, tmp_path) -> None:
    lp = forward_passes(passes=passes, layers=12, jitter=jitter, seed=seed, annotation="step[{n}]")
    res = find_steps(_load(lp, fmt, tmp_path), Thresholds())
    assert res.source == "inferred:nvtx:step[#]" and len(res.steps) == passes
    assert _steady_median(res) == pytest.approx(np.median(_truth(lp)), rel=0.05)


@pytest.mark.parametrize(("fmt", "jitter", "seed"), FORMATS_JITTER)
@pytest.mark.parametrize("passes", [2, 4])
def test_several_passes_with_repeated_layers_are_steps_of_passes(fmt: str, jitter: float, seed: int, passes: int,
                                                                  tmp_path) -> None:
    """No annotation: the pass repeats (only twice, or more) and wins over its layer."""
    lp = forward_passes(passes=passes, layers=16, jitter=jitter, seed=seed)
    res = find_steps(_load(lp, fmt, tmp_path), Thresholds())
    assert res.source == "inferred:kernel-period" and len(res.steps) == passes
    assert _steady_median(res) == pytest.approx(np.median(_truth(lp)), rel=0.05)


def test_the_profilers_own_range_is_never_the_step(tmp_path) -> None:
    lp = forward_passes(passes=1, layers=24, seed=3)
    rk = lp.scenario.ranks[0]
    from tracesynth.model import HostRange

    rk.host_ranges.append(HostRange(100, "PyTorch Profiler (0)", 0, int(lp.step_ends[0][-1]) + 1_000_000))
    res = find_steps(_load(lp, "kineto", tmp_path), Thresholds())
    assert res.source == "gpu-span" and len(res.steps) == 1


def test_a_training_loop_with_repeated_layers_keeps_its_iterations(tmp_path) -> None:
    """Several real iterations, each with 8 layers forward and backward: the iteration, not the layer."""
    lp = loop(steps=5, layers=8, seed=11, jitter=0.2, profiler=False)
    res = find_steps(_load(lp, "nsys", tmp_path), Thresholds())
    assert res.source == "inferred:kernel-period" and len(res.steps) == 5


@needs_shared
def test_vllm_forward_is_one_step_not_24_layers() -> None:
    """One execute_... range around a 24-layer forward (kernels on device 2, no ProfilerStep)."""
    res = find_steps(load(SHARED_TRACES / "kineto/tracelens_vllm_piecewise_exec_mi300x.json.gz"), Thresholds())
    assert res.source.startswith("inferred:nvtx:execute_8192") and len(res.steps) == 1
    assert any("One forward pass with 24 repeated layers: treated as one step" in n for n in map(words, res.notes))


def _strip(trace: Trace) -> Trace:
    ev = trace.events
    keep = ~ev["name"].astype(str).str.match(MARKERS).to_numpy()
    out = ev[keep].reset_index(drop=True)
    for c in out.columns:
        if isinstance(out[c].dtype, type(ev["name"].dtype)):
            out[c] = out[c].cat.remove_unused_categories()
    return Trace(out, dataclasses.replace(trace.meta, steps=None), {})


@needs_shared
@pytest.mark.parametrize("name", ["kineto/hta_nccl_a100_rank0of2.json.gz",
                                  "kineto/kineto2021_resnet50_bare_list.pt.trace.json.gz",
                                  "kineto/param_linear_rtx2080ti.json.gz"])
def test_real_traces_stripped_of_markers(name: str) -> None:
    """Inferred steps match the recorded ones (count, and median within 3%: boundaries move to launches)."""
    trace = load(SHARED_TRACES / name)
    marked = find_steps(trace, Thresholds())
    inferred = find_steps(_strip(trace), Thresholds())
    assert inferred.source == "inferred:kernel-period"
    assert len(inferred.steps) == len(marked.steps)
    assert _steady_median(inferred) == pytest.approx(_steady_median(marked), rel=0.03)
