"""traceread: why is this GPU training run below its possible MFU?

Public API (docs/api.md)::

    import traceread
    trace = traceread.load("rank0.pt.trace.json.gz")   # -> Trace (events frame + meta + side tables)
    report = traceread.analyze("rank0.pt.trace.json.gz")  # or a Trace, a directory, a list of either
    report.verdict, report.scope                        # the dominant cause, and what it speaks for
    report.steps, report.gaps, report.kernels, report.attribution   # DataFrames with trace and path
    traceread.tables("rank0.pt.trace.json.gz")["ops"]   # the `kernels` tables as DataFrames
    print(report.to_markdown())                         # as `traceread analyze` prints it
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # load, analyze and Report (traceread.api) are typed there; importing that module here would
    # make a cycle through the renderers it imports lazily (they read __version__ from here).
    from traceread.analysis import Analysis
    from traceread.trace import DeviceInfo, RankInfo, Trace, TraceMeta

__all__ = ["load", "analyze", "tables", "Report", "Analysis", "Trace", "TraceMeta", "DeviceInfo", "RankInfo"]
__version__ = "0.1.0"
# Public names -> the module that defines them, imported on first use: ``import traceread.cli``
# (``traceread --help``, ``--version``) then pays for neither pandas nor the analysis stack, and
# loading alone (and the loader's worker processes) does not import the analysis.
_LAZY = {"load": "traceread.api", "analyze": "traceread.api", "tables": "traceread.api", "Report": "traceread.api", "Analysis": "traceread.analysis",
         "Trace": "traceread.trace", "TraceMeta": "traceread.trace", "DeviceInfo": "traceread.trace",
         "RankInfo": "traceread.trace"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'traceread' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
