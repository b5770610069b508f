"""Outputs to what is not a regular file are written in place: a device, a named pipe, /dev/stdout stay what
they are (a rename over them put a regular file where /dev/null was: the suite's own `-o /dev/null` did).
A link to a file: the file is replaced, the link kept."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading

import pytest

from traceread.atomic import atomic_open
from traceread.errors import OutputError

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRACE = os.path.join(REPO, "fixtures", "hta_alexnet_a100.json.gz")


def test_a_named_pipe_is_written_in_place(tmp_path) -> None:
    fifo = str(tmp_path / "out.fifo")
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()))
    reader.start()
    with atomic_open(fifo, "wb") as fh:
        fh.write(b"report\n")
    reader.join(10)
    assert got == [b"report\n"]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["out.fifo"]  # no temporary file left beside it


def test_a_link_to_a_file_keeps_the_link(tmp_path) -> None:
    real = tmp_path / "runs" / "7.json"
    real.parent.mkdir()
    real.write_text("old")
    link = tmp_path / "latest.json"
    link.symlink_to(real)
    with atomic_open(str(link), "w") as fh:
        fh.write("new")
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text() == "new"


@pytest.mark.skipif(not os.path.exists("/dev/null") or not stat.S_ISCHR(os.stat("/dev/null").st_mode),
                    reason="no /dev/null device")
def test_the_commands_leave_dev_null_a_device() -> None:
    out = subprocess.run([sys.executable, "-c", "from traceread.cli import run; run()", "analyze", TRACE,
                          "-o", "/dev/null", "--json", "/dev/null"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


@pytest.mark.skipif(not os.path.exists("/dev/full") or not stat.S_ISCHR(os.stat("/dev/full").st_mode),
                    reason="no /dev/full device")
def test_a_full_device_is_an_output_error_naming_it() -> None:
    with pytest.raises(OutputError, match="/dev/full"):
        with atomic_open("/dev/full", "wb") as fh:
            fh.write(b"x" * (1 << 20))
            fh.flush()
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
