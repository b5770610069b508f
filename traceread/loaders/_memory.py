"""Memory settings for the duration of a load.

numpy asks the kernel for transparent huge pages on every large array (``madvise``). Where the
kernel then compacts memory on the first touch (THP ``defrag=madvise``, a common default), each
fresh 2 MB page stalls: measured on the 2-core dev machine, filling 200 MB of new arrays took
0.42 s with the advice and 0.11 s without, and copying a forked child's 110 MB of rows into the
frame 0.29 s against 0.07 s. Loads fill hundreds of MB of fresh columns once, so they run
without the advice; the caller's setting is restored afterwards.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager


def _madvise_setter() -> Callable[[bool], bool] | None:
    for module in ("numpy._core.multiarray", "numpy.core.multiarray"):  # numpy 2, numpy 1
        try:
            return importlib.import_module(module)._set_madvise_hugepage
        except (ImportError, AttributeError):
            continue
    return None


@contextmanager
def without_hugepage_advice() -> Iterator[None]:
    """numpy allocates without ``MADV_HUGEPAGE`` inside the block (no-op where numpy lacks the switch)."""
    setter = _madvise_setter()
    if setter is None:
        yield
        return
    previous = setter(False)
    try:
        yield
    finally:
        setter(previous)
