"""Step inference against recorded steps: every trace as recorded, and with its step markers stripped.

    python scripts/step_inference_check.py [TRACE ...]   # default: every trace in ../shared/traces

Prints, per trace, the step source, step count and median step time with markers and without
(``ProfilerStep#``, ``Optimizer.step#``, ``Optimizer.zero_grad#``, ``enumerate(DataLoader)#`` rows
dropped and ``meta.steps`` cleared), and the relative difference of the medians.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np

from traceread.config import Thresholds
from traceread.engine.steps import find_steps
from traceread.loaders import load
from traceread.trace import Trace

MARKERS = r"^(?:ProfilerStep#\d+|Optimizer\.step#.*|Optimizer\.zero_grad#.*|enumerate\(DataLoader\)#.*)$"


def strip_markers(trace: Trace) -> Trace:
    ev = trace.events
    out = ev[~ev["name"].astype(str).str.match(MARKERS).to_numpy()].reset_index(drop=True)
    for col in out.columns:
        if str(out[col].dtype) == "category":
            out[col] = out[col].cat.remove_unused_categories()
    return Trace(out, dataclasses.replace(trace.meta, steps=None), {})


def _summary(trace: Trace) -> tuple[str, int, float]:
    res = find_steps(trace, Thresholds())
    s = res.steps[~res.steps["warmup"]]
    n = int(res.steps.groupby(["rank", "device"]).size().max()) if len(res.steps) else 0
    med = float(np.median((s["end_ns"] - s["start_ns"]).to_numpy())) / 1e6 if len(s) else float("nan")
    return res.source, n, med


def main(paths: list[str]) -> None:
    if not paths:
        shared = Path(__file__).resolve().parents[1].parent / "shared" / "traces"
        paths = sorted(str(p) for p in shared.glob("*/*") if p.suffix != ".md")
    print(f"{'trace':46} {'with markers':>40}   {'markers stripped':>44}  diff")
    for p in paths:
        trace = load(p)
        a, b = _summary(trace), _summary(strip_markers(trace))
        diff = f"{b[2] / a[2] - 1:+.1%}" if a[2] == a[2] and a[2] > 0 and b[2] == b[2] else ""
        print(f"{Path(p).name[:46]:46} {a[0][:22]:>22} {a[1]:4d} {a[2]:10.3f} ms   "
              f"{b[0][:26]:>26} {b[1]:4d} {b[2]:10.3f} ms  {diff}")


if __name__ == "__main__":
    main(sys.argv[1:])
