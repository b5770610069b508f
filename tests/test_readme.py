"""The README's commands run as written, as a new user pastes them into a fresh clone.

Every line of the README's ```bash blocks runs through the shell in a temporary folder that holds
only ``fixtures/`` (so a command that needs anything else of the repository, or ``../shared``, fails
here), with this interpreter's ``bin/`` first on PATH (the installed ``traceread`` command). The
set-up lines (venv, pip) and the test command itself are not run: the suite is already running in
that environment.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from conftest import FIXTURES, REPO

SETUP = ("python3 -m venv", "pip ", "python -m pytest", "TRACEREAD_SHARED=", "git clone")


def _commands() -> list[str]:
    text = (REPO / "README.md").read_text("utf-8")
    lines = [ln.strip() for block in re.findall(r"^```bash\n(.*?)^```", text, re.S | re.M)
             for ln in block.splitlines()]
    return [ln for ln in lines if ln and not ln.startswith("#") and not ln.startswith(SETUP)]


def test_the_readme_has_runnable_commands() -> None:
    cmds = _commands()
    for sub in ("analyze", "scan", "diff"):
        assert any(c.startswith(f"traceread {sub} ") for c in cmds), sub


@pytest.mark.parametrize("command", _commands())
def test_readme_command_runs_as_written(command: str, tmp_path) -> None:
    (tmp_path / "fixtures").symlink_to(FIXTURES, target_is_directory=True)
    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    env.pop("TRACEREAD_SHARED", None)
    proc = subprocess.run(command, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True,  # noqa: S602
                          timeout=600)
    assert proc.returncode == 0, f"{command}\n{proc.stderr[-2000:]}"
    if command.startswith("traceread analyze") and " -o " not in command:
        assert "## Verdict" in proc.stdout
