"""Every real trace: its distinct kernel names stay distinct (and short) in the report's tables."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import FIXTURES, shared_kineto, shared_nsys

from traceread.loaders import load
from traceread.metrics.kernels import kernel_table
from traceread.render.names import DEFAULT_MAX_LEN, ShortNames

TRACES = sorted(FIXTURES.glob("*.gz")) + shared_kineto() + shared_nsys()


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
def test_shown_kernel_names_are_as_many_as_full_names(path: Path) -> None:
    names = sorted(set(kernel_table(load(path))["name"].astype(str)))
    short = ShortNames(names)
    shown = [short(n) for n in names]
    assert len(set(shown)) == len(names)
    assert all(len(s) <= DEFAULT_MAX_LEN for s in shown)
    assert not any(s.endswith("]") and " [" in s for s in shown), "fell back to numbering"
