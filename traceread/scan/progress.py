"""The scan's progress line on standard error (only when it is a terminal)."""

from __future__ import annotations

import sys
import time


def _clock(s: float) -> str:
    s = int(s)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60:02d}:{s % 60:02d}"


class ScanProgress:
    """``scan 120/500 files, 2 failed, 00:31 elapsed, ETA 01:40``, redrawn at most 5 times a second."""

    def __init__(self, total: int, done: int = 0, failed: int = 0, enabled: bool = True) -> None:
        self.on = enabled and sys.stderr.isatty()
        self.total, self.done, self.failed = total, done, failed
        self.start = time.monotonic()
        self.first = done  # reused results do not count for the rate
        self.last = 0.0
        self.width = 0
        self._draw(force=True)

    def update(self, done: int = 1, failed: bool = False) -> None:
        self.done += done
        self.failed += int(failed)
        self._draw()

    def line(self) -> str:
        el = time.monotonic() - self.start
        rate_n = self.done - self.first
        eta = f", ETA {_clock(el / rate_n * (self.total - self.done))}" if rate_n and self.done < self.total else ""
        return (f"scan {self.done}/{self.total} files, {self.failed} failed, {_clock(el)} elapsed{eta}")

    def _draw(self, force: bool = False) -> None:
        now = time.monotonic()
        if not self.on or (now - self.last < 0.2 and not force):
            return
        self.last = now
        text = self.line()
        sys.stderr.write("\r" + text.ljust(self.width))
        self.width = len(text)
        sys.stderr.flush()

    def close(self) -> None:
        if self.on:
            sys.stderr.write("\r" + " " * self.width + "\r")
            sys.stderr.flush()
