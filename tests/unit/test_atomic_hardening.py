"""Atomic outputs under attack and interruption: a link another user planted in a shared sticky folder
is not followed; SIGTERM and SIGHUP leave no temporary (as SIGINT); stale temporaries are pruned by
the next run; an empty output path and two outputs on one standard output are usage errors."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time

import pytest

from traceread.atomic import atomic_open, prune_stale
from traceread.cli import main
from traceread.errors import OutputError

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRACE = os.path.join(REPO, "fixtures", "hta_alexnet_a100.json.gz")
OTHER_UID = 4242


def _sticky_shared(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)  # as /tmp: world-writable, sticky
    victim = tmp_path / "home" / "notes.txt"
    victim.parent.mkdir()
    victim.write_text("precious\n")
    os.chmod(victim, 0o600)
    return shared, victim


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="giving a link to another user needs root")
def test_a_link_another_user_planted_in_a_sticky_folder_is_not_followed(tmp_path, capsys) -> None:
    shared, victim = _sticky_shared(tmp_path)
    link = shared / "report.json"
    link.symlink_to(victim)
    os.lchown(link, OTHER_UID, OTHER_UID)
    with pytest.raises(OutputError, match="another user"):
        with atomic_open(str(link), "w") as fh:
            fh.write("report")
    assert main(["info", TRACE, "--json", str(link)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "symbolic link of another user" in err[0], err
    assert victim.read_text() == "precious\n" and stat.S_IMODE(victim.stat().st_mode) == 0o600
    assert link.is_symlink() and sorted(p.name for p in shared.iterdir()) == ["report.json"]
    # a chain: this user's link to the planted one is refused too
    mine = tmp_path / "latest.json"
    mine.symlink_to(link)
    with pytest.raises(OutputError, match="another user"):
        with atomic_open(str(mine), "w") as fh:
            fh.write("report")


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="giving a link to another user needs root")
def test_links_of_this_user_or_outside_sticky_folders_are_followed(tmp_path) -> None:
    shared, victim = _sticky_shared(tmp_path)
    own = shared / "own.json"
    own.symlink_to(victim)  # this user's (root's) own link in the shared folder
    with atomic_open(str(own), "w") as fh:
        fh.write("mine\n")
    assert own.is_symlink() and victim.read_text() == "mine\n"
    private = tmp_path / "private"
    private.mkdir()
    foreign = private / "r.json"
    foreign.symlink_to(victim)
    os.lchown(foreign, OTHER_UID, OTHER_UID)  # not a sticky shared folder: followed, as the kernel does
    with atomic_open(str(foreign), "w") as fh:
        fh.write("again\n")
    assert victim.read_text() == "again\n"


_KILLED_WHILE_WRITING = r"""
import os, signal, sys, time
import traceread.cli.output as output

def dumps(data):  # the JSON is being written (inside the atomic write) when the signal comes
    os.kill(os.getpid(), getattr(signal, sys.argv[3]))
    time.sleep(60)
    return b"{}"

output._dumps = dumps
from traceread.cli import main
sys.exit(main(["info", sys.argv[1], "--json", sys.argv[2]]))
"""


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP", "SIGINT"])
def test_a_signal_while_writing_leaves_no_temporary(tmp_path, sig) -> None:
    target = tmp_path / "out" / "info.json"
    target.parent.mkdir()
    proc = subprocess.run([sys.executable, "-c", _KILLED_WHILE_WRITING, TRACE, str(target), sig],
                          capture_output=True, text=True, timeout=120)
    assert list(target.parent.iterdir()) == [], "a temporary (or a half file) was left"
    if sig == "SIGINT":
        assert proc.returncode == 2
    else:
        assert proc.returncode == 128 + getattr(signal, sig), (proc.returncode, proc.stderr)
        assert proc.stderr.strip().splitlines()[-1] == f"traceread: stopped by {sig}"


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


def test_stale_temporaries_are_pruned_and_live_ones_kept(tmp_path) -> None:
    d = tmp_path
    now = time.time()
    names = {
        f".traceread-{_dead_pid()}-abc_12.tmp": True,  # its writer is gone
        ".traceread-1-old_12.tmp": True,  # pid 1 runs, but started after this was written: a reused pid
        ".traceread-1-new_34.tmp": False,  # pid 1 runs and may be writing it
        f".traceread-{os.getpid()}-own_56.tmp": False,  # this process's own
        ".traceread-old123.tmp": True,  # an older version's name, written before this run started
        ".traceread-new123.tmp": False,  # ... written since
        ".traceread-notes.txt": False,  # not a temporary's name
        "report.tmp": False,
    }
    for name in names:
        (d / name).write_bytes(b"x")
    os.utime(d / ".traceread-1-old_12.tmp", (1000, 1000))
    os.utime(d / ".traceread-old123.tmp", (now - 100, now - 100))
    os.utime(d / ".traceread-new123.tmp", (now + 100, now + 100))
    (d / ".traceread-9-dir_12.tmp").mkdir()  # a folder of that name is not a temporary
    removed = prune_stale(str(d), before=now)
    assert sorted(removed) == sorted(n for n, gone in names.items() if gone)
    assert sorted(p.name for p in d.iterdir()) == sorted([n for n, gone in names.items() if not gone]
                                                          + [".traceread-9-dir_12.tmp"])


def test_the_next_run_writing_beside_a_stale_temporary_removes_it(tmp_path) -> None:
    stale = tmp_path / f".traceread-{_dead_pid()}-k1ll3d.tmp"
    stale.write_bytes(b"half a report")
    assert main(["info", TRACE, "--json", str(tmp_path / "info.json")]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["info.json"]


@pytest.mark.parametrize("argv", [
    ["info", TRACE, "--json", ""],
    ["analyze", TRACE, "-o", ""],
    ["analyze", TRACE, "--plot", ""],
    ["gaps", TRACE, "--csv", ""],
    ["whatif", TRACE, "--json", ""],
    ["diff", TRACE, TRACE, "-o", ""],
    ["scan", REPO + "/fixtures", "--out", ""],
])
def test_an_empty_output_path_is_a_usage_error(argv, capsys) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "empty path" in err[0], err


@pytest.mark.parametrize("argv", [
    ["gaps", TRACE, "--csv", "-", "--json", "-"],
    ["analyze", TRACE, "-o", "-", "--json", "-"],
    ["analyze", TRACE, "--json", "-", "--perfetto", "-"],
])
def test_two_outputs_on_one_standard_output_are_refused(argv, capsys) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and "both write to standard output" in err[0], err
    assert captured.out == ""


def test_one_output_on_standard_output_still_works(capsys) -> None:
    assert main(["info", TRACE, "--json", "-"]) == 0
    assert capsys.readouterr().out.lstrip().startswith("{")
