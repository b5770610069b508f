"""Memory settings for the duration of a load.

Two process-wide allocator defaults cost a fresh process most of its page faults while it
streams a trace:

* numpy asks the kernel for transparent huge pages on every large array (``madvise``). Where the
  kernel then compacts memory on the first touch (THP ``defrag=madvise``, a common default), each
  fresh 2 MB page stalls on its first touch while the kernel compacts memory to make it, which
  costs filling new arrays (or copying a forked child's rows into the frame) more than it saves.
* glibc's malloc hands multi-MB blocks (the inflated gzip blocks, read blocks, chunk buffers)
  back to the kernel on every free and maps fresh pages for the next one. Keeping some freed
  heap (``LOAD_TRIM_THRESHOLD``) and serving blocks below ``LOAD_MMAP_THRESHOLD`` from it lets
  each block reuse the pages of the one freed before it instead of faulting in new ones.

Both are set only inside :func:`load_settings`; numpy's switch is restored afterwards and glibc's
parameters are set back to their documented defaults (128 KiB each).
"""

from __future__ import annotations

import ctypes
import importlib
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3  # glibc's mallopt parameters
_GLIBC_DEFAULT = 128 << 10
LOAD_MMAP_THRESHOLD = 8 << 20  # blocks below this come from the (reused) heap, not fresh mmaps
LOAD_TRIM_THRESHOLD = 64 << 20  # freed heap kept for reuse; bounds the memory a load holds back
LOAD_TOP_PAD = 4 << 20  # heap grows in steps of this


def _madvise_setter() -> Callable[[bool], bool] | None:
    for module in ("numpy._core.multiarray", "numpy.core.multiarray"):  # numpy 2, numpy 1
        try:
            return importlib.import_module(module)._set_madvise_hugepage
        except (ImportError, AttributeError):
            continue
    return None


def _mallopt() -> Callable[[int, int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None).mallopt  # the process's own C library: glibc has it, musl not
    except (OSError, AttributeError):
        return None


@contextmanager
def load_settings() -> Iterator[None]:
    """numpy without ``MADV_HUGEPAGE`` and glibc malloc keeping freed blocks, inside the block."""
    setter = _madvise_setter()
    previous = setter(False) if setter is not None else None
    mallopt = _mallopt()
    if mallopt is not None:
        mallopt(_M_MMAP_THRESHOLD, LOAD_MMAP_THRESHOLD)
        mallopt(_M_TRIM_THRESHOLD, LOAD_TRIM_THRESHOLD)
        mallopt(_M_TOP_PAD, LOAD_TOP_PAD)
    try:
        yield
    finally:
        if setter is not None:
            setter(bool(previous))
        if mallopt is not None:
            for param in (_M_MMAP_THRESHOLD, _M_TRIM_THRESHOLD, _M_TOP_PAD):
                mallopt(param, _GLIBC_DEFAULT)
