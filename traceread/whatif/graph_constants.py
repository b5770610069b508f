"""The CUDA-graph model's constants per GPU generation, with their sources (docs/whatif.md).

The launch-bound fix (:mod:`traceread.whatif.graphs`) needs what a graph launch costs and how far apart a replayed
graph runs its kernels. A trace holding graph launches gives both itself; one without takes its GPU generation's
figure from :data:`GRAPH_CONSTANTS`, and a generation (or figure) with no public source falls back on the generic
``whatif_graph_launch_ns`` / ``whatif_graph_kernel_gap_ns``. A figure the user set (``--set``, a config file) wins
over the table.

The generation is read from the device names the trace carries, matched as the peak table matches them
(:func:`traceread.metrics.peaks.match_gpu`); every row of that table names its generation in :data:`GENERATIONS`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

from traceread.config import Thresholds
from traceread.metrics.peaks import match_gpu
from traceread.trace import Trace

# The generation of each peak-table row (traceread.metrics.peaks.PEAK_TABLE keys); TPUs run no CUDA/HIP graphs
GENERATIONS: dict[str, str] = {
    "V100S-PCIE": "Volta", "V100-PCIE": "Volta", "V100-SXM2": "Volta",
    "A100-PCIE-40GB": "Ampere", "A100-PCIE-80GB": "Ampere", "A100-SXM4-80GB": "Ampere", "A100-SXM4-40GB": "Ampere",
    "A10": "Ampere", "RTX-3090": "Ampere", "RTX-3080": "Ampere",
    "L40S": "Ada", "L4": "Ada",
    "H100-NVL": "Hopper", "H100-PCIE": "Hopper", "H100-SXM": "Hopper", "H800-PCIE": "Hopper", "H800-SXM": "Hopper",
    "H200-NVL": "Hopper", "H200-SXM": "Hopper", "GH200-HBM3E": "Hopper", "GH200": "Hopper",
    "GB200": "Blackwell", "B200": "Blackwell",
    "MI210": "CDNA2", "MI250X": "CDNA2", "MI250": "CDNA2",
    "MI300X": "CDNA3", "MI325X": "CDNA3", "MI355X": "CDNA4",
    "GP100": "Pascal", "RTX-2080-TI": "Turing",
    "TPU-v6e": "TPU", "TPU-v5e": "TPU", "TPU-v5p": "TPU", "TPU-v4": "TPU",
}


@dataclass(frozen=True)
class GraphConstants:
    """One generation's sourced figures; None where no public source gives one (the generic constant is used)."""

    generation: str
    launch_ns: int | None  # what a graph launch costs before its first kernel (ns)
    kernel_gap_ns: int | None  # the gap between consecutive kernels of a replayed graph (ns)
    launch_source: str = ""  # short: the source graph_launch_cost / graph_kernel_gap return beside the figure
    gap_source: str = ""


_NV_GETTING_STARTED = ("NVIDIA blog 'Getting Started with CUDA Graphs' (V100, CUDA 10.1): 3.4 us a kernel in a graph "
                       "against 2.9 us of kernel, at most 0.5 us apart")
_NV_CONSTANT_LAUNCH = ("NVIDIA blog 'Constant Time Launch for Straight-Line CUDA Graphs' (RTX 3060, CUDA 12.6): repeat "
                       "launch ~2.5 us + ~1 ns a node")
_ROCM_TRACES = ("3 MI300X traces with hipGraphLaunch (sglang decode, vLLM graph replay, vLLM piecewise): median "
                "1 ns, as ROCm profilers write any back-to-back kernels")

# Only generations with a public source (docs/whatif.md gives each in full). No row, or None in a row: the generic
# constants. Pascal, Turing, Ada, Hopper, Blackwell, CDNA2 and CDNA4 have none yet.
GRAPH_CONSTANTS: dict[str, GraphConstants] = {
    # An upper bound: the post's 0.5 us a kernel also pays for each graph's launch and stream sync
    "Volta": GraphConstants("Volta", None, 500, gap_source=_NV_GETTING_STARTED),
    "Ampere": GraphConstants("Ampere", 2_500, None, launch_source=_NV_CONSTANT_LAUNCH),
    # No launch figure: a hipGraphLaunch's cost grows with the graph's node count there, so no one figure a graph fits
    "CDNA3": GraphConstants("CDNA3", None, 1, gap_source=_ROCM_TRACES),
}

_LAUNCH = "whatif_graph_launch_ns"
_GAP = "whatif_graph_kernel_gap_ns"
_DEFAULTS = {f.name: f.default for f in dataclasses.fields(Thresholds)}


def device_names(trace: Trace, rank: int) -> tuple[str, ...]:
    """The names of the GPUs ``rank`` of ``trace`` ran on (those it used, else every one it lists; a file that
    gives devices no rank lends them all to each rank)."""
    devs = [d for d in trace.meta.devices if d.rank == rank] or list(trace.meta.devices)
    used = [d for d in devs if d.used]
    return tuple(d.name for d in (used or devs) if d.name)


def generation_of(names: tuple[str, ...]) -> str | None:
    """The GPU generation of ``names`` when every name the peak table knows agrees on one (else None)."""
    rows = [match_gpu(n) for n in names]
    gens = {GENERATIONS.get(r.key) for r in rows if r is not None}
    return gens.pop() if len(gens) == 1 else None


def constants_for(names: Iterable[str]) -> GraphConstants | None:
    """The sourced row of the generation of ``names``, or None (unknown GPU, or a generation with no source)."""
    gen = generation_of(tuple(names))
    return GRAPH_CONSTANTS.get(gen) if gen is not None else None


def _user_set(cfg: Thresholds, name: str) -> bool:
    """Whether the user changed the threshold from its default (a value set to the default reads as unset)."""
    return bool(getattr(cfg, name) != _DEFAULTS[name])


def launch_constant(cfg: Thresholds, names: Iterable[str]) -> tuple[int, str]:
    """A graph launch's cost where the trace holds no graph launch, and its source: the user's
    ``whatif_graph_launch_ns`` when set, else the generation's figure, else the generic default ("constant")."""
    return _constant(cfg, names, _LAUNCH)


def gap_constant(cfg: Thresholds, names: Iterable[str]) -> tuple[int, str]:
    """The in-graph kernel gap where the trace holds too few graph-launched kernels, and its source (as
    :func:`launch_constant`, for ``whatif_graph_kernel_gap_ns``)."""
    return _constant(cfg, names, _GAP)


def _constant(cfg: Thresholds, names: Iterable[str], name: str) -> tuple[int, str]:
    value = int(getattr(cfg, name))
    if _user_set(cfg, name):
        return value, "constant"
    row = constants_for(names)
    if row is not None:
        figure, source = (row.launch_ns, row.launch_source) if name == _LAUNCH else (row.kernel_gap_ns, row.gap_source)
        if figure is not None:
            return figure, f"{row.generation} constant: {source}"
    return value, "constant"


__all__ = ["GENERATIONS", "GRAPH_CONSTANTS", "GraphConstants", "constants_for", "device_names", "gap_constant",
           "generation_of", "launch_constant"]
