"""The code base stays ruff clean (part of the test command, so CI and developers run the same check)."""

from __future__ import annotations

import shutil
import subprocess
import sys

from conftest import REPO


def test_ruff_clean() -> None:
    ruff = shutil.which("ruff") or str(__import__("pathlib").Path(sys.executable).with_name("ruff"))
    proc = subprocess.run([ruff, "check", "traceread", "tests", "scripts"], cwd=REPO,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
