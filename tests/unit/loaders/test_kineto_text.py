"""Byte-level helpers: exact us-text -> ns parsing, the exact structural scanner, event repairs."""

from __future__ import annotations

import json
from decimal import Decimal

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from traceread.loaders.kineto.text import ArrayScanner, repair_event, scan_values, us_text_to_ns

_us_int = st.integers(min_value=0, max_value=4 * 10**15).map(str)
_us_3dp = st.tuples(st.integers(0, 9 * 10**12), st.integers(0, 999)).map(lambda t: f"{t[0]}.{t[1]:03d}")
_us_any = st.tuples(st.integers(-(10**9), 10**13), st.text("0123456789", min_size=1, max_size=6)).map(
    lambda t: f"{t[0]}.{t[1]}")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(_us_int, _us_3dp, _us_any), min_size=1, max_size=40))
def test_us_text_to_ns_is_exact(values: list[str]) -> None:
    ns, ok = us_text_to_ns([v.encode() for v in values])
    want = [int(Decimal(v) * 1000) for v in values]  # digits past the ns are dropped, as int() does
    assert ok.all()
    assert ns.tolist() == want


def test_us_text_to_ns_flags_what_is_not_a_number() -> None:
    raws = [msgspec.Raw(b""), msgspec.Raw(b'"12"'), msgspec.Raw(b"[1, 2]"), msgspec.Raw(b"1e3"),
            msgspec.Raw(b"99999999999999999999"), msgspec.Raw(b"7")]
    ns, ok = us_text_to_ns(raws)
    assert ok.tolist() == [False, True, False, True, False, True]
    assert ns[3] == 1_000_000 and ns[5] == 7000 and ns[1] == 12_000


@settings(max_examples=40, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(["name", "a", "b"]),
                                st.one_of(st.text(alphabet='ab{}[]"\\, ', max_size=8),
                                          st.lists(st.integers(), max_size=3)), max_size=3),
                min_size=1, max_size=6), st.integers(0, 400))
def test_scan_values_finds_exactly_the_complete_objects(objs: list[dict], cut: int) -> None:
    text = (", ".join(json.dumps(o) for o in objs) + "], \"k\": 1}").encode()
    body = text[: min(cut, len(text))]
    spans, array_end, _ = scan_values(body)
    ends = []
    pos = 0
    for o in objs:
        s = json.dumps(o).encode()
        pos = text.index(s, pos) + len(s)
        ends.append(pos)
    assert [e for _, e in spans] == [e for e in ends if e <= len(body)]
    assert (array_end is not None) == (len(body) > ends[-1] and b"]" in body[ends[-1]:])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(["name", "a"]),
                                st.one_of(st.text(alphabet='ab{}[]"\\, ', max_size=8),
                                          st.lists(st.integers(), max_size=3)), max_size=3),
                min_size=1, max_size=6),
       st.lists(st.integers(1, 40), min_size=1, max_size=30), st.integers(0, 400))
def test_array_scanner_fed_in_any_blocks_agrees_with_scan_values(objs: list[dict], sizes: list[int],
                                                                 cut: int) -> None:
    """The exact scan's incremental form: the same object ends and array end, block splits anywhere
    (inside strings, between a backslash and what it escapes)."""
    text = (", ".join(json.dumps(o) for o in objs) + "], \"k\": 1}").encode()
    body = text[: min(cut, len(text))]
    spans, array_end, _ = scan_values(body)
    scanner = ArrayScanner()
    pos, last, end_at = 0, None, None
    i = 0
    while pos < len(body) and end_at is None:
        block = body[pos: pos + sizes[i % len(sizes)]]
        end, arr = scanner.feed(block)
        if end is not None:
            last = pos + end
        if arr is not None:
            end_at = pos + arr
        pos += len(block)
        i += 1
    assert last == (spans[-1][1] if spans else None)
    assert end_at == array_end
    assert scanner.scanned == pos  # each byte once


def test_repairs_make_the_event_decodable() -> None:
    raw = b'{"name": "a\nb\tC:\\Users\\x", "args": {"memory bandwidth (GB/s)": N/A}}'
    fixed, fixes = repair_event(raw)
    assert set(fixes) == {"raw control characters", "bare N/A", "stray backslashes"}
    obj = json.loads(fixed)
    assert obj["name"] == "a\nb\tC:\\Users\\x" and obj["args"]["memory bandwidth (GB/s)"] == "N/A"
