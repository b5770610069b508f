"""The optional compiled extensions (the Kineto scanner, the nsys reader, the gap engine's sweeps, the
evidence sentences' concatenation, the what-if sweep, the row join): how each is imported and how a
user switches one off. Each has an exact Python twin, so a
missing extension or a switch only changes speed, never a result."""

from __future__ import annotations

import importlib
import os
from types import ModuleType


def optional(name: str) -> ModuleType | None:
    """The extension module ``name``, or None when it was not built (no C compiler at install)."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def switched_off(env: str) -> bool:
    """Whether the user switched an extension off with its ``TRACEREAD_NO_*`` variable: any value but
    empty or ``0`` (``=1`` as documented; the same rule for every extension)."""
    return os.environ.get(env, "").strip() not in ("", "0")
