"""Shared test helpers: where the reference traces live, and a skip marker when they are absent."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"
SHARED = Path(os.environ.get("TRACEREAD_SHARED", REPO.parent / "shared"))
SHARED_TRACES = SHARED / "traces"

# tests/unit mirrors the package (tests/unit/rules/ holds the rules' tests); a test module borrows a
# helper from another by its module name (``from test_rules import gap``), which is unique under tests/.
sys.path[1:1] = sorted(str(d) for d in (REPO / "tests" / "unit").iterdir() if d.is_dir() and d.name != "__pycache__")

needs_shared = pytest.mark.skipif(
    not SHARED_TRACES.is_dir(), reason="../shared/traces not present (fresh clone)"
)


def shared_kineto() -> list[Path]:
    d = SHARED_TRACES / "kineto"
    return sorted(p for p in d.iterdir() if p.is_file()) if d.is_dir() else []


def shared_nsys() -> list[Path]:
    d = SHARED_TRACES / "nsys"
    return sorted(p for p in d.glob("*.sqlite")) if d.is_dir() else []




# Under ``pytest -n N`` (CI's command; xdist's "load" distribution), test by test: a module whose tests share
# one expensive module-scoped result (test_ranks_dp_pp's analysed jobs, test_diff's generated pairs...) makes
# it again on every worker that runs one of its tests. These modules' tests go to one worker together (each
# module one unit of work, the largest first); every other test is still distributed one by one. xdist's own
# ``xdist_group`` marks are not used: with pytest 9 the group never reaches the test's id (xdist 3.8 sets a
# node attribute pytest 9 no longer reads), so they silently did nothing.
ONE_WORKER_MODULES = frozenset({
    "tests/integration/test_ranks_dp_pp.py",
    "tests/integration/test_real_trace_causes.py",
    "tests/integration/test_whatif_real.py",
    "tests/integration/test_diff.py",
    "tests/integration/test_scan.py",
    "tests/integration/test_scan_jobs.py",
    "tests/integration/test_planted_real_traces.py",
    "tests/integration/test_evidence_parts.py",
    "tests/integration/test_ranks_real.py",
    "tests/unit/loaders/test_kineto_cscan_paths.py",
    "tests/unit/render/test_plot_pictures.py",
    "tests/unit/render/test_perfetto_flows.py",
})


def _missing_one_worker_modules() -> list[str]:
    return sorted(m for m in ONE_WORKER_MODULES if not (REPO / m).is_file())


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):  # noqa: ANN001, ANN201 - xdist's types; called under -n only
    """Load distribution, with each of ONE_WORKER_MODULES one unit (an explicit other --dist is left as asked)."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    assert not _missing_one_worker_modules(), _missing_one_worker_modules()  # a renamed module: update the list
    if not hasattr(config.option, "loadscopereorder"):  # older xdist: units in collection order
        config.option.loadscopereorder = False

    class _OneWorkerModules(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return module if module in ONE_WORKER_MODULES else nodeid

    return _OneWorkerModules(config, log)


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    return str(longrepr[2]) if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # noqa: ANN001 - pytest's hook types
    """Say once how many tests skipped because the reference traces are absent (a user's clone has no
    ../shared): those skips are expected there, and named here rather than left silent."""
    skipped = terminalreporter.stats.get("skipped", [])
    absent = sum(1 for r in skipped if "not present" in _skip_reason(r) or "reference set" in _skip_reason(r))
    if absent:
        terminalreporter.write_line(
            f"{absent} tests skipped: they read the reference traces in {SHARED_TRACES}, which are not present "
            "(set TRACEREAD_SHARED to the folder holding traces/ to run them)")
