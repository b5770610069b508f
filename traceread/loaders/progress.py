"""A one-line progress bar on standard error for long loads (drawn only when stderr is a terminal)."""

from __future__ import annotations

import os
import sys
import time


class Progress:
    """A one-line progress bar on standard error (only when it is a terminal)."""

    def __init__(self, path: str, enabled: bool) -> None:
        self.on = enabled and sys.stderr.isatty()
        self.name = os.path.basename(path)
        self.last = 0.0

    def update(self, frac: float, force: bool = False) -> None:
        now = time.monotonic()
        if not self.on or (now - self.last < 0.2 and not force):
            return
        self.last = now
        filled = int(30 * frac)
        sys.stderr.write(f"\rloading {self.name} [{'#' * filled}{'.' * (30 - filled)}] {frac:4.0%}")
        sys.stderr.flush()

    def done(self) -> None:
        if self.on:
            sys.stderr.write("\r" + " " * (50 + len(self.name)) + "\r")
            sys.stderr.flush()
