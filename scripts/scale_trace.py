"""Make a big, valid Kineto trace from a small real one: its events repeated with shifted timestamps.

Each copy keeps the original event text (so the file has the real layout and density) with ``ts``
moved past the previous copy and fresh ids (flow ``id``, ``External id``, ``correlation``,
``Ev Idx``), so CPU->GPU links stay unique. Metadata rows are written once. Integer and decimal
microseconds (PyTorch 2.4+ writes ``<us>.<3 digits>`` relative to ``baseTimeNanoseconds``) are
both shifted exactly, keeping their digits; the last copy stops at ``--size-mb``.

    python scripts/scale_trace.py ../shared/traces/kineto/param_linear_rtx2080ti.json.gz \
        /tmp/traceread-bench/param_linear_1gb.json --size-mb 1024
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import sys
from decimal import Decimal

from traceread.loaders.kineto.text import TRACE_EVENTS_KEY, scan_values

_NUMBER_FIELDS = re.compile(rb'"(ts|id|External id|correlation|Ev Idx|Record function id)": (-?\d+(?:\.\d+)?)')
_TS = re.compile(rb'"ts": (-?\d+(?:\.\d+)?)')
_DUR = re.compile(rb'"dur": (-?\d+(?:\.\d+)?)')


def _read(path: str) -> bytes:
    data = open(path, "rb").read()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def scale(src: str, dst: str, size_mb: int) -> int:
    """Write ``dst`` of about ``size_mb`` MB; returns the number of copies of the event array."""
    text = _read(src)
    m = TRACE_EVENTS_KEY.search(text)
    if m is None:
        raise SystemExit(f"{src}: no traceEvents array")
    spans, array_end, _ = scan_values(memoryview(text)[m.end():])
    if array_end is None:
        raise SystemExit(f"{src}: truncated")
    events = [text[m.end() + a: m.end() + b] for a, b in spans]
    meta = [e for e in events if b'"ph": "M"' in e]
    body = [e for e in events if b'"ph": "M"' not in e]
    ts = [float(x.group(1)) for e in body if (x := _TS.search(e))]
    ends = [float(t.group(1)) + float(d.group(1)) for e in body if (t := _TS.search(e)) and (d := _DUR.search(e))]
    shift = int(max(ends + ts) - min(ts)) + 1000  # whole microseconds: copies follow with a 1 ms pause
    ids = [int(x.group(2)) for e in body for x in _NUMBER_FIELDS.finditer(e)
           if x.group(1) != b"ts" and b"." not in x.group(2)]
    stride = max(ids, default=0) + 1
    body_bytes = sum(len(e) + 4 for e in body)
    target = size_mb * 1_000_000
    copies = max(1, -(-target // body_bytes))
    head = text[: m.end()]
    tail = text[m.end() + array_end:]
    os.makedirs(os.path.dirname(os.path.abspath(dst)) or ".", exist_ok=True)
    tmp = dst + ".part"
    with open(tmp, "wb", buffering=8 << 20) as out:
        out.write(head + b"\n  ")
        out.write(b",\n  ".join(meta))
        written = 0
        for k in range(copies):
            def bump(x: re.Match, k: int = k) -> bytes:
                value = x.group(2)
                if x.group(1) != b"ts":
                    if b"." in value:  # not an id: left as written
                        return x.group(0)
                    return b'"' + x.group(1) + b'": ' + str(int(value) + k * stride).encode()
                if b"." in value:  # exact, keeping the written decimals
                    return b'"ts": ' + str(Decimal(value.decode()) + k * shift).encode()
                return b'"ts": ' + str(int(value) + k * shift).encode()

            part = body if k < copies - 1 else _prefix(body, target - written)
            text_k = b",\n  ".join(_NUMBER_FIELDS.sub(bump, e) for e in part)
            out.write(b",\n  " + text_k)
            written += len(text_k) + 4
            print(f"\rcopy {k + 1}/{copies}", end="", file=sys.stderr)
        out.write(b"\n  " + tail)
    os.replace(tmp, dst)
    print(file=sys.stderr)
    return copies


def _prefix(events: list[bytes], size: int) -> list[bytes]:
    """The first events whose text adds up to about ``size`` bytes (at least one)."""
    total = 0
    for i, e in enumerate(events):
        total += len(e) + 4
        if total >= size:
            return events[: i + 1]
    return events


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--size-mb", type=int, default=1024)
    args = ap.parse_args()
    copies = scale(args.src, args.dst, args.size_mb)
    print(f"{args.dst}: {os.path.getsize(args.dst) / 1e6:.0f} MB ({copies} copies)")


if __name__ == "__main__":
    main()
