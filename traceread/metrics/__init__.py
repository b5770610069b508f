"""The scoreboard: MFU/HFU, the peak table, the kernel and collective tables, the roofline.

Each module reads loaded traces (and the steps frame) and returns plain data:

* :func:`traceread.metrics.mfu.compute_mfu` -> ``MfuResult``
* :func:`traceread.metrics.peaks.resolve_peak` / ``match_gpu`` -> the dense peak of the run's GPU
* :func:`traceread.metrics.kernels.kernel_table` / ``kernel_report`` -> kernel time by name and class
* :func:`traceread.metrics.collectives.collective_table` -> collectives by type and process group
* :func:`traceread.metrics.roofline.roofline` -> matmul/attention ops against the ridge point
"""

from traceread.metrics.collectives import collective_table
from traceread.metrics.kernels import kernel_report, kernel_table
from traceread.metrics.mfu import MfuResult, compute_mfu
from traceread.metrics.peaks import PEAK_TABLE, match_gpu, resolve_peak
from traceread.metrics.roofline import roofline

__all__ = ["collective_table", "kernel_report", "kernel_table", "MfuResult", "compute_mfu", "PEAK_TABLE",
           "match_gpu", "resolve_peak", "roofline"]
