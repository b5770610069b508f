"""Truncated files, writer bugs, odd values and bad inputs: what loads, what warns, what errors."""

from __future__ import annotations

import gzip
import json
import os
import zlib
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES
from test_kineto_loader import ROW_PHASES, event_spans, read_text

from traceread.errors import TraceReadError
from traceread.loaders.kineto import load_kineto
from traceread.render.notes import text as words  # notes are data; the reports word them

TRUNC_SOURCE = FIXTURES / "hta_alexnet_a100.json.gz"  # 1408 events, 320 KB of JSON


@pytest.fixture(autouse=True, params=["scanner", "msgspec"])
def decoder(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test here runs with the compiled scanner (where built) and with the msgspec fallback."""
    from traceread.loaders.kineto import scan

    if request.param == "scanner" and not scan.BUILT:
        pytest.skip("compiled scanner not built")
    if request.param == "msgspec":
        monkeypatch.setenv(scan.DISABLE_ENV, "1")
    else:
        monkeypatch.delenv(scan.DISABLE_ENV, raising=False)
    return request.param


def _row_cats(events: list[dict]) -> Counter:
    return Counter(e.get("cat", "") for e in events if e.get("ph") in ROW_PHASES)


def _loaded_cats(trace) -> Counter:
    return Counter(trace.events["raw_category"].astype(str))


def _cut_offsets(text: bytes, ends: list[int], n: int = 24) -> list[int]:
    """Cuts spread over the array, some right at an event's end, some mid-event, some mid-string."""
    rng = np.random.default_rng(7)
    first, last = ends[0], ends[-1]
    picks = sorted(set(rng.integers(first - 50, last, n).tolist()))
    picks += [ends[len(ends) // 2], ends[len(ends) // 3] + 1, ends[-1] - 3]
    return sorted(set(picks))


@pytest.fixture(scope="module")
def source() -> tuple[bytes, list[dict], list[int]]:
    text = read_text(TRUNC_SOURCE)
    events, ends = event_spans(text)
    return text, events, ends


@pytest.mark.parametrize("mapped", [False, True], ids=["read", "mapped"])
def test_truncated_plain_json_keeps_every_complete_event(tmp_path: Path, source, mapped: bool,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    text, events, ends = source
    if mapped:  # small chunks decoded from the file map, cut anywhere
        from traceread.loaders.kineto import chunks, window

        monkeypatch.setattr(window, "MAP_MIN", 0)
        monkeypatch.setattr(chunks, "SERIAL_CHUNK", 40_000)
        monkeypatch.setattr(chunks, "LOOKAHEAD", 10_000)
    for cut in _cut_offsets(text, ends):
        # a .tmp file (maybe still being written) is never mapped
        path = tmp_path / (f"cut{cut}.pt.trace.json" if mapped else f"cut{cut}.pt.trace.json.tmp")
        path.write_bytes(text[:cut])
        trace = load_kineto(str(path))
        whole = [e for e, end in zip(events, ends, strict=True) if end <= cut]
        assert _loaded_cats(trace) == _row_cats(whole), cut
        assert trace.meta.truncated
        assert any("ends inside the event array" in w for w in map(words, trace.meta.warnings))


def test_truncated_gzip_keeps_every_complete_event(tmp_path: Path, source) -> None:
    text, events, ends = source
    packed = gzip.compress(text, compresslevel=6)
    for cut in np.linspace(200, len(packed) - 9, 16).astype(int).tolist():
        path = tmp_path / f"cut{cut}.json.gz"
        path.write_bytes(packed[:cut])
        available = len(zlib.decompressobj(31).decompress(packed[:cut]))
        trace = load_kineto(str(path))
        whole = [e for e, end in zip(events, ends, strict=True) if end <= available]
        assert _loaded_cats(trace) == _row_cats(whole), cut
        assert trace.meta.truncated


def _trace_text(events: list, raw_event: bytes = b"") -> bytes:
    body = b",\n".join(json.dumps(e).encode() for e in events)
    if raw_event:
        body += b",\n" + raw_event
    return b'{"schemaVersion": 1, "traceEvents": [\n' + body + b"\n]}"


def _ev(i: int, **kw) -> dict:
    return {"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 7, "tid": 8, "ts": 100 + i, "dur": 2, **kw}


@pytest.mark.parametrize("bad, fix", [
    (b'{"ph": "X", "cat": "python_function", "name": "a\nb\x01", "pid": 7, "tid": 8, "ts": 5, "dur": 1}',
     "raw control characters"),
    (b'{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": 7, '
     b'"ts": 5, "dur": 0, "args": {"bytes": 4, "memory bandwidth (GB/s)": N/A}}', "bare N/A"),
    (b'{"ph": "X", "cat": "cpu_op", "name": "C:\\Users\\x\\model.py(3): f", "pid": 7, "tid": 8, "ts": 5, '
     b'"dur": 1}', "stray backslashes"),
])
def test_writer_bugs_are_repaired_with_a_warning(tmp_path: Path, bad: bytes, fix: str) -> None:
    path = tmp_path / "bug.json"
    path.write_bytes(_trace_text([_ev(i) for i in range(5)], bad))
    trace = load_kineto(str(path))
    assert len(trace.events) == 6
    assert any(fix in w for w in map(words, trace.meta.warnings))


def test_unrepairable_event_is_skipped_not_fatal(tmp_path: Path) -> None:
    path = tmp_path / "quote.json"
    path.write_bytes(_trace_text([_ev(i) for i in range(5)], b'{"ph": "X", "name": "a"b"c", "ts": 1, "dur": 1}'))
    trace = load_kineto(str(path))
    assert len(trace.events) == 5
    assert any("skipped 1 event" in w for w in map(words, trace.meta.warnings))


def test_odd_values(tmp_path: Path) -> None:
    events = [
        _ev(0, args={"External id": 2**64 + 5, "correlation": 10159970886766084423}),
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": "stream 7", "ts": 10.5, "dur": -3},
        {"ph": "X", "cat": "cpu_op", "name": "nodur", "pid": "123", "tid": 4, "ts": 11},
        {"ph": "i", "s": "g", "name": "Record Window End", "pid": "", "tid": "", "ts": 50},
        {"ph": "M", "name": "thread_name", "pid": 7, "tid": 8, "args": {"name": "first"}},
        {"ph": "M", "name": "thread_name", "pid": 7, "tid": 8, "args": {"name": "second"}},
        {"ph": "s", "id": 1, "pid": 7, "tid": 8, "ts": 100, "cat": "ac2g", "name": "ac2g"},
        {"ph": "X", "cat": "cpu_op", "name": "weird", "pid": 7, "tid": 8, "ts": 12, "dur": 1,
         "args": {"device": [1, 2], "stream": {"a": 1}}},
    ]
    trace = load_kineto(str(_write(tmp_path / "odd.json", json.dumps({"traceEvents": events}))))
    ev = trace.events.set_index(trace.events["name"].astype(str))
    assert ev.loc["op0", "external_id"] == -1 and ev.loc["op0", "correlation"] == -1
    assert ev.loc["k", "stream"] == 7 and ev.loc["k", "device"] == 0
    assert ev.loc["k", "end_ns"] == ev.loc["k", "start_ns"] == 10_500
    assert ev.loc["nodur", "pid"] == 123 and ev.loc["nodur", "end_ns"] == ev.loc["nodur", "start_ns"]
    assert ev.loc["Record Window End", "lane"] == "instant"
    assert "weird" in ev.index
    assert trace.meta.extra["thread_names"]["7:8"] == "second"
    assert len(trace.events) == 5  # flows and metadata are not rows
    text = " ".join(map(words, trace.meta.warnings))
    assert "negative durations" in text and "beyond int64" in text and "without dur" in text


def _write(path: Path, text: str | bytes) -> Path:
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


@pytest.mark.parametrize("name, content, problem", [
    ("empty.json", b"", "empty file"),
    ("blank.json", b"   \n", "not a trace"),
    ("notes.json", b"hello world", "not a trace"),
    ("other.json", b'{"foo": [1, 2, 3]}', "no traceEvents"),
    ("list.json", b"[1, 2, 3]", "not a trace"),
    ("bad.json.gz", b"\x1f\x8b\x08\x00garbage-not-deflate-data" * 3, "bad gzip data"),
    # a gzip whose only damage is its CRC trailer loads with a warning: test_kineto_hostile.py
    ("empty.json.gz", gzip.compress(b"", mtime=0), "empty file"),
])
def test_bad_inputs_give_one_line_errors(tmp_path: Path, name: str, content: bytes, problem: str) -> None:
    from traceread.loaders import load

    folder = tmp_path / "in"
    folder.mkdir()
    path = _write(folder / name, content)
    before = sorted(os.listdir(folder))
    with pytest.raises(TraceReadError) as info:
        load(str(path))
    msg = str(info.value)
    assert problem in msg and str(path) in msg and "\n" not in msg
    assert sorted(os.listdir(folder)) == before


def test_concatenated_gzip_members_load_as_one_stream(tmp_path: Path, source) -> None:
    text, events, _ = source
    half = len(text) // 2
    path = _write(tmp_path / "members.json.gz", gzip.compress(text[:half]) + gzip.compress(text[half:]))
    trace = load_kineto(str(path))
    assert _loaded_cats(trace) == _row_cats(events) and not trace.meta.truncated
