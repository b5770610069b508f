"""traceread: why is this GPU training run below its possible MFU?

Public API::

    from traceread import load
    trace = load("rank0.pt.trace.json.gz")   # -> Trace (events frame + meta + side tables)
    result = analyze([trace])                # -> Analysis (steps, gaps with classes, attribution...)
"""

from typing import Any

from traceread.loaders import load
from traceread.trace import DeviceInfo, RankInfo, Trace, TraceMeta

__all__ = ["load", "analyze", "Analysis", "Trace", "TraceMeta", "DeviceInfo", "RankInfo"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # The analysis stack is imported on first use so that loading alone (and the loader's worker
    # processes) does not pay for it.
    if name in ("analyze", "Analysis"):
        from traceread import analysis

        return getattr(analysis, name)
    raise AttributeError(f"module 'traceread' has no attribute {name!r}")
