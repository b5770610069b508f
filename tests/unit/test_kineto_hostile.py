"""Hostile Kineto input shapes (issue 26): each a result or one line naming the file, in linear
time, with the input unchanged."""

from __future__ import annotations

import collections
import gzip
import hashlib
from pathlib import Path
from typing import Any

import pytest

import traceread.loaders.kineto.chunks as chunks
import traceread.loaders.kineto.decode as decode
import traceread.loaders.kineto.split as split
import traceread.loaders.kineto.stream as stream
import traceread.loaders.kineto.text as text
from traceread.loaders import load

EVENT = b'{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1000,"dur":5,"args":{"device":0,"stream":7}}'
STRETCH = 64 << 20  # long enough that a rescan per 4 MB block would scan it ~8 times over


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _count_scans(monkeypatch: pytest.MonkeyPatch) -> collections.Counter:
    """Bytes looked at by each byte-level search of the loader (boundary guesses, exact scans)."""
    seen: collections.Counter = collections.Counter()
    find, values, feed = text.find_boundary, text.scan_values, text.ArrayScanner.feed

    def counted_find(buf: Any, pos: int, endpos: int) -> Any:
        seen["boundary"] += max(0, min(endpos, len(buf)) - pos)
        return find(buf, pos, endpos)

    def counted_values(buf: Any) -> Any:
        seen["exact"] += len(buf)
        return values(buf)

    def counted_feed(self: Any, block: Any) -> Any:
        seen["exact"] += len(block)
        return feed(self, block)

    for module in (chunks, stream, split):
        monkeypatch.setattr(module, "find_boundary", counted_find)
    monkeypatch.setattr(decode, "scan_values", counted_values)
    monkeypatch.setattr(text.ArrayScanner, "feed", counted_feed)
    return seen


@pytest.mark.parametrize("shape", ["spaces", "string"])
@pytest.mark.parametrize("packed", ["plain", "gzip"])
def test_long_stretch_without_an_event_boundary_is_scanned_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              shape: str, packed: str) -> None:
    """1 GiB of spaces after the array's start took 1,109 s: each 4 MB block rescanned the buffer."""
    if shape == "spaces":
        body = EVENT + b"," + b" " * STRETCH + EVENT
    else:  # one event whose name is one long string
        body = EVENT + b"," + EVENT.replace(b'"name":"k"', b'"name":"' + b"a" * STRETCH + b'"')
    raw = b'{"traceEvents":[' + body + b"]}"
    path = tmp_path / ("t.json" if packed == "plain" else "t.json.gz")
    path.write_bytes(raw if packed == "plain" else gzip.compress(raw, 1))
    before = digest(path)
    seen = _count_scans(monkeypatch)
    trace = load(path, decoders=1)
    assert len(trace.events) == 2
    # each search looks at each byte about once (a rescan per block would be ~8x at this size)
    assert seen["boundary"] <= 1.5 * len(raw), seen
    assert seen["exact"] <= 2.5 * len(raw), seen
    assert digest(path) == before


_CUT_WHILE_READ = """
import os, sys
import traceread.loaders.kineto.chunks as chunks
from traceread.errors import TraceReadError
from traceread.loaders import load

path, decoders = sys.argv[1], int(sys.argv[2])
decode = chunks.decode_in_place
calls = []

def cut_after_first_chunk(buf, end, res):
    ok = decode(buf, end, res)
    if not calls:
        os.truncate(path, os.path.getsize(path) // 3)  # another process would do this
    calls.append(end)
    return ok

chunks.decode_in_place = cut_after_first_chunk
try:
    trace = load(path, decoders=decoders)
except TraceReadError as exc:
    print("error:", exc)
else:
    print("loaded:", len(trace.events), trace.meta.truncated)
"""


@pytest.mark.parametrize(("decoders", "scanner"), [(1, "1"), (2, "1"), (2, "0")])
def test_file_cut_while_mapped_gives_one_line_not_sigbus(tmp_path: Path, decoders: int, scanner: str) -> None:
    """A plain JSON of 8 MB or more is decoded from a map; cut by another process while read, it
    killed the process with SIGBUS (exit 135, no message)."""
    import os
    import subprocess
    import sys

    path = tmp_path / "big.json"
    path.write_bytes(b'{"traceEvents":[' + b",".join([EVENT] * 200_000) + b"]}")  # 20 MB
    env = {**os.environ, "TRACEREAD_NO_SCANNER": "" if scanner == "1" else "1"}
    proc = subprocess.run([sys.executable, "-c", _CUT_WHILE_READ, str(path), str(decoders)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    out = proc.stdout.strip()
    # the cut is seen (a one-line error), or the events before it load with the truncation noted
    assert out == f"error: {path}: the file was cut short while it was being read (written or truncated by " \
                  "another process?); read it again once it is complete" or out.endswith(" True"), out


def _cli(*args: str, stdin: Any = None, timeout: float = 60) -> Any:
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-c", "import sys, traceread.cli; sys.exit(traceread.cli.run())", *args],
                          input=stdin, capture_output=True, timeout=timeout)


def test_fifo_without_a_writer_is_refused_in_one_line_not_a_hang(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "rank-1.json"
    os.mkfifo(fifo)
    for command in ("info", "analyze"):
        proc = _cli(command, str(fifo), timeout=30)  # opening a FIFO blocks until a writer comes
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.decode().strip().splitlines()
        assert lines[-1] == f"traceread: error: {fifo}: empty (a pipe or FIFO nothing was written to)"


def test_a_pipe_is_read_as_a_stream() -> None:
    """``info <(cat t.json)`` and a pipe into /dev/stdin were exit 3 (not seekable)."""
    from conftest import FIXTURES

    data = (FIXTURES / "hta_nccl_a100_rank0of2.json.gz").read_bytes()
    proc = _cli("info", "/dev/stdin", stdin=data)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode().startswith("== /dev/stdin\n")
    proc = _cli("analyze", "--json", "-", "/dev/stdin", stdin=gzip.decompress(data))
    assert proc.returncode == 0, proc.stderr
    assert b'"dominant_cause"' in proc.stdout


def test_socket_is_refused_and_scan_skips_non_regular_files(tmp_path: Path) -> None:
    import os
    import socket

    from conftest import FIXTURES

    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "t.json.gz").write_bytes((FIXTURES / "hta_nccl_a100_rank0of2.json.gz").read_bytes())
    os.mkfifo(tree / "fifo.json")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tree / "s.json"))
    try:
        proc = _cli("info", str(tree / "s.json"))
        assert proc.returncode == 2
        assert proc.stderr.decode().strip().endswith("s.json: is a device or socket, not a trace file")
        before = {p.name: p.stat().st_mtime_ns for p in tree.iterdir()}
        proc = _cli("scan", str(tree), "--out", str(tmp_path / "out"), timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert {p.name: p.stat().st_mtime_ns for p in tree.iterdir()} == before
        assert "not regular files (sockets, devices, pipes)" in (tmp_path / "out" / "failures.md").read_text()
    finally:
        sock.close()
