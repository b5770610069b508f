"""The compiled Kineto scanner against the msgspec decoder (its exact fallback), column by column.

Every test that needs the extension skips when it is not built; the loader then decodes with
msgspec alone, which the rest of the suite covers.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import FIXTURES, needs_shared, shared_kineto
from test_kineto_loader import read_text

from traceread.loaders.kineto import decode, scan
from traceread.loaders.kineto import load_kineto as _load_kineto
from traceread.loaders.kineto.frame import FrameBuilder
from traceread.loaders.kineto.text import TRACE_EVENTS_KEY, scan_values
from traceread.runner.workers import THREADS

load_kineto = functools.partial(_load_kineto, parallel=THREADS)  # the runner's threads and forks beside it

needs_scanner = pytest.mark.skipif(not scan.BUILT, reason="compiled scanner not built")


def _load(path: Path, monkeypatch: pytest.MonkeyPatch, scanner: bool, **kw):
    if scanner:
        monkeypatch.delenv(scan.DISABLE_ENV, raising=False)
    else:
        monkeypatch.setenv(scan.DISABLE_ENV, "1")
    return load_kineto(str(path), **kw)


def assert_same_trace(a, b) -> None:
    """Every column, side table and meta field exact (which decoder ran aside)."""
    pd.testing.assert_frame_equal(a.events, b.events, check_exact=True)
    assert a.side.keys() == b.side.keys()
    for key in a.side:
        x, y = a.side[key], b.side[key]
        if key == "op_shapes":  # lists in object columns: compare their reprs
            assert x["row"].tolist() == y["row"].tolist()
            for col in ("input_dims", "input_types"):
                assert [repr(v) for v in x[col]] == [repr(v) for v in y[col]]
        else:
            pd.testing.assert_frame_equal(x, y, check_exact=True)
    ea = {k: v for k, v in a.meta.extra.items() if k != "kineto_decoder"}
    eb = {k: v for k, v in b.meta.extra.items() if k != "kineto_decoder"}
    assert ea == eb
    assert a.meta.warnings == b.meta.warnings
    assert (a.meta.generation, a.meta.truncated, a.meta.time_base, a.meta.epoch_offset_ns) == \
        (b.meta.generation, b.meta.truncated, b.meta.time_base, b.meta.epoch_offset_ns)
    pd.testing.assert_frame_equal(a.meta.steps, b.meta.steps, check_exact=True)


def _real_traces() -> list[Path]:
    fixtures = sorted(FIXTURES.glob("*.json*"))
    names = {p.name for p in fixtures}
    return fixtures + [p for p in shared_kineto() if p.name not in names]


@needs_scanner
@pytest.mark.parametrize("path", _real_traces(), ids=lambda p: p.name)
def test_scanner_frame_equals_fallback_frame_on_real_traces(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fast = _load(path, monkeypatch, True, workers=1)
    slow = _load(path, monkeypatch, False, workers=1)
    assert_same_trace(fast, slow)
    assert slow.meta.extra["kineto_decoder"]["scanner_chunks"] == 0
    # every real trace we hold is taken whole by the scanner: a fallback here is a lost fast path
    assert fast.meta.extra["kineto_decoder"]["scanner_share"] == 1.0, fast.meta.extra["kineto_decoder"]


@needs_shared
@needs_scanner
@pytest.mark.parametrize("kind", ["thread", "process"])
def test_scanner_in_the_two_process_split(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    from traceread.loaders.kineto import split

    monkeypatch.setattr(split, "SPLIT_MIN", 0)
    halves = []
    start = split.Half if kind == "thread" else split.start_child
    monkeypatch.setattr(split, "start_half", lambda *a: halves.append(start(*a)) or halves[-1])
    path = tmp_path / "resnet.json"
    path.write_bytes(read_text(next(p for p in shared_kineto() if "resnet50_13streams" in p.name)))
    fast = _load(path, monkeypatch, True, workers=2)
    slow = _load(path, monkeypatch, False, workers=1)
    assert_same_trace(fast, slow)
    assert fast.meta.extra["kineto_decoder"]["scanner_chunks"] > 1
    assert len(halves) == 1 and halves[0].done


def test_switch_forces_the_fallback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = FIXTURES / "hta_alexnet_a100.json.gz"
    tr = _load(path, monkeypatch, False)
    dec = tr.meta.extra["kineto_decoder"]
    assert dec["scanner_chunks"] == 0 and dec["msgspec_chunks"] >= 1
    assert set(dec["fallback_reasons"]) <= {"scanner switched off", "scanner not built"}
    if scan.BUILT:
        assert "switched off" in scan.status()


# --- crafted events: what the scanner takes, what it leaves to msgspec, same result either way ----

def _trace(events: list[bytes]) -> bytes:
    return b'{"schemaVersion": 1, "traceEvents": [\n' + b",\n".join(events) + b'\n], "baseTimeNanoseconds": 7}'


_OK = b'{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 7, "tid": 8, "ts": 100, "dur": 2}'


@needs_scanner
@pytest.mark.parametrize("event, taken", [
    (b'{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 2, "ts": 123.456, "dur": 0.001}', True),
    (b'{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 2, "ts": -0.5, "dur": 7.25}', True),
    (b'{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 2, "ts": 9223372036854774, "dur": 0}', True),
    (b'{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 2, "ts": 9223372036854775, "dur": 0}', False),
    (b'{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 2, "ts": 1.2345, "dur": 1}', False),
    (b'{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 2, "ts": 1e3, "dur": 1}', False),
    (b'{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 2, "ts": "15", "dur": 1}', False),
    (b'{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 2, "dur": 1}', False),
    (b'{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 2, "ts": 5, "dur": -1}', False),
    (b'{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 2, "ts": 5}', False),
    (b'{"ph": "i", "cat": "cpu_instant_event", "name": "a", "pid": 1, "tid": 2, "ts": 5, "s": "t"}', True),
    (b'{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": "stream 7", "ts": 5, "dur": 1, '
     b'"args": {"device": 0, "stream": 7, "grid": [1, 2, 3], "block": [4,5,6], "registers per thread": 9, '
     b'"shared memory": 0, "correlation": 11, "External id": 12}}', True),
    (b'{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 5, "dur": 1, '
     b'"args": {"grid": "grid(100,)", "block": [1, 1, 1]}}', False),  # used by a kernel: fallback
    (b'{"ph": "X", "cat": "cpu_op", "name": "k", "pid": 0, "tid": 7, "ts": 5, "dur": 1, '
     b'"args": {"grid": "grid(100,)", "stream": "0x0", "bytes": "12"}}', True),  # unused here
    (b'{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": 7, '
     b'"ts": 5, "dur": 1, "args": {"bytes": "12"}}', False),  # a string size a copy uses
    (b'{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD (Device -> Device)", "pid": 0, "tid": 7, '
     b'"ts": 5, "dur": 1, "args": {"bytes": 4096, "device": 0, "stream": 7}}', True),
    (b'{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": "1441273664", "ts": 5, "dur": 1, '
     b'"args": {"Input Dims": [[2, 3], [3, 4]], "Input type": ["float", "float"], "External id": 3}}', True),
    (b'{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 2, "ts": 5, "dur": 1, '
     b'"args": {"Input dims": [[]], "Input type": []}}', True),
    (b'{"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler", '
     b'"ts": 5, "dur": 1}', True),
    (b'{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": "12345678901234567890", "ts": 5, "dur": 1}',
     False),
    (b'{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": "0x1f", "ts": 5, "dur": 1}', False),
    (b'{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1.5, "tid": 2, "ts": 5, "dur": 1}', False),
    (b'{"ph": "X", "cat": "cpu_op", "name": "caf\\u00e9 \\"q\\" \\\\n", "pid": 1, "tid": 2, "ts": 5, "dur": 1}',
     True),
    (b'{"ph": "X", "cat": "cpu_op", "name": "caf\xc3\xa9", "pid": 1, "tid": 2, "ts": 5, "dur": 1}', True),
    (b'{"ph": "X", "cat": "cpu_op", "name": "bad \xff utf8", "pid": 1, "tid": 2, "ts": 5, "dur": 1}', False),
    (b'{"ph": "X", "cat": "cpu_op", "name": "ctl \x01", "pid": 1, "tid": 2, "ts": 5, "dur": 1}', False),
    (b'{"ph": "X", "cat": "cpu_op", "name": "C:\\Users\\x", "pid": 1, "tid": 2, "ts": 5, "dur": 1}', False),
    (b'{"ph": "X", "cat": "cpu_op", "name": "a", "name": "b", "pid": 1, "tid": 2, "ts": 5, "dur": 1}', False),
    (b'{"ph": "X", "cat": "cpu_op", "na\\u006de": "a", "pid": 1, "tid": 2, "ts": 5, "dur": 1}', False),
    (b'{"ph": "X", "cat": 5, "name": "a", "pid": 1, "tid": 2, "ts": 5, "dur": 1}', False),
    (b'{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 2, "ts": 5, "dur": 1, "args": null}', False),
    (b'{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 2, "ts": 5, "dur": 1, '
     b'"args": {"memory bandwidth (GB/s)": N/A}}', False),
    (b'{"ph": "Q", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 2, "ts": 5, "dur": 1}', False),
    (b'{"cat": "cpu_op", "name": "a", "pid": 1, "tid": 2, "ts": 5, "dur": 1}', False),
    (b'{"ph": "f", "id": 1, "pid": "x", "tid": 2.5, "ts": "odd", "cat": 3, "bp": "e"}', True),  # not a row
    (b'{"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "main"}}', True),
    (b'{"ph": "M", "name": "process_labels", "pid": 1, "tid": 0, "args": {"labels": 5}}', False),
    (b'{"ph": "X", "cat": "kernel", "name": "ncclKernel_AllReduce", "pid": 0, "tid": 7, "ts": 5, "dur": 1, '
     b'"args": {"grid": [1, 1, 1], "block": [1, 1, 1], "Collective name": "allreduce", "In msg nelems": 4, '
     b'"Out msg nelems": 4, "dtype": "Float", "Group size": 2, "Process Group Name": "0", '
     b'"Process Group Description": "default_pg"}}', True),
    (b'{"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 2, "ts": 5, "dur": 1, '
     b'"args": {"Collective name": "broadcast", "In msg size": 8, "Process Group ID": 3}}', True),
    (b'{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 5, "dur": 1, '
     b'"args": {"Collective name": 5}}', False),
    (b'{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 2, "ts": 5, "dur": 1, "x": [[[[[1]]]]], '
     b'"y": {"z": [true, false, null, -0.5e-3, "s"]}}', True),
    (b'{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 2, "ts": 5, "dur": 01}', False),
    (b'{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 2, "ts": 5, "dur": 1, "x": tru}', False),
    (b'{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 2, "ts": 5, "dur": 1, "x": "\\ud83d"}', False),
])
def test_crafted_event_same_frame_either_way(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, event: bytes,
                                             taken: bool) -> None:
    path = tmp_path / "t.json"
    path.write_bytes(_trace([_OK, event, _OK]))
    fast = _load(path, monkeypatch, True)
    slow = _load(path, monkeypatch, False)
    assert_same_trace(fast, slow)
    assert (fast.meta.extra["kineto_decoder"]["scanner_share"] == 1.0) is taken, \
        fast.meta.extra["kineto_decoder"]["fallback_reasons"]


@needs_scanner
def test_decimal_microseconds_are_exact_ns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pairs = [("1700000000123.456", "0.001"), ("0.5", "12.25"), ("-3.000", "0"), ("42", "7.1")]
    evs = [b'{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": %s, "dur": %s}'
           % (t.encode(), d.encode()) for t, d in pairs]
    path = tmp_path / "t.json"
    path.write_bytes(_trace(evs))
    tr = _load(path, monkeypatch, True)
    assert tr.meta.extra["kineto_decoder"]["scanner_share"] == 1.0
    assert tr.events["start_ns"].tolist() == [1700000000123456, 500, -3000, 42000]
    assert (tr.events["end_ns"] - tr.events["start_ns"]).tolist() == [1, 12250, 0, 7100]


@needs_scanner
def test_numbers_of_every_length_same_frame_either_way(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Integer parts of 1-21 digits and 0-9 decimals, in every field the scanner reads as a number,
    also as the chunk's last bytes (where fewer than 8 bytes remain): the scanner's word-at-a-time
    digit steps give what msgspec gives, or leave the chunk to it."""
    rng = np.random.default_rng(7)

    def num(digits: int, decimals: int) -> bytes:
        head = str(int(rng.integers(1, 10))) + "".join(str(int(d)) for d in rng.integers(0, 10, digits - 1))
        tail = "".join(str(int(d)) for d in rng.integers(0, 10, decimals))
        return (head + ("." + tail if decimals else "")).encode()

    evs = []
    for digits in range(1, 22):
        for decimals in (0, 1, 2, 3, 4, 7, 9):
            evs.append(b'{"ph": "X", "cat": "kernel", "name": "k", "pid": %s, "tid": %s, "ts": %s, "dur": %s, '
                       b'"args": {"External id": %s, "correlation": %s, "device": 0, "stream": 7}}'
                       % (num(min(digits, 9), 0), num(min(digits, 6), 0), num(digits, decimals),
                          num(max(digits - 10, 1), decimals), num(digits, 0), num(min(digits, 18), 0)))
    for tail in (b"7", b"1234567", b"12345678", b"1.5", b"123.456"):  # numbers 2-9 bytes before the end
        body = b'{"ph": "i", "cat": "cpu_instant_event", "name": "m", "pid": 1, "tid": 1, "ts": %s}' % tail
        fast, _ = decode.decode_scanned(body, False)
        slow = decode.decode_msgspec(b"[" + body + b"]", body, False)
        assert fast is not None
        _same_chunk(fast, slow)
    path = tmp_path / "numbers.json"
    for group in range(0, len(evs), 7):  # one trace per integer length: a refused event refuses only its own
        path.write_bytes(_trace([_OK, *evs[group: group + 7], _OK]))
        assert_same_trace(_load(path, monkeypatch, True), _load(path, monkeypatch, False))


