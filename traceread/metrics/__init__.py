"""The scoreboard: MFU/HFU, the peak table, the kernel and collective tables, the roofline.

Each module reads loaded traces (and the steps frame) and returns plain data:

* :func:`traceread.metrics.mfu.compute_mfu` -> ``MfuResult``
* :func:`traceread.metrics.peaks.resolve_peak` / ``match_gpu`` -> the dense peak of the run's GPU
* :func:`traceread.metrics.kernels.kernel_table` / ``kernel_report`` -> kernel time by name and class
* :func:`traceread.metrics.collectives.collective_table` -> collectives by type and process group
* :func:`traceread.metrics.roofline.roofline` -> matmul/attention ops against the ridge point
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from traceread.metrics.collectives import collective_table
    from traceread.metrics.kernels import kernel_report, kernel_table
    from traceread.metrics.mfu import MfuResult, compute_mfu
    from traceread.metrics.peaks import PEAK_TABLE, match_gpu, resolve_peak
    from traceread.metrics.roofline import roofline

__all__ = ["collective_table", "kernel_report", "kernel_table", "MfuResult", "compute_mfu", "PEAK_TABLE",
           "match_gpu", "resolve_peak", "roofline"]

# Each name's module, imported on first use (PEP 562): importing one module of the package, such as
# the CLI's ``metrics.workload``, then does not import pandas before a trace is decoded (runner.prefetch).
_HOMES = {"collective_table": "collectives", "kernel_report": "kernels", "kernel_table": "kernels",
          "MfuResult": "mfu", "compute_mfu": "mfu", "PEAK_TABLE": "peaks", "match_gpu": "peaks",
          "resolve_peak": "peaks", "roofline": "roofline"}


def __getattr__(name: str) -> object:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
