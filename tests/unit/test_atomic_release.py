"""atomic_open's ``release``: the file an output replaces is handed over as a descriptor held across the rename
(its pages are freed when that closes), and the runner's ``replaced_released`` closes every one on a thread."""

from __future__ import annotations

import os

import pytest

from traceread import atomic
from traceread.atomic import atomic_open
from traceread.runner.write import replaced_released


def test_the_replaced_file_is_handed_over_still_open_and_the_new_one_is_in_place(tmp_path) -> None:
    out = tmp_path / "report.json"
    out.write_bytes(b"old report")
    got: list[int] = []
    with atomic_open(str(out), "wb", got.append) as fh:
        fh.write(b"new report")
    assert out.read_bytes() == b"new report"
    (fd,) = got
    try:
        assert os.pread(fd, 100, 0) == b"old report"  # the replaced inode, still readable through it
        assert os.fstat(fd).st_nlink == 0  # and no longer named
    finally:
        os.close(fd)


def test_nothing_is_handed_over_without_a_file_to_replace(tmp_path) -> None:
    got: list[int] = []
    with atomic_open(str(tmp_path / "new.md"), "w", got.append) as fh:
        fh.write("report")
    assert got == [] and (tmp_path / "new.md").read_text() == "report"


def test_a_failed_rename_hands_nothing_over_and_leaks_no_descriptor(tmp_path, monkeypatch) -> None:
    out = tmp_path / "report.json"
    out.write_bytes(b"old report")

    def refused(src: str, dst: str) -> None:
        raise PermissionError(13, "refused")

    monkeypatch.setattr(atomic.os, "replace", refused)
    open_before = len(os.listdir("/proc/self/fd"))
    got: list[int] = []
    with pytest.raises(atomic.OutputError), atomic_open(str(out), "wb", got.append) as fh:
        fh.write(b"new report")
    assert got == [] and len(os.listdir("/proc/self/fd")) == open_before
    assert out.read_bytes() == b"old report" and [p.name for p in tmp_path.iterdir()] == ["report.json"]


def test_replaced_released_closes_every_descriptor_it_was_given(tmp_path) -> None:
    fds = []
    with replaced_released() as release:
        for i in range(3):
            out = tmp_path / f"r{i}.json"
            out.write_bytes(b"old")
            with atomic_open(str(out), "wb", release) as fh:
                fh.write(b"new")
            fds.append(os.open(out, os.O_RDONLY))  # a descriptor number taken after the release's
    for fd in fds:
        os.close(fd)
    opened = {int(n) for n in os.listdir("/proc/self/fd")}
    assert all((tmp_path / f"r{i}.json").read_bytes() == b"new" for i in range(3))
    # every replaced file's descriptor is closed: no open descriptor still names a deleted report
    for n in opened:
        try:
            target = os.readlink(f"/proc/self/fd/{n}")
        except OSError:
            continue
        assert not (target.startswith(str(tmp_path)) and target.endswith("(deleted)")), target
