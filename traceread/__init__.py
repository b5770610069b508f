"""traceread: why is this GPU training run below its possible MFU?

Public API::

    from traceread import load
    trace = load("rank0.pt.trace.json.gz")   # -> Trace (events frame + meta + side tables)
    result = analyze([trace])                # -> Analysis (steps, gaps with classes, attribution...)
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from traceread.analysis import Analysis, analyze
    from traceread.loaders import load
    from traceread.trace import DeviceInfo, RankInfo, Trace, TraceMeta

__all__ = ["load", "analyze", "Analysis", "Trace", "TraceMeta", "DeviceInfo", "RankInfo"]
__version__ = "0.1.0"
# Public names -> the module that defines them, imported on first use: ``import traceread.cli``
# (``traceread --help``, ``--version``) then pays for neither pandas nor the analysis stack, and
# loading alone (and the loader's worker processes) does not import the analysis.
_LAZY = {"load": "traceread.loaders", "analyze": "traceread.analysis", "Analysis": "traceread.analysis",
         "Trace": "traceread.trace", "TraceMeta": "traceread.trace", "DeviceInfo": "traceread.trace",
         "RankInfo": "traceread.trace"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'traceread' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
