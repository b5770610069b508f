"""traceread: why is this GPU training run below its possible MFU?

Public API::

    from traceread import load
    trace = load("rank0.pt.trace.json.gz")   # -> Trace (events frame + meta + side tables)
"""

from traceread.loaders import load
from traceread.trace import DeviceInfo, RankInfo, Trace, TraceMeta

__all__ = ["load", "Trace", "TraceMeta", "DeviceInfo", "RankInfo"]
__version__ = "0.1.0"
