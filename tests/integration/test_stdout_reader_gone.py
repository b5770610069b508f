"""A report on standard output whose reader goes away (``traceread gaps T --json - | head``): the output ends
there, the command does not fail, and ``analyze``'s --fail-on gates still decide the exit code (exit 1 is a
tripped gate, never a closed pipe)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import FIXTURES

TRACE = FIXTURES / "hta_nccl_a100_rank0of2.json.gz"  # its JSON outputs are megabytes: far past a pipe's buffer
RUN = [sys.executable, "-c", "from traceread.cli import run; run()"]


def _head(args: list[str]) -> tuple[int, str]:
    """The command's exit code and standard error when its standard output's reader takes 10 bytes and goes."""
    proc = subprocess.Popen([*RUN, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    head = proc.stdout.read(10)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.stderr.close()
    rc = proc.wait(timeout=300)
    assert len(head) == 10
    return rc, err


@pytest.mark.parametrize("command", ["gaps", "kernels", "analyze"])
def test_a_json_reader_that_goes_away_ends_the_output_not_the_command(command: str) -> None:
    rc, err = _head([command, str(TRACE), "--json", "-"])
    assert (rc, err) == (0, "")


def test_the_gates_still_decide_when_the_reader_goes_away() -> None:
    rc, err = _head(["analyze", str(TRACE), "--json", "-", "--fail-on", "launch-bound:0"])
    assert rc == 1 and "--fail-on launch-bound:0 tripped" in err
    rc, err = _head(["analyze", str(TRACE), "--json", "-", "--fail-on", "pipeline-bubble:90"])
    assert (rc, err) == (0, "")
