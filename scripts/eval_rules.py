"""Score the rules against planted ground truth: confusion matrix by idle time, precision and recall.

    python scripts/eval_rules.py [--seeds 8] [--jitter 0.05] [--formats kineto,kineto-int-us,nsys] [--steps 8]

For every seed, a planted scenario (scripts/synth.py's generator, with class weights drawn per seed
between 0.5 and 2 occurrences per step) is written in each format (Kineto as PyTorch 2.4+ writes
it, Kineto with integer-microsecond timestamps as PyTorch 1.13-2.3 wrote it, nsys SQLite), loaded back with
``traceread.load`` and run through steps -> gaps -> rules. Classified idle time is compared with
the planted intervals nanosecond by nanosecond. The same seeds run again with the jitter doubled.
Prints markdown tables (README material) and exits 1 when a class misses its target
(precision and recall >= 0.95; >= 0.9 with doubled jitter).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

import click
import numpy as np
import pandas as pd

from traceread.config import Thresholds
from traceread.synth.planted import CLASSES, PlantSpec, classify_file, confusion, plant, truth_for

TARGET, TARGET_DOUBLED = 0.95, 0.90


def _weights(seed: int) -> dict[str, float]:
    rng = np.random.default_rng(10_000 + seed)
    return {c: float(np.round(rng.uniform(0.5, 2.0), 2)) for c in CLASSES}


def run(seeds: int, jitter: float, formats: list[str], steps: int, tmp: str, cfg: Thresholds
        ) -> tuple[pd.DataFrame, int, int]:
    """Summed confusion matrix (ns), uncovered ns and number of traces for one jitter level."""
    total = pd.DataFrame(0, index=list(CLASSES), columns=list(CLASSES), dtype=np.int64)
    uncovered = n = 0
    for seed in range(seeds):
        planted = plant(PlantSpec(seed=seed, steps=steps, jitter=jitter, weights=_weights(seed)))
        prefix = os.path.join(tmp, f"s{seed}_j{jitter}")
        paths = []
        if "kineto" in formats or "kineto-int-us" in formats:
            from traceread.synth.kineto_writer import write_kineto

            if "kineto" in formats:
                paths += write_kineto(planted.scenario, prefix + ".rank{rank}.pt.trace.json")
            if "kineto-int-us" in formats:
                paths += write_kineto(planted.scenario, prefix + ".us.rank{rank}.pt.trace.json", generation="int-us")
        if "nsys" in formats:
            from traceread.synth.nsys_writer import write_nsys

            paths.append(write_nsys(planted.scenario, prefix + ".sqlite"))
        for path in paths:
            classified = classify_file(path, cfg)
            mat, unc = confusion(classified, truth_for(planted.truth, classified, planted.scenario.origin_epoch_ns))
            total += mat
            uncovered += unc
            n += 1
    return total, uncovered, n


def _pr(mat: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    m = mat.to_numpy(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.diag(m) / m.sum(axis=0), np.diag(m) / m.sum(axis=1)


@click.command()
@click.option("--seeds", default=8, show_default=True)
@click.option("--jitter", default=0.05, show_default=True)
@click.option("--formats", default="kineto,kineto-int-us,nsys", show_default=True)
@click.option("--steps", default=8, show_default=True)
def main(seeds: int, jitter: float, formats: str, steps: int) -> None:
    cfg = Thresholds()
    fmts = [f.strip() for f in formats.split(",") if f.strip()]
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="traceread-eval-") as tmp:
        base, unc1, n1 = run(seeds, jitter, fmts, steps, tmp, cfg)
        doubled, unc2, n2 = run(seeds, 2 * jitter, fmts, steps, tmp, cfg)
    p1, r1 = _pr(base)
    p2, r2 = _pr(doubled)
    print(f"Rules vs planted causes: {n1} traces per jitter level ({seeds} seeds x {', '.join(fmts)}), "
          f"{steps} steps, 2 ranks; idle time compared ns by ns ({time.perf_counter() - t0:.0f} s).\n")
    print("| class | idle (ms) | precision | recall | precision, jitter x2 | recall, jitter x2 |")
    print("|---|---:|---:|---:|---:|---:|")
    ok = True
    for i, c in enumerate(CLASSES):
        print(f"| {c} | {base.loc[c].sum() / 1e6:.1f} | {p1[i]:.3f} | {r1[i]:.3f} | {p2[i]:.3f} | {r2[i]:.3f} |")
        ok &= bool(min(p1[i], r1[i]) >= TARGET and min(p2[i], r2[i]) >= TARGET_DOUBLED)
    print(f"\nConfusion by idle time (ms), jitter {jitter}; rows: planted, columns: classified\n")
    print("| planted \\ classified | " + " | ".join(CLASSES) + " |")
    print("|---|" + "---:|" * len(CLASSES))
    for c in CLASSES:
        print(f"| {c} | " + " | ".join(f"{base.loc[c, k] / 1e6:.2f}" for k in CLASSES) + " |")
    share = unc1 / max(int(base.to_numpy().sum()) + unc1, 1)
    print(f"\nClassified idle outside every planted interval: {share:.2%} (jitter {jitter}), "
          f"{unc2 / max(int(doubled.to_numpy().sum()) + unc2, 1):.2%} (jitter {2 * jitter}).")
    print(f"Targets (>= {TARGET} per class; >= {TARGET_DOUBLED} with doubled jitter): {'met' if ok else 'MISSED'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
