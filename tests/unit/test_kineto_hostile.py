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
