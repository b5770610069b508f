"""A generated scan tree: good traces of both formats and every kind of bad entry, with what to expect."""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import sqlite3
from pathlib import Path

from tracesynth.kineto_writer import write_kineto
from tracesynth.nsys_writer import write_nsys
from tracesynth.planted import PlantSpec, plant

# rel path -> expected outcome: "ok", "failed", "not-trace" (permission-denied only when not root)
GOOD = ("jobK/train.rank0.pt.trace.json", "jobK/train.rank1.pt.trace.json.gz", "nsys/run.sqlite")
# damaged files of a known format (a crashed run's cut Kineto file, a cut nsys export) are failures
FAILED = ("broken/corrupt.json.gz", "broken/empty.pt.trace.json", "links/dangling.json", "broken/capture.nsys-rep",
          "crashed/train.rank0.json.tmp", "broken/truncated.sqlite")
NOT_TRACES = ("broken/settings.json", "broken/cache.sqlite")
UNREADABLE = "broken/locked.json"


def is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def make_tree(root: Path, seed: int = 3) -> Path:
    """Write the tree under ``root`` and return it."""
    p = plant(PlantSpec(seed=seed, ranks=2, steps=4))
    (root / "jobK").mkdir(parents=True)
    k0, k1 = write_kineto(p.scenario, str(root / "jobK" / "train.rank{rank}.pt.trace.json"))
    with open(k1, "rb") as src, gzip.open(k1 + ".gz", "wb", compresslevel=1) as dst:
        shutil.copyfileobj(src, dst)
    os.unlink(k1)
    (root / "nsys").mkdir()
    write_nsys(p.scenario, str(root / "nsys" / "run.sqlite"))
    (root / "crashed").mkdir()
    data = Path(k0).read_bytes()
    (root / "crashed" / "train.rank0.json.tmp").write_bytes(data[: int(len(data) * 0.6)])  # a crashed run's file
    b = root / "broken"
    b.mkdir()
    (b / "corrupt.json.gz").write_bytes(b"\x1f\x8b\x08\x00" + bytes(range(256)) * 4)
    export = (root / "nsys" / "run.sqlite").read_bytes()
    (b / "truncated.sqlite").write_bytes(export[: len(export) // 2])  # a copy cut short
    (b / "empty.pt.trace.json").write_bytes(b"")
    (b / "settings.json").write_text('{"lr": 0.1, "layers": 12}\n')
    (b / "capture.nsys-rep").write_bytes(b"QDSTRM-not-really\x00" * 8)
    conn = sqlite3.connect(b / "cache.sqlite")
    conn.execute("CREATE TABLE kv (k TEXT, v TEXT)")
    conn.execute("INSERT INTO kv VALUES ('a', 'b')")
    conn.commit()
    conn.close()
    (b / "locked.json").write_text('{"traceEvents": []}')
    os.chmod(b / "locked.json", 0)
    (root / "README.txt").write_text("notes about the run\n")
    (root / "jobK" / "loss.csv").write_text("step,loss\n0,1.0\n")
    links = root / "links"
    links.mkdir()
    os.symlink("../jobK/train.rank0.pt.trace.json", links / "rank0.json")  # the same file again
    os.symlink("../missing/nothing.json", links / "dangling.json")
    os.symlink("..", links / "loop")  # a directory loop
    return root


def snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under ``root``: content hash (files), target (links), mode and mtime."""
    out = {}
    for d, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(d, name)
            st = os.lstat(path)
            if os.path.islink(path):
                out[path] = ("link", os.readlink(path), st.st_mtime_ns)
            elif os.path.isfile(path):
                try:
                    with open(path, "rb") as fh:
                        digest = hashlib.sha256(fh.read()).hexdigest()
                except PermissionError:
                    digest = "unreadable"
                out[path] = ("file", digest, st.st_mode, st.st_mtime_ns, st.st_size)
            else:
                out[path] = ("dir", st.st_mode)
    return out
