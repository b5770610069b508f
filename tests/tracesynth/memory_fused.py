"""The memory-bound fix's after run (issue 43): ``PlantSpec(memory_factor=F)`` runs the memory-bound kernels of the
compute stream F times faster, as fusing elementwise and normalization kernels would, and changes nothing else.

Which kernels are memory-bound is traceread's judgement (``traceread.kernel_classes``, as
``traceread.whatif.fixes.memory_bound_ops`` reads it: a kernel class neither compute-bound nor unknown), so the pair
tests the replay's timing, not the classifier. The kernel keeps its start (its queue and launch) and its random
draws; only its length changes, and everything after it on the GPU and the host follows from the queue.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from traceread import kernel_classes


@cache
def memory_bound(name: str) -> bool:
    """Whether traceread judges ``name`` a memory-bound kernel."""
    cls = np.asarray(kernel_classes.classify(np.asarray([name], dtype=object)))
    return bool((~kernel_classes.is_compute_bound_class(cls) & (cls != kernel_classes.CLS_OTHER))[0])


def fused_ns(name: str, dur: int, factor: float) -> int:
    """The kernel's length in the after run: ``factor`` x shorter where it is memory-bound."""
    return max(int(dur / factor), 1) if memory_bound(name) else dur
