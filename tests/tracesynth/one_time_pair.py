"""The one-time-cost fix's pair (issue 43): a run that pays its one-time work in the first steps, and the same run
with warm caches (``OncePair(warm=True)``), simulated afresh.

Each step is busy compute, the step's one-time work (below), more compute, and ``loss.item()`` (the host waits for
the drain, as a training loop does). The one-time work, from ``tracesynth.one_time``:

* step 0: a module-loading run (``cuLibraryLoadData`` calls with host time between them);
* steps 0-1: a compile window (NVRTC/Inductor ranges) before a new fused kernel's first launch;
* steps 0-2: a new kernel's first launch that loads its module inside ``cudaLaunchKernel`` (lazy loading).

The warm run skips the loading and compiling (the kernels were compiled and their modules loaded before the
capture) but runs the same kernels: the compiled kernel, and the first launch at an ordinary launch's cost. Both
runs take the same draws in the same order (the one-time work draws from its own stream), and the warm run queues
the kernels the cold run queued to get ahead of the GPU (``_Sim.ahead_script``): only the one-time work differs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracesynth.model import Scenario
from tracesynth.one_time import _compile, _item_sync, _module_run, _new_kernel
from tracesynth.planted import COMPUTE, _Sim

_LAUNCH_NS = 4_500  # an ordinary launch call's mean cost (planted._Sim.kernel's draw)


@dataclass(frozen=True)
class OncePair:
    seed: int = 1
    steps: int = 8
    jitter: float = 0.1
    warm: bool = False  # the after run: nothing is loaded or compiled during the capture
    kinds: tuple[str, ...] = ("module-load", "compile", "first-launch")  # the one-time work planted


def _one_time(sim: _Sim, gap: int, kind: str, warm: bool, side: np.random.Generator) -> None:
    sim.ahead()
    sim.pending = "one-time-cost"
    until = sim.free[COMPUTE] + max(gap, 1_500_000) - 20_000
    if kind == "first-launch":  # the module loads inside the launch call; warm: an ordinary launch
        sim.kernel(_new_kernel(sim), sim.j(80_000), launch_ns=_LAUNCH_NS if warm else max(until - sim.h, 1_300_000))
        return
    if not warm:
        main, sim.rng = sim.rng, side  # the one-time work's own draws: the warm run takes none of them
        (_compile if kind == "compile" else _module_run)(sim, until)
        sim.rng = main
    sim.kernel(_new_kernel(sim), sim.j(80_000))


def _simulate(spec: OncePair, seed: int, warm: bool, script: list[int] | None) -> _Sim:
    sim = _Sim(0, np.random.default_rng(seed), spec.jitter, True)
    sim.ahead_script = list(script) if script is not None else None
    side = np.random.default_rng(seed + 1)
    for n in range(spec.steps):
        start = sim.h
        sim.busy(int(sim.rng.integers(6, 12)))
        gap = int(sim.j(sim.rng.uniform(1_500_000, 3_000_000)))
        if n == 0 and "module-load" in spec.kinds:
            _one_time(sim, 4 * gap, "module-load", warm, side)
            sim.busy(3)
        if n < 2 and "compile" in spec.kinds:
            _one_time(sim, gap, "compile", warm, side)
            sim.busy(3)
        if n < 3 and "first-launch" in spec.kinds:
            _one_time(sim, gap, "first-launch", warm, side)
        sim.busy(int(sim.rng.integers(6, 12)))
        sim.ahead()
        _item_sync(sim)
        sim.h += 2_000
        sim.op(f"ProfilerStep#{n}", start, sim.h, is_op=False)
    return sim


def once_pair(spec: OncePair) -> Scenario:
    """The cold run of ``spec``, or its warm twin (module doc)."""
    seed = int(np.random.default_rng(spec.seed).integers(1 << 62))
    script = _simulate(spec, seed, False, None).ahead_log if spec.warm else None
    sim = _simulate(spec, seed, spec.warm, script)
    return Scenario(ranks=[sim.rk], world_size=1)
