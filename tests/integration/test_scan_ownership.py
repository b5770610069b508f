"""A scan deletes only files it wrote (its manifest names them), never writes among its inputs, and
never runs interleaved with another scan into the same ``--out``."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from scan_tree import snapshot
from tracesynth.kineto_writer import write_kineto
from tracesynth.planted import PlantSpec, plant

from traceread.cli import main
from traceread.scan.owner import LOCK, MANIFEST, OutLock, owned, recorded


def _tiny_job(folder: Path, seed: int = 5) -> list[str]:
    """Two ~30 KB Kineto traces (one 2-rank job of 3 steps) in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    return write_kineto(plant(PlantSpec(seed=seed, ranks=2, steps=3, weights={})).scenario,
                        str(folder / "train.rank{rank}.pt.trace.json"))


def test_out_holding_the_scanned_tree_is_refused_and_nothing_is_deleted(tmp_path, monkeypatch, capsys):
    traces = tmp_path / "traces"
    _tiny_job(traces)
    (traces / "notes.json").write_text('{"lr": 0.1}\n')  # a user's files of the names a scan writes
    (traces / "readme.md").write_text("my notes\n")
    before = snapshot(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["scan", "traces", "--out", ".", "--workers", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds the scanned tree traces" in err[0], err
    assert snapshot(tmp_path) == before  # not one file written or removed


def test_a_folder_the_scan_owns_may_hold_the_tree_but_not_in_its_reports(tmp_path, capsys):
    out = tmp_path / "o"
    _tiny_job(tmp_path / "first")
    assert main(["scan", str(tmp_path / "first"), "--out", str(out), "--workers", "1"]) == 0
    assert owned(str(out))
    incoming = out / "incoming"
    _tiny_job(incoming, seed=6)
    (incoming / "notes.md").write_text("kept\n")
    before = snapshot(incoming)
    assert main(["scan", str(incoming), "--out", str(out), "--workers", "1"]) == 0
    assert snapshot(incoming) == before
    capsys.readouterr()
    assert main(["scan", str(out / "traces"), "--out", str(out), "--workers", "1"]) == 2  # its own reports
    assert "scan the traces, not the reports" in capsys.readouterr().err


def test_pruning_removes_only_files_the_manifest_names(tmp_path):
    tree = tmp_path / "tree"
    _tiny_job(tree / "a", seed=5)
    _tiny_job(tree / "b", seed=6)
    out = tmp_path / "o"
    assert main(["scan", str(tree), "--out", str(out), "--workers", "1"]) == 0
    names = recorded(str(out))
    assert len([n for n in names if n.startswith("traces/")]) == 8 and any(n.startswith("jobs/") for n in names)
    # files of the user's beside the reports, named like reports and job files: no scan wrote them
    planted = [out / "traces" / "notes.json", out / "traces" / "x-0123abcd.json", out / "traces" / "x.md",
               out / "jobs" / "mine.md", out / "index2.json"]
    for p in planted:
        p.write_text("user's\n")
    # a planted manifest line naming a file outside the managed folders removes nothing
    victim = tmp_path / "victim.json"
    victim.write_text("keep\n")
    with open(out / MANIFEST, "a") as fh:
        fh.write("traces/../../victim.json\n../victim.json\n")
    shutil.rmtree(tree / "b")  # its reports and job files are stale now
    assert main(["scan", str(tree), "--out", str(out), "--workers", "1"]) == 0
    assert all(p.read_text() == "user's\n" for p in planted)
    assert victim.read_text() == "keep\n"
    ours = {f"{d}/{p.name}" for d in ("traces", "jobs") for p in (out / d).iterdir()} - \
        {f"{p.parent.name}/{p.name}" for p in planted}
    assert len([n for n in ours if n.startswith("traces/")]) == 4, ours  # b's reports went, a's stay
    assert all(n.split("/")[1].startswith("a") for n in ours), ours  # reports and job files of a only
    assert recorded(str(out)) == ours  # the manifest names what is there now, and nothing else


def test_out_inside_the_tree_must_be_new_empty_or_a_scans(tmp_path, capsys):
    tree = tmp_path / "tree"
    _tiny_job(tree / "a")
    mine = tree / "my-reports"
    mine.mkdir()
    (mine / "index.md").write_text("the user's own\n")
    assert main(["scan", str(tree), "--out", str(mine), "--allow-out-inside", "--workers", "1"]) == 2
    assert "holds files no scan wrote" in capsys.readouterr().err
    assert sorted(p.name for p in mine.iterdir()) == ["index.md"]
    assert main(["scan", str(tree), "--out", str(tree / "scan"), "--allow-out-inside", "--workers", "1"]) == 0
    assert main(["scan", str(tree), "--out", str(tree / "scan"), "--allow-out-inside", "--workers", "1"]) == 0


def test_a_second_scan_into_the_same_out_is_refused_while_one_runs(tmp_path, capsys):
    tree = tmp_path / "tree"
    _tiny_job(tree / "a")
    out = tmp_path / "o"
    out.mkdir()
    held = OutLock(str(out))  # as a running scan holds it (flock: a second open description conflicts)
    try:
        assert main(["scan", str(tree), "--out", str(out), "--workers", "1"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "another scan" in err[0] and f"pid {os.getpid()}" in err[0], err
        assert sorted(p.name for p in out.iterdir()) == [LOCK]  # nothing written by the refused scan
    finally:
        held.release()
    assert main(["scan", str(tree), "--out", str(out), "--workers", "1"]) == 0


@pytest.mark.parametrize("where", ["", "traces", "jobs"])
def test_stale_temporaries_in_every_output_folder_are_pruned(tmp_path, where):
    """An index or report temporary of a scan killed while writing (its writer gone) is removed by the
    next scan, in the output folder itself as in its subfolders; one whose writer runs is kept."""
    import subprocess
    import sys

    tree = tmp_path / "tree"
    _tiny_job(tree / "a")
    out = tmp_path / "o"
    assert main(["scan", str(tree), "--out", str(out), "--workers", "1"]) == 0
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = int(gone.stdout)
    stale = out / where / f".traceread-{dead}-abc_12.tmp"
    stale.write_bytes(b"half an index")
    live = out / where / f".traceread-{os.getppid()}-xyz_34.tmp"  # a running process's (this test's parent)
    live.write_bytes(b"being written")
    other = out / where / ".traceread-notes.txt"
    other.write_bytes(b"not a temporary")
    assert main(["scan", str(tree), "--out", str(out), "--workers", "1"]) == 0
    assert not stale.exists() and live.exists() and other.exists()
