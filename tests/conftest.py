"""Shared test helpers: where the reference traces live, and a skip marker when they are absent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"
SHARED = Path(os.environ.get("TRACEREAD_SHARED", REPO.parent / "shared"))
SHARED_TRACES = SHARED / "traces"

needs_shared = pytest.mark.skipif(
    not SHARED_TRACES.is_dir(), reason="../shared/traces not present (fresh clone)"
)


def shared_kineto() -> list[Path]:
    d = SHARED_TRACES / "kineto"
    return sorted(p for p in d.iterdir() if p.is_file()) if d.is_dir() else []


def shared_nsys() -> list[Path]:
    d = SHARED_TRACES / "nsys"
    return sorted(p for p in d.glob("*.sqlite")) if d.is_dir() else []
