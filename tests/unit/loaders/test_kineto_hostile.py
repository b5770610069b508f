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
from traceread.render.notes import text as words  # notes are data; the reports word them

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


def _trace(path: Path, top: dict[str, Any] | None = None, events: list[dict] | None = None, tail: str = "") -> Path:
    import json

    body = json.dumps({**(top or {}), "traceEvents": events or [json.loads(EVENT)]})
    path.write_text(body[:-1] + tail + "}" if tail else body)
    return path


_STEP = {"ph": "X", "cat": "user_annotation", "pid": 0, "tid": 1, "dur": 500}
_BIG = "9" * 5001  # past Python's int-string digit limit (4,300)


@pytest.mark.parametrize(("name", "top", "events", "tail", "note"), [
    ("t.json", {"distributedInfo": {"rank": 2**31, "world_size": 2**31 + 1}}, None, "",
     "distributedInfo.rank 2147483648 is outside 0..2147483647: ignored"),
    ("t.json", {"distributedInfo": {"rank": 2**64, "world_size": 2**63}}, None, "",
     "distributedInfo.world_size 9223372036854775808 is outside 1..2147483647: ignored"),
    ("rank-99999999999.json", None, None, "", "the rank 99999999999 in the file name is outside 0..2147483647"),
    ("t.json", None, [{**_STEP, "name": "ProfilerStep#99999999999999999999", "ts": 900},
                      {**_STEP, "name": "ProfilerStep#3", "ts": 1500}], "",
     "a ProfilerStep# number is past 2^63-1: steps are numbered in time order instead"),
    ("t.json", None, None, f', "baseTimeNanoseconds": {_BIG}', "baseTimeNanoseconds 99999"),
    ("t.json", None, None, f', "baseTimeNanoseconds": {_BIG}, "x": [', "baseTimeNanoseconds 99999"),
    ("t.json", {"baseTimeNanoseconds": int(_BIG[:30])}, None, "", "baseTimeNanoseconds 1e+30 is not"),
    ("t.json", None, None, f', "baseTimeNanoseconds": {2**63}', "baseTimeNanoseconds 9223372036854775808 is not"),
    ("t.json", None, [{**json_event, "pid": 2**64, "tid": "²", "args": {"device": 2**40, "stream": "stream " + _BIG,
                                                                        "correlation": "0x" + "f" * 40}}
                      for json_event in [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1000, "dur": 5}]], "",
     "ignored: stream"),
])
def test_integers_out_of_range_are_noted_not_internal_errors(tmp_path: Path, name: str, top: Any, events: Any,
                                                              tail: str, note: str) -> None:
    """Integer policy (limits.py): each was exit 3 (int32 overflow, int64 overflow, the digit limit)."""
    from traceread.cli import main

    path = _trace(tmp_path / name, top, events, tail)
    before = digest(path)
    trace = load(path)
    assert any(w.startswith(note) for w in map(words, trace.meta.warnings)), trace.meta.warnings
    assert main(["analyze", "--json", str(tmp_path / "out.json"), "-o", str(tmp_path / "out.md"), str(path)]) == 0
    assert main(["info", str(path)]) == 0
    assert digest(path) == before


@pytest.mark.parametrize("damage", ["crc", "length"])
def test_gzip_whose_only_damage_is_its_trailer_loads_with_a_warning(tmp_path: Path, damage: str) -> None:
    """It was refused whole ('bad gzip data') while the same bytes without a trailer loaded."""
    from traceread.cli import main
    from traceread.note import GZIP_CHECK_MISMATCH, Note

    raw = b'{"traceEvents":[' + b",".join([EVENT] * 5000) + b"]}"
    good = gzip.compress(raw, 6)
    at = len(good) - (8 if damage == "crc" else 4)
    path = tmp_path / "t.json.gz"
    path.write_bytes(good[:at] + bytes([good[at] ^ 1]) + good[at + 1:])
    before = digest(path)
    trace = load(path)
    assert len(trace.events) == 5000
    assert Note.of(GZIP_CHECK_MISMATCH) in trace.meta.warnings
    assert main(["info", str(path)]) == 0
    assert digest(path) == before


@pytest.mark.parametrize("dur", [2**53 + 1, 9_000_000_000_000_000])
def test_a_duration_that_ends_past_int64_is_one_line_exit_2(tmp_path, capsys, dur) -> None:
    """Found by fuzz_long (seed 2612): ts + dur past int64 ns wrapped to an end before its start (exit 3)."""
    import json

    from traceread.cli import main

    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1_700_000_000_000_000, "dur": d,
         "args": {"device": 0, "stream": 7}} for d in (5, dur)]}))
    assert main(["analyze", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(path) in err[0] and "int64" in err[0]
