"""``traceread scan``: a directory tree of traces -> per-trace reports, jobs, a ranked index, parquet.

Data flow (one way): :mod:`discover` finds files; :mod:`work` analyses one file in a worker
(:mod:`pool` locally, :mod:`dask_run` on a cluster) and returns report bytes plus small summaries;
:mod:`cache` keeps finished results for re-runs; :mod:`jobs` groups traces into jobs through
:mod:`traceread.ranks`, one directory at a time; :mod:`tables` writes the parquet files and
:mod:`index` the overview; :mod:`outputs` writes jobs, table rows and the index as each directory's
results become final. :func:`run.scan` wires them.
"""

from traceread.scan.run import ScanOptions, ScanResult, scan
from traceread.scan.work import Settings

__all__ = ["scan", "ScanOptions", "ScanResult", "Settings"]
