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


def pytest_configure(config: pytest.Config) -> None:
    # ``pytest -n N`` (CI's command) distributes test by test ("load"): a module whose tests share one
    # expensive module-scoped result (tests/integration/test_ranks_dp_pp.py's analysed jobs) then computes
    # it again on every worker that runs one of its tests. "loadgroup" is "load" for every test but those
    # marked ``xdist_group(name)``, which run on one worker, so such a module computes its results once.
    # An explicit --dist other than load is left as asked.
    config.addinivalue_line("markers", "xdist_group(name): run these tests on one xdist worker (see conftest)")
    if getattr(config.option, "dist", "no") == "load" and not getattr(config.option, "distload", False):
        config.option.dist = "loadgroup"
