"""``scripts/module_map.py``: its per-package counts of the working tree equal a count made here by
walking ``traceread/`` on disk, and a commit's counts are read from git (an unknown ref exits 2)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = [sys.executable, str(REPO / "scripts" / "module_map.py")]


def _rows(out: str) -> dict[str, tuple[int, int, int]]:
    rows = {}
    for m in re.finditer(r"^\| (traceread[\w/]*) \| (\d+) \| ([\d,]+) \| ([\d,]+) \|$", out, re.M):
        rows[m[1]] = (int(m[2]), int(m[3].replace(",", "")), int(m[4].replace(",", "")))
    return rows


def _walk_count() -> dict[str, tuple[int, int, int]]:
    tracked = set(subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "traceread"],
                                 cwd=REPO, check=True, capture_output=True, text=True).stdout.split())
    counts: dict[str, list[int]] = {}
    for folder, _, names in os.walk(REPO / "traceread"):
        rel = Path(folder).relative_to(REPO)
        package = "/".join(rel.parts[:2])
        for name in names:
            path = (rel / name).as_posix()
            if path not in tracked or not name.endswith((".py", ".c", ".h")):
                continue
            with open(REPO / path, "rb") as f:
                lines = sum(1 for line in f if line.endswith(b"\n"))
            row = counts.setdefault(package, [0, 0, 0])
            if name.endswith(".py"):
                row[0] += 1
                row[1] += lines
            else:
                row[2] += lines
    return {k: (v[0], v[1], v[2]) for k, v in counts.items()}


def test_working_tree_counts_equal_a_walk_of_the_folder() -> None:
    out = subprocess.run(SCRIPT, cwd=REPO, check=True, capture_output=True, text=True).stdout
    got = _rows(out)
    assert got == _walk_count()
    assert got["traceread/engine"][0] >= 1 and sum(r[2] for r in got.values()) > 0


def test_a_commit_and_an_unknown_ref() -> None:
    out = subprocess.run([*SCRIPT, "HEAD", "--depth", "0"], cwd=REPO, check=True, capture_output=True,
                         text=True).stdout
    rows = _rows(out)
    assert list(rows) == ["traceread"]  # depth 0: every module counted in the top package
    listed = subprocess.run(["git", "ls-tree", "-r", "--name-only", "HEAD", "traceread"], cwd=REPO, check=True,
                            capture_output=True, text=True).stdout.split()
    assert rows["traceread"][0] == sum(p.endswith(".py") for p in listed)
    bad = subprocess.run([*SCRIPT, "no-such-ref-x"], cwd=REPO, capture_output=True, text=True)
    assert bad.returncode == 2 and "no-such-ref-x" in bad.stderr
