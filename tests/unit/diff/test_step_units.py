"""diff: both sides' step units compared; a fix is not checked against steps of other units (issue 43)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from traceread.diff.compare import step_units


def _side(label: str, source: str, median_ns: float) -> Any:
    return SimpleNamespace(label=label, step_sources=(source,), median_step_ns=median_ns)


def test_inferred_steps_of_different_units_are_flagged() -> None:
    """Kernel-period inference found a step of two iterations on one side: x2 medians."""
    warn = step_units(_side("before", "inferred:kernel-period", 100e6), _side("after", "inferred:kernel-period", 205e6))
    assert warn != "same" and "different units" in warn and "x2.05" in warn and "about 2" in warn


def test_marked_steps_or_close_medians_are_the_same_unit() -> None:
    assert step_units(_side("before", "ProfilerStep", 100e6), _side("after", "ProfilerStep", 300e6)) == "same"
    assert step_units(_side("before", "inferred:kernel-period", 100e6),
                      _side("after", "inferred:kernel-period", 150e6)) == "same"
    assert step_units(_side("before", "inferred:kernel-period", 100e6), _side("after", "ProfilerStep", 0.0)) == "same"
