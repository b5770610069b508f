"""Give freed heap memory back to the operating system between the big phases of an analysis.

glibc's malloc serves the multi-MB numpy temporaries of a phase from its heap once its dynamic
mmap threshold has risen, and keeps the pages after they are freed: on a 10M-event nsys export
the process held 500 MB of freed heap through the gaps phase. ``malloc_trim(0)`` returns every
free whole page (not only the heap's top); it takes milliseconds. Elsewhere (musl, macOS,
Windows) this does nothing.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable

_trim: Callable[[int], int] | None = None
_looked = False


def trim() -> None:
    """Return freed heap pages to the OS (glibc only; a no-op elsewhere)."""
    global _trim, _looked
    if not _looked:
        _looked = True
        if sys.platform.startswith("linux"):
            try:
                _trim = ctypes.CDLL(None).malloc_trim
            except (OSError, AttributeError):  # not glibc
                _trim = None
    if _trim is not None:
        _trim(0)
