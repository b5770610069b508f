"""The package type-checks clean with the pinned mypy and the configuration in pyproject.toml.

Part of the test command, so CI and developers run the same check (like tests/test_lint.py for ruff).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO


@pytest.mark.skipif(sys.version_info < (3, 11),
                    reason="the pinned pandas-stubs need Python 3.11; mypy checks the 3.10 floor from there")
def test_mypy_clean() -> None:
    mypy = shutil.which("mypy", path=str(Path(sys.executable).parent)) or shutil.which("mypy")
    assert mypy, "mypy is not installed: pip install -e '.[test]'"
    # The cache sits in the repository's ignored .mypy_cache/, so a second run is incremental.
    proc = subprocess.run([mypy, "--cache-dir", str(REPO / ".mypy_cache"), "traceread"], cwd=REPO,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
