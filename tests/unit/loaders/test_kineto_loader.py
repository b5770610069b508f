"""Kineto loader against an independent reading of the same files (stdlib json, Decimal floats)."""

from __future__ import annotations

import functools
import gzip
import json
from collections import Counter
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES, needs_shared, shared_kineto

from traceread import schema
from traceread.loaders.kineto import chunks, split, stream, window
from traceread.loaders.kineto import load_kineto as _load_kineto
from traceread.render.notes import text as words  # notes are data; the reports word them
from traceread.runner.workers import THREADS

# The runner's threads and forks beside each load: the second decoder, the pool, the read-ahead run here
load_kineto = functools.partial(_load_kineto, parallel=THREADS)

ROW_PHASES = {"X", "i", "I"}


def read_text(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def event_spans(text: bytes) -> tuple[list[dict], list[int]]:
    """Events and the byte offset where each one's text ends, by stdlib raw_decode (no scanner)."""
    s = text.decode("utf-8")
    dec = json.JSONDecoder(parse_float=Decimal)
    i = s.index("[", s.index('"traceEvents"')) + 1 if s.lstrip().startswith("{") else s.index("[") + 1
    events, ends = [], []
    ascii_only = len(s) == len(text)
    done_chars = done_bytes = 0
    while True:
        while s[i] in " \t\r\n,":
            i += 1
        if s[i] == "]":
            return events, ends
        obj, i = dec.raw_decode(s, i)
        events.append(obj)
        if not ascii_only:
            done_bytes += len(s[done_chars:i].encode("utf-8"))
            done_chars = i
        ends.append(i if ascii_only else done_bytes)


def expected(events: list[dict]) -> dict:
    """Per raw category row counts, and every row's exact start/end ns, from Decimal microseconds."""
    rows = [e for e in events if e.get("ph") in ROW_PHASES and isinstance(e.get("ts"), (int, Decimal))]
    starts = [int(Decimal(e["ts"]) * 1000) for e in rows]
    ends = [s + (max(int(Decimal(e.get("dur", 0)) * 1000), 0) if e["ph"] == "X" else 0)
            for s, e in zip(starts, rows, strict=True)]
    return {"cats": Counter(e.get("cat", "") for e in rows), "starts": sorted(starts), "ends": sorted(ends)}


def check_against_reference(trace, ref: dict) -> None:
    ev = trace.events
    schema.validate(ev)
    assert Counter(ev["raw_category"].astype(str)) == ref["cats"]
    assert np.array_equal(np.sort(ev["start_ns"].to_numpy()), np.array(ref["starts"], dtype=np.int64))
    assert np.array_equal(np.sort(ev["end_ns"].to_numpy()), np.array(ref["ends"], dtype=np.int64))


def fixture_files() -> list[Path]:
    return sorted(p for p in FIXTURES.glob("*.json*") if "trace" in p.name or p.suffix == ".gz")


def stdlib_events(path: Path) -> list[dict]:
    doc = json.loads(read_text(path), parse_float=Decimal)
    return doc if isinstance(doc, list) else doc["traceEvents"]


@pytest.mark.parametrize("path", fixture_files(), ids=lambda p: p.name)
def test_fixture_matches_stdlib_json(path: Path) -> None:
    check_against_reference(load_kineto(str(path)), expected(stdlib_events(path)))


def _shared_not_in_fixtures() -> list[Path]:
    copied = {p.name for p in fixture_files()}
    return [p for p in shared_kineto() if p.name not in copied]


@needs_shared
@pytest.mark.parametrize("path", _shared_not_in_fixtures(), ids=lambda p: p.name)
def test_every_shared_kineto_trace_loads_exactly(path: Path) -> None:
    events = stdlib_events(path)
    trace = load_kineto(str(path))
    check_against_reference(trace, expected(events))
    assert not trace.meta.truncated


def test_float_timestamps_are_exact_to_the_ns() -> None:
    # 2024 trace with values like 4458676388068.751 us: float64 * 1000 is off by 1 ns for many
    path = FIXTURES / "hta_nccl_a100_rank0of2.json.gz"
    events = stdlib_events(path)
    ref = expected(events)
    naive = sorted(round(float(e["ts"]) * 1000) for e in events
                   if e.get("ph") in ROW_PHASES and "ts" in e)
    assert naive != ref["starts"]  # the trap is real in this file
    ev = load_kineto(str(path)).events
    assert int(ev["start_ns"].min()) == ref["starts"][0]
    assert int(ev["end_ns"].max()) == ref["ends"][-1]


def test_parallel_chunks_match_serial(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Small chunks force many worker tasks, plain (file ranges) and gzip (bytes)."""
    src = FIXTURES / "hta_nccl_a100_rank0of2.json.gz"
    plain = tmp_path / "t.json"
    plain.write_bytes(read_text(src))
    serial = load_kineto(str(src), workers=1).events
    monkeypatch.setattr(chunks, "CHUNK", 200_000)
    monkeypatch.setattr(chunks, "WINDOW", 50_000)
    monkeypatch.setattr(chunks, "LOOKAHEAD", 50_000)
    monkeypatch.setattr(stream, "PARALLEL_MIN", 0)
    for path in (plain, src):
        par = load_kineto(str(path), workers=2).events
        cols = [c for c in schema.EVENT_COLUMNS if c != "trace"]
        assert par[cols].equals(serial[cols])


def test_wrong_boundary_guesses_are_rescanned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A minified trace whose args hold lists of objects: the '}, {' guesses land inside events."""
    events = [{"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 1, "tid": 1, "ts": 1000 + i, "dur": 1,
               "args": {"x": [{"a": j} for j in range(40)]}} for i in range(400)]
    text = json.dumps({"traceEvents": events}).encode()
    path = tmp_path / "nested.json"
    path.write_bytes(text)
    monkeypatch.setattr(chunks, "CHUNK", 20_000)
    monkeypatch.setattr(chunks, "WINDOW", 5_000)
    monkeypatch.setattr(chunks, "LOOKAHEAD", 5_000)
    monkeypatch.setattr(stream, "PARALLEL_MIN", 0)
    for p in (path, _gzip(path, tmp_path / "nested.json.gz")):
        for workers in (1, 2):  # in-place serial decode and worker tasks
            ev = load_kineto(str(p), workers=workers).events
            assert list(ev["name"].astype(str)) == [f"op{i}" for i in range(400)]


def _gzip(src: Path, dst: Path) -> Path:
    dst.write_bytes(gzip.compress(src.read_bytes()))
    return dst


def _split_small(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the two-process split (``kineto.split``) run on a small fixture."""
    monkeypatch.setattr(chunks, "CHUNK", 200_000)
    monkeypatch.setattr(chunks, "WINDOW", 50_000)
    monkeypatch.setattr(chunks, "LOOKAHEAD", 50_000)
    monkeypatch.setattr(split, "SPLIT_MIN", 0)
    monkeypatch.setattr(window, "MAP_MIN", 0)  # plain files: decoded from the file map


HALF_KINDS = ["default", "process"]  # default: a thread with the compiled scanner, else a forked child


def _half_kind(monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    if kind == "process":
        monkeypatch.setattr(split, "start_half", split.start_child)


@pytest.mark.parametrize("kind", HALF_KINDS)
def test_two_process_split_matches_serial(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    """The second half's rows, side tables and names join this process's half as if read serially."""
    src = FIXTURES / "hta_nccl_a100_rank0of2.json.gz"
    plain = tmp_path / "t.json"
    plain.write_bytes(read_text(src))
    serial = load_kineto(str(src), workers=1)
    _split_small(monkeypatch)
    _half_kind(monkeypatch, kind)
    for path in (plain, src):
        par = load_kineto(str(path), workers=2)
        cols = [c for c in schema.EVENT_COLUMNS if c != "trace"]
        assert par.events[cols].equals(serial.events[cols])
        assert par.side.keys() == serial.side.keys()
        for name, table in serial.side.items():
            assert par.side[name].equals(table), name
        assert par.meta.warnings == serial.meta.warnings
        assert par.meta.extra["json_bytes"] == serial.meta.extra["json_bytes"]


@pytest.mark.parametrize("kind", HALF_KINDS)
def test_two_process_split_of_a_truncated_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    """Cut in the second half: every complete event kept, the warning counts both halves."""
    text = read_text(FIXTURES / "hta_nccl_a100_rank0of2.json.gz")
    events, ends = event_spans(text)
    cut = ends[int(len(ends) * 0.8)] + 5
    path = tmp_path / "cut.json"
    path.write_bytes(text[:cut])
    serial = load_kineto(str(path), workers=1)
    _split_small(monkeypatch)
    _half_kind(monkeypatch, kind)
    par = load_kineto(str(path), workers=2)
    assert par.meta.truncated and serial.meta.truncated
    assert par.meta.warnings == serial.meta.warnings
    assert len(par.events) == len(serial.events) == sum(
        1 for e in events[: int(len(ends) * 0.8) + 1] if e.get("ph") in ROW_PHASES and "ts" in e)


def test_gzip_source_inflates_the_same_bytes_ahead_on_demand_and_switched(tmp_path: Path) -> None:
    """On-demand inflation (used while both cores decode) and the read-ahead thread hand out the
    same text, also when a read switches from one to the other mid-stream, and across members."""
    from traceread.loaders.kineto.source import Source

    text = read_text(FIXTURES / "hta_nccl_a100_rank0of2.json.gz")
    path = tmp_path / "two_members.json.gz"
    half = len(text) // 2
    path.write_bytes(gzip.compress(text[:half]) + gzip.compress(text[half:]))
    for ahead, switch in ((True, None), (False, None), (False, 3)):
        src = Source(str(path), ahead=ahead, parallel=THREADS)
        parts = []
        while block := src.read(100_000):
            parts.append(block)
            if len(parts) == switch:
                src.ahead = True
        src.close()
        assert b"".join(parts) == text
        assert src.offset == len(text) and not src.gzip_cut


def test_gzip_source_on_demand_reports_bad_data(tmp_path: Path) -> None:
    from traceread.errors import TraceReadError
    from traceread.loaders.kineto.source import Source

    data = bytearray(gzip.compress(read_text(FIXTURES / "hta_nccl_a100_rank0of2.json.gz")))
    data[len(data) // 2: len(data) // 2 + 64] = bytes(64)  # corrupt the deflate stream
    path = tmp_path / "bad.json.gz"
    path.write_bytes(bytes(data))
    src = Source(str(path), ahead=False)
    try:  # zeros may still inflate: then the CRC check says so (a warning, as for a damaged trailer)
        while src.read(1 << 20):
            pass
    except TraceReadError as exc:
        assert "bad gzip data" in str(exc)
    else:
        assert src.gzip_bad_check
    src.close()


def test_split_child_is_stopped_when_the_file_is_not_a_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The child is forked before the header is read; a bad file still ends it (no stray process)."""
    import os

    from traceread.errors import TraceReadError

    _split_small(monkeypatch)
    started = []
    real = split.start_child
    monkeypatch.setattr(split, "start_half", lambda *a: started.append(real(*a)) or started[-1])
    path = tmp_path / "notes.json"
    path.write_bytes(b"hello " * 50_000)
    with pytest.raises(TraceReadError, match="not JSON"):
        load_kineto(str(path), workers=2)
    assert len(started) == 1 and started[0].done
    with pytest.raises(ChildProcessError):
        os.waitpid(started[0].pid, os.WNOHANG)  # stopped and collected: not even a zombie


def test_split_thread_is_stopped_when_this_half_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bad file, and a wrong boundary guess in this process's half, end the decoding thread
    (no thread left running), and the second case still loads every event alone."""
    from traceread.errors import TraceReadError

    _split_small(monkeypatch)
    started = []
    monkeypatch.setattr(split, "start_half",
                        lambda *a: started.append(split.Half(*a)) or started[-1])
    path = tmp_path / "notes.json"
    path.write_bytes(b"hello " * 50_000)
    with pytest.raises(TraceReadError, match="not JSON"):
        load_kineto(str(path), workers=2)
    assert len(started) == 1 and started[0].done and not _half_threads()
    # args holding lists of objects: '}, {' guesses inside events make this half's chunks fail
    events = [{"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 1, "tid": 1, "ts": 1000 + i, "dur": 1,
               "args": {"x": [{"a": j} for j in range(40)]}} for i in range(4000)]
    path = tmp_path / "nested.json"
    path.write_text(json.dumps({"traceEvents": events}))
    ev = load_kineto(str(path), workers=2).events
    assert list(ev["name"].astype(str)) == [f"op{i}" for i in range(4000)]
    assert len(started) == 2 and started[1].done and not _half_threads()


def _half_threads() -> list[str]:
    import threading

    return [t.name for t in threading.enumerate() if t.name == "traceread-half"]


def test_integer_time_decoder_matches_the_text_decoder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Integer ts/dur taken as JSON ints give the same rows and notes as the exact text path,
    including absent and negative durations, instants, a ts beyond int64 ns, and a float time
    that turns up after integer ones (the rest of the load then goes the text way)."""
    from traceread.loaders.kineto import decode

    events = [{"ph": "X", "cat": "cpu_op", "name": f"op{i % 7}", "pid": 1, "tid": 2, "ts": 1_700_000_000_000_000 + i,
               "dur": (i % 5) - 1, "args": {"External id": i}} for i in range(3000)]
    events[10].pop("dur")
    events[20] = {"ph": "i", "cat": "cpu_instant_event", "name": "mark", "pid": 1, "tid": 2, "ts": 5, "s": "t"}
    events[30]["ts"] = 2**62  # microseconds beyond int64 nanoseconds: not a time
    events[2500]["ts"] = "FLOAT"  # a float after 2500 integer times (written as text: exact)
    path = tmp_path / "int_times.json"
    path.write_text(json.dumps({"traceEvents": events}).replace('"FLOAT"', "1700000000000000.125"))
    monkeypatch.setattr(chunks, "SERIAL_CHUNK", 50_000)  # several chunks: int ones, then the float
    fast = load_kineto(str(path), workers=1)
    monkeypatch.setattr(stream, "guess_int_time", lambda: decode.guess_int_time(False))  # text decoder first
    text = load_kineto(str(path), workers=1)
    assert fast.events.drop(columns="trace").equals(text.events.drop(columns="trace"))
    assert fast.meta.warnings == text.meta.warnings
    assert len(fast.events) == 2999  # the ts beyond int64 ns is skipped, with a warning
    assert any("without a numeric ts" in w for w in map(words, fast.meta.warnings))
    assert fast.events["start_ns"].iloc[2499] == 1_700_000_000_000_000_125


@pytest.mark.parametrize("cut_at", [None, 0.37, 0.93])
def test_mapped_file_decodes_like_the_read_buffer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   cut_at: float | None) -> None:
    """A plain file decoded from its copy-on-write map gives the rows, warnings and truncation
    point of the read buffer, and the file keeps every byte (the brackets go to private pages)."""
    text = read_text(FIXTURES / "hta_nccl_a100_rank0of2.json.gz")
    if cut_at is not None:
        text = text[: int(len(text) * cut_at)]
    path = tmp_path / "t.json"
    path.write_bytes(text)
    monkeypatch.setattr(chunks, "SERIAL_CHUNK", 100_000)
    monkeypatch.setattr(chunks, "LOOKAHEAD", 30_000)
    read = load_kineto(str(path), workers=1)
    monkeypatch.setattr(window, "MAP_MIN", 0)
    monkeypatch.setattr(window, "DROP_STEP", 4096)  # give pages back as it goes
    opened = []
    real = window.MappedWindow.__init__

    def spy(self, src, start):  # noqa: ANN001
        opened.append(start)
        real(self, src, start)

    monkeypatch.setattr(window.MappedWindow, "__init__", spy)
    mapped = load_kineto(str(path), workers=1)
    assert opened, "the map was not used"
    assert path.read_bytes() == text
    cols = [c for c in schema.EVENT_COLUMNS if c != "trace"]
    assert mapped.events[cols].equals(read.events[cols])
    assert mapped.meta.warnings == read.meta.warnings
    assert mapped.meta.truncated == read.meta.truncated == (cut_at is not None)


def test_a_tmp_file_is_read_not_mapped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A profiler's .json.tmp may still be growing or cut back: it is streamed, never mapped."""
    monkeypatch.setattr(window, "MAP_MIN", 0)
    text = read_text(FIXTURES / "hta_nccl_a100_rank0of2.json.gz")
    mapped = []
    monkeypatch.setattr(window.MappedWindow, "__init__", lambda *a: mapped.append(a) or None)
    path = tmp_path / "rank0.pt.trace.json.tmp"
    path.write_bytes(text)
    assert len(load_kineto(str(path), workers=1).events) > 0
    assert not mapped