# --- hostile chunks: the scanner refuses or agrees, never reads outside the buffer ------------------

def _frame(chunk: dict):
    b = FrameBuilder()
    b.add(chunk)
    events, side = b.build("x", 0)
    return events, side, b.meta_rows, dict(b.notes), b.other_events


def _same_chunk(fast: dict, slow: dict) -> None:
    (ea, sa, ma, na, oa), (eb, sb, mb, nb, ob) = _frame(fast), _frame(slow)
    pd.testing.assert_frame_equal(ea, eb, check_exact=True)
    assert sa.keys() == sb.keys()
    for k in sa:
        if k != "op_shapes":
            pd.testing.assert_frame_equal(sa[k], sb[k], check_exact=True)
    assert (ma, na, oa) == (mb, nb, ob)
    assert fast["float_ts"] == slow["float_ts"]


def _chunk_of(path: Path, limit: int) -> bytes:
    text = read_text(path)
    m = TRACE_EVENTS_KEY.search(text)
    start = m.end() if m else text.index(b"[") + 1  # the object form, or the 2021 bare list
    body = memoryview(text)[start: start + limit]
    spans, _, _ = scan_values(body)
    return bytes(body[spans[0][0]: spans[-1][1]])


@needs_scanner
@pytest.mark.parametrize("name", ["hta_nccl_a100_rank0of2.json.gz", "kineto2021_resnet50_bare_list.pt.trace.json.gz"])
def test_mutated_chunks_never_disagree(name: str) -> None:
    """Random byte edits, cuts and junk: every chunk the scanner takes matches msgspec's decode."""
    base = _chunk_of(FIXTURES / name, 12_000)  # ~40 events: edits land in every kind of token
    rng = np.random.default_rng(16)
    junk = [b'"', b"\\", b"{", b"}", b"[", b"]", b",", b":", b".", b"e", b"-", b"0", b"9", b"\x00", b"\xff",
            b"\xc3", b" ", b"\n", b"u", b"n"]
    taken = refused = 0
    for trial in range(400):
        text = bytearray(base)
        for _ in range(int(rng.integers(1, 4))):
            at = int(rng.integers(0, len(text)))
            op = trial % 3
            if op == 0:
                text[at: at + 1] = junk[int(rng.integers(0, len(junk)))]
            elif op == 1:
                del text[at: at + int(rng.integers(1, 6))]
            else:
                text = text[:at]
        body = bytes(text)
        for final in (False, True):
            fast, _ = decode.decode_scanned(body, final)
            if fast is None:
                refused += 1
                continue
            slow = decode.decode_msgspec(None if final else b"[" + body + b"]", body, final)
            assert not slow.get("framing_error"), (trial, final)
            _same_chunk(fast, slow)
            if final:
                assert (fast["tail_offset"], fast["array_end"]) == (slow["tail_offset"], slow["array_end"])
            taken += 1
    assert taken > 50 and refused > 50  # both outcomes were exercised


@needs_scanner
def test_scanner_rejects_bad_arguments_without_crashing() -> None:
    from traceread.loaders.kineto import scan

    cols = np.empty((scan.NCOLS, 4), np.int64)
    kern = np.empty((scan.NKCOLS, 4), np.int64)
    with pytest.raises(ValueError):
        scan.COMPILED.scan(_OK, cols, kern, 100)  # arrays smaller than the capacity claimed
    with pytest.raises((ValueError, BufferError, TypeError)):
        scan.COMPILED.scan(_OK, cols[:, ::2], kern, 2)  # not contiguous
    ro = np.zeros((scan.NCOLS, 4), np.int64)
    ro.flags.writeable = False
    with pytest.raises((ValueError, BufferError, TypeError)):
        scan.COMPILED.scan(_OK, ro, kern, 4)
    assert scan.COMPILED.scan(b",".join([_OK] * 5), cols, kern, 4) == "more rows than the caller's capacity"
    assert isinstance(scan.COMPILED.scan(b"", cols, kern, 4), tuple)
    assert scan.COMPILED.scan(b'{"a": ' + b"[" * 100_000, cols, kern, 4) == "nested too deep"
