"""Score the rules against planted ground truth: confusion matrix by idle time, precision and recall.

    python scripts/eval_rules.py [--seeds 6] [--jitters 0.1,0.2] [--formats kineto,kineto-int-us,nsys]
                                 [--families mixed,pipeline,all-to-all]

Jitter is uniform: every duration is drawn in [1 - j, 1 + j] times its mean (0.2: +-20%). Families
(planted scenarios; each seed draws its own step count between 4 and 16):

* ``mixed``: tracesynth.planted (scripts/synth.py's generator): every class in one trace, class
  weights drawn per seed between 0.5 and 2 occurrences per step.
* ``pipeline``: tracesynth.pipeline_schedules.plant_pipeline: 4 stages running GPipe
  (fill/drain), 1F1B or interleaved 1F1B (by seed), 4 or 8 micro-batches, p2p as c10d send/recv
  or coalesced (batch_isend_irecv), bubbles waiting on p2p recvs, sometimes an exposed DP all-reduce.
* ``capture``: the ``mixed`` traces with capture boundaries (tracesynth.capture): at the start the
  GPU is still busy for 20-200 ms with work issued before the capture (the host queues and the
  first op waits, a synchronous DtoH copy waits, or a device sync waits: by seed), and the last step
  ends in a 20-100 ms stretch with nothing issued (the profiler shutting down); truth
  ``capture-boundary`` for both.
  The same traces with every GPU record dropped (``tracesynth.capture.lost_kernel_records``) must get
  the refusal that names lost kernel records (counted, part of the target).
* ``all-to-all``: plant_all_to_all: TorchRec-like embedding all-to-alls on SendRecv kernels that the
  compute waits on every step (comm-bound, not a pipeline), and periodic waits on an invisible event.
* ``host-side``: tracesynth.one_time's ``host-side`` scenario (2 ranks): per step a drain-sync then
  host work (sync-stall), a ``.item()`` that returns at once inside dense dispatch (launch-bound),
  inline batch preparation on the training thread (data-starved), a drain-sync then stronger
  evidence (DataLoader, inline input, recurring allocator calls, first-step compilation), and
  set-up / teardown ranges with pinned memory in two steps (one-time-cost).
* ``recurring``: tracesynth.one_time's ``recurring-copy`` scenario (2 ranks): the same gap in every step
  (the same kernels before and after it), its batch's H2D copy holding 43-66% of it, around the 50%
  cover threshold: one recurring gap, data-starved in every step (issue 42: one class per recurring gap).
* ``ranks``: tracesynth.one_time's ``ranks-copy`` scenario (2 ranks), scored through the analysis of the
  job (every file together, as ``traceread analyze`` of a job's files reads them): the same batch copy
  holding 56-62% of the gap on rank 0 and 42-47% on rank 1 in every step: one recurring gap of the job,
  data-starved on both ranks (issue 42: the same across the ranks of a job).

Every trace is written in each format (Kineto as PyTorch 2.4+ writes it, Kineto with integer-
microsecond timestamps as PyTorch 1.13-2.3 wrote it, nsys SQLite), loaded back with
``traceread.load`` and run through steps -> gaps -> rules. Classified idle time is compared with
the planted intervals nanosecond by nanosecond. Prints markdown tables (precision and recall by time
per class, per format and jitter) and exits 1 when a class misses the target (>= 0.95 everywhere).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

import click
import numpy as np
import pandas as pd
import tests_on_path  # noqa: F401 - puts tests/ on sys.path for tracesynth
from tracesynth.capture import KINDS as CAPTURE_KINDS
from tracesynth.one_time import plant_scenario
from tracesynth.pipeline_schedules import (
    SCHEDULES,
    AllToAllSpec,
    PipelineSpec,
    plant_all_to_all,
    plant_pipeline,
)
from tracesynth.planted import CLASSES, Planted, PlantSpec, classify_file, confusion, plant, truth_for

from traceread.config import Thresholds

TARGET = 0.95


def _weights(seed: int) -> dict[str, float]:
    rng = np.random.default_rng(10_000 + seed)
    # capture-boundary is planted at the capture's edges (family 'capture'), not per step: no weight (and
    # the other classes keep the draws they had before it existed).
    return {c: float(np.round(rng.uniform(0.5, 2.0), 2)) for c in CLASSES if c != "capture-boundary"}


def _steps(family: str, seed: int) -> int:
    return int(np.random.default_rng(20_000 + seed + 1_000 * len(family)).integers(4, 17))


def plant_family(family: str, seed: int, jitter: float) -> Planted:
    """One planted trace of ``family`` (see module docstring)."""
    steps = _steps(family, seed)
    if family == "mixed":
        return plant(PlantSpec(seed=seed, steps=steps, jitter=jitter, jitter_dist="uniform", weights=_weights(seed)))
    if family == "capture":
        rng = np.random.default_rng(30_000 + seed)
        return plant(PlantSpec(seed=seed, steps=steps, jitter=jitter, jitter_dist="uniform", weights=_weights(seed),
                               capture_lead=CAPTURE_KINDS[seed % len(CAPTURE_KINDS)],
                               capture_lead_ns=int(rng.uniform(20e6, 200e6)),
                               capture_tail_ns=int(rng.uniform(20e6, 100e6))))
    if family == "pipeline":
        return plant_pipeline(PipelineSpec(seed=seed, schedule=SCHEDULES[seed % len(SCHEDULES)], steps=steps,
                                           jitter=jitter, microbatches=(4, 8)[(seed // 3) % 2],
                                           coalesced=seed % 2 == 1, broken_ext=seed % 4 >= 2))
    if family == "all-to-all":
        return plant_all_to_all(AllToAllSpec(seed=seed, steps=steps, jitter=jitter, broken_ext=seed % 2 == 0))
    if family == "host-side":
        return plant_scenario("host-side", seed=seed, jitter=jitter, steps=steps, uniform=True)
    if family == "recurring":
        return plant_scenario("recurring-copy", seed=seed, jitter=jitter, steps=steps, uniform=True)
    if family == "ranks":
        return plant_scenario("ranks-copy", seed=seed, jitter=jitter, steps=steps, uniform=True)
    raise click.BadParameter(f"unknown family {family!r}")


FAMILIES = ("mixed", "pipeline", "all-to-all", "capture", "host-side", "recurring", "ranks")
# Families scored through the analysis of the job (every file of the trace together), not file by file.
JOB_FAMILIES = ("ranks",)


def _write(planted: Planted, fmt: str, prefix: str) -> list[str]:
    if fmt == "nsys":
        from tracesynth.nsys_writer import write_nsys

        return [write_nsys(planted.scenario, prefix + ".sqlite")]
    from tracesynth.kineto_writer import write_kineto

    gen = "int-us" if fmt == "kineto-int-us" else "2024"
    return write_kineto(planted.scenario, prefix + f".{fmt}.rank{{rank}}.pt.trace.json", generation=gen)


def run(seeds: int, jitter: float, fmt: str, families: list[str], tmp: str, cfg: Thresholds
        ) -> tuple[pd.DataFrame, int, int]:
    """Summed confusion matrix (ns), uncovered ns and number of traces for one format and jitter."""
    total = pd.DataFrame(0, index=list(CLASSES), columns=list(CLASSES), dtype=np.int64)
    uncovered = n = 0
    for family in families:
        for seed in range(seeds):
            planted = plant_family(family, seed, jitter)
            paths = _write(planted, fmt, os.path.join(tmp, f"{family}_s{seed}_j{jitter}"))
            frames = _classify_job(paths, cfg) if family in JOB_FAMILIES else [classify_file(p, cfg) for p in paths]
            for path, classified in zip(paths, frames, strict=True):
                mat, unc = confusion(classified, truth_for(planted.truth, classified,
                                                          planted.scenario.origin_epoch_ns))
                total += mat
                uncovered += unc
                n += 1
                os.unlink(path)
    return total, uncovered, n


def _classify_job(paths: list[str], cfg: Thresholds) -> list[pd.DataFrame]:
    """Each file's classified gaps from the analysis of all of them as one job (``traceread.runner.analyze``:
    a recurring gap is one class across the files of a job), in the time base ``classify_file`` gives."""
    from traceread import load
    from traceread.runner import analyze

    traces = [load(p) for p in paths]
    gaps = analyze(traces, cfg=cfg).gaps
    out = []
    for i, t in enumerate(traces):
        g = gaps[gaps["trace"].to_numpy() == i].reset_index(drop=True)
        g.attrs["epoch_offset_ns"] = t.meta.epoch_offset_ns or 0
        out.append(g)
    return out


def _lost_records_named(seeds: int, fmts: list[str]) -> tuple[int, int]:
    """How many lost-kernel-record variants of the capture family get the refusal that names them."""
    from tracesynth.capture import lost_kernel_records

    from traceread import load
    from traceread.runner import analyze

    named = total = 0
    with tempfile.TemporaryDirectory(prefix="traceread-lost-") as tmp:
        for fmt in fmts:
            for seed in range(seeds):
                planted = plant_family("capture", seed, 0.1)
                lost = Planted(lost_kernel_records(planted.scenario), planted.truth, planted.spec)
                for path in _write(lost, fmt, os.path.join(tmp, f"lost_s{seed}")):
                    a = analyze([load(path)], cfg=Thresholds())
                    named += int(a.dominant_cause == "no-gpu-activity" and "kernel records lost" in a.refusal)
                    total += 1
                    os.unlink(path)
    return named, total


def _pr(mat: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    m = mat.to_numpy(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.diag(m) / m.sum(axis=0), np.diag(m) / m.sum(axis=1)


@click.command()
@click.option("--seeds", default=6, show_default=True, help="seeds per family")
@click.option("--jitters", default="0.1,0.2", show_default=True)
@click.option("--formats", default="kineto,kineto-int-us,nsys", show_default=True)
@click.option("--families", default=",".join(FAMILIES), show_default=True)
def main(seeds: int, jitters: str, formats: str, families: str) -> None:
    cfg = Thresholds()
    fmts = [f.strip() for f in formats.split(",") if f.strip()]
    fams = [f.strip() for f in families.split(",") if f.strip()]
    levels = [float(j) for j in jitters.split(",") if j.strip()]
    t0 = time.perf_counter()
    results: dict[tuple[str, float], tuple[pd.DataFrame, int, int]] = {}
    with tempfile.TemporaryDirectory(prefix="traceread-eval-") as tmp:
        for fmt in fmts:
            for jit in levels:
                results[(fmt, jit)] = run(seeds, jit, fmt, fams, tmp, cfg)
    n = next(iter(results.values()))[2]
    print(f"Rules vs planted causes: {n} traces per format and jitter level ({seeds} seeds x {', '.join(fams)}; "
          f"4-16 steps), uniform jitter; idle time compared ns by ns ({time.perf_counter() - t0:.0f} s).\n")
    cols = [(f, j) for f in fmts for j in levels]
    print("| class | " + " | ".join(f"{f} +-{j:.0%} P / R" for f, j in cols) + " |")
    print("|---|" + "---:|" * len(cols))
    ok = True
    scores = {k: _pr(v[0]) for k, v in results.items()}
    for i, c in enumerate(CLASSES):
        cells = []
        for k in cols:
            p, r = scores[k][0][i], scores[k][1][i]
            cells.append(f"{p:.3f} / {r:.3f}")
            ok &= all(np.isnan(x) or x >= TARGET for x in (p, r))  # NaN: the class has no time here
        print(f"| {c} | " + " | ".join(cells) + " |")
    for (fmt, jit), (mat, unc, _) in results.items():
        if jit != max(levels):
            continue
        print(f"\nConfusion by idle time (ms), {fmt}, jitter +-{jit:.0%}; rows: planted, columns: classified\n")
        print("| planted \\ classified | " + " | ".join(CLASSES) + " |")
        print("|---|" + "---:|" * len(CLASSES))
        for c in CLASSES:
            print(f"| {c} | " + " | ".join(f"{mat.loc[c, k] / 1e6:.2f}" for k in CLASSES) + " |")
        share = unc / max(int(mat.to_numpy().sum()) + unc, 1)
        print(f"\nClassified idle outside every planted interval: {share:.2%}.")
    if "capture" in fams:
        named, total = _lost_records_named(seeds, fmts)
        print(f"\nLost kernel records (the capture family's traces with every GPU record dropped): the refusal names "
              f"them in {named} of {total} traces.")
        ok &= named == total
    print(f"\nTarget (precision and recall >= {TARGET} per class, every format and jitter): "
          f"{'met' if ok else 'MISSED'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
