"""Give freed heap memory back to the operating system between the big phases of an analysis.

glibc's malloc serves the multi-MB numpy temporaries of a phase from its heap once its dynamic
mmap threshold has risen, and keeps the pages after they are freed: a large export's analysis
would hold a whole phase's freed temporaries through the next one. ``malloc_trim(0)`` returns every
free whole page (not only the heap's top); it takes milliseconds. Elsewhere (musl, macOS,
Windows) this does nothing.

:func:`reuse_freed_pages` is ``traceread analyze``'s setting once its traces are loaded: glibc maps every
allocation above its mmap threshold (at most 32 MiB) afresh and unmaps it when freed, so each
large numpy temporary of a large trace faults its pages in again, and the kernel's zeroing of those
fresh pages becomes a large share of the analysis' time. Served from the heap instead, freed pages
are reused.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import os
import sys
from collections.abc import Callable, Iterator

_trim: Callable[[int], int] | None = None
_looked = False
_kept = 0  # open freed_pages_kept() scopes: trim() gives nothing back inside one


def trim() -> None:
    """Return freed heap pages to the OS (glibc only; a no-op elsewhere, and inside :func:`freed_pages_kept`)."""
    global _trim, _looked
    if _kept:
        return
    if not _looked:
        _looked = True
        if sys.platform.startswith("linux"):
            try:
                _trim = ctypes.CDLL(None).malloc_trim
            except (OSError, AttributeError):  # not glibc
                _trim = None
    if _trim is not None:
        _trim(0)


@contextlib.contextmanager
def freed_pages_kept() -> Iterator[None]:
    """:func:`trim` gives nothing back inside (every thread): freed pages stay for the next phase's reuse.
    For an analysis that already trades memory for time (``runner.replay.REPLAY_BESIDE_RULES_MAX_EVENTS``): a
    page given back is faulted in again, zeroed, when the next phase allocates, and keeping the pages costs
    less peak memory than refaulting them costs kernel time."""
    global _kept
    _kept += 1
    try:
        yield
    finally:
        _kept -= 1


# mallopt(3) parameters (glibc's malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4
_M_ARENA_MAX = -8
# Free memory at the heap's top kept rather than given back by free() (mallopt takes an int).
# Large on purpose: the phases' temporaries come and go at the top; trim() still returns freed
# pages between phases.
KEEP_TOP_BYTES = 2**31 - 1


def reuse_freed_pages() -> bool:
    """Serve large allocations from the heap and keep its freed top for reuse (glibc only).

    Most of a large analysis' minor page faults, and the kernel time spent zeroing their pages, go
    away. Freed memory is then kept in the heap, so a phase's peak can grow by what it cannot reuse:
    ``analyze`` sets it before its load (the analysis then reuses the decode's freed buffers, at no
    cost in peak), with :func:`trim` between the analysis' phases; ``info`` does not (it has no later
    phase to reuse the pages, so its peak would only grow). Not applied when the user set malloc's
    own environment settings, which then decide.
    True when applied.
    """
    mallopt = _mallopt()
    # glibc still maps what its heap cannot grow to hold (a thread's arena, a failed brk)
    return mallopt is not None and bool(mallopt(_M_MMAP_MAX, 0)) and bool(mallopt(_M_TRIM_THRESHOLD, KEEP_TOP_BYTES))


def small_pages() -> bool:
    """Stop numpy asking for transparent huge pages on its large arrays (Linux only).

    numpy advises the kernel to back every array of 4 MiB or more with 2 MiB pages. Served from the heap
    (:func:`reuse_freed_pages`), such an array sits in heap pages that are reused and given back (:func:`trim`)
    piecewise, and a huge page is faulted in and zeroed whole, 2 MiB at a time, for an array that may use
    part of it: after an analysis' load the kernel's time spent zeroing pages took more than the small pages
    it saves on faults. Not applied when the user set ``NUMPY_MADVISE_HUGEPAGE``, which then decides.
    True when applied.
    """
    if not sys.platform.startswith("linux") or "NUMPY_MADVISE_HUGEPAGE" in os.environ:
        return False
    for module in ("numpy._core.multiarray", "numpy.core.multiarray"):  # numpy 2, numpy 1
        try:
            advise = importlib.import_module(module)._set_madvise_hugepage
        except (ImportError, AttributeError):
            continue
        advise(False)
        return True
    return False


def one_heap() -> bool:
    """Every thread allocates from the main heap (glibc only; set before the process starts a thread).

    glibc gives each new thread an arena of its own (up to eight per core), mapped afresh, whose freed
    memory serves only the threads using that arena. traceread's threads (the loader's halves, the what-if
    replay, the table writers) make few, large allocations, so sharing one heap costs no waiting, and
    each reuses what the others freed instead of faulting in new pages: with an arena of its own the
    replay's thread faulted in its whole model fresh (the kernel zeroing those pages on its time), and
    the arenas' freed memory added to the peak.
    glibc reads the limit when a second arena is first needed, so it is set at the command's start.
    Not applied when the user set malloc's own environment settings, which then decide. True when applied.
    """
    mallopt = _mallopt()
    return mallopt is not None and bool(mallopt(_M_ARENA_MAX, 1))


def _mallopt() -> Callable[[int, int], int] | None:
    """glibc's ``mallopt``, or None: not Linux, not glibc, or the user set malloc's own environment
    settings (``MALLOC_*``, ``GLIBC_TUNABLES``), which then decide."""
    if not sys.platform.startswith("linux") or any(
            k.startswith("MALLOC_") or k == "GLIBC_TUNABLES" for k in os.environ):
        return None
    try:
        return ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc
        return None
