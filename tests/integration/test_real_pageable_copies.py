"""Pageable host-to-device batch copies on real traces: their own evidence and fix (pin the batch,
copy non_blocking), and pinned copies never told to pin. Each reason is re-measured from the raw file
(json/gzip for Kineto, sqlite3 for nsys), independently of traceread."""

from __future__ import annotations

import gzip
import json

from conftest import SHARED_TRACES, needs_shared

from traceread import load
from traceread.causes import first_response
from traceread.config import Thresholds
from traceread.rules.evidence import with_evidence
from traceread.runner import analyze

pytestmark = needs_shared


def _overlap(a: tuple[int, int], iv: list[tuple[int, int]]) -> int:
    return sum(max(0, min(a[1], e) - max(a[0], s)) for s, e in iv)


def test_pinned_batch_copies_are_not_told_to_pin():
    """nsysai_h100_2gpu_window: the copies holding the idle are host-to-device from pinned memory by the
    export's own enum tables, at the link's rate: the data-starved evidence is bus-bound (issue 42), and the
    fix is neither pinning nor more loader workers."""
    import sqlite3

    path = SHARED_TRACES / "nsys/nsysai_h100_2gpu_window_2026.sqlite"
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    kinds = dict(db.execute("SELECT id, label FROM ENUM_CUDA_MEM_KIND").fetchall())
    by_src = {kinds[k]: ns for k, ns in db.execute(
        "SELECT srcKind, SUM(end - start) FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind = 1 GROUP BY srcKind")}
    assert by_src["Pinned"] > 1000 * by_src.get("Pageable", 0)
    a = analyze([load(path)], cfg=Thresholds())
    assert a.dominant_cause == "data-starved" and a.dominant_evidence == "bus-bound"
    assert not (a.gaps["evidence_kind"].astype(str) == "pageable-copy").any()
    fix = first_response(a.dominant_cause, a.dominant_evidence)
    assert "pin_memory" not in fix and "num_workers" not in fix


def test_a_gap_held_by_a_pageable_batch_copy_names_pinning():
    """hta_alexnet_a100 (Kineto): the batch is copied with ``Memcpy HtoD (Pageable -> Device)``; the gap
    it holds most of gets the pageable-copy evidence, whose first fix is pin_memory and non_blocking."""
    path = SHARED_TRACES / "kineto/hta_alexnet_a100.json.gz"
    with gzip.open(path, "rt") as fh:
        events = json.load(fh)["traceEvents"]
    pageable = [(int(e["ts"] * 1000), int((e["ts"] + e["dur"]) * 1000)) for e in events
                if e.get("ph") == "X" and e.get("name") == "Memcpy HtoD (Pageable -> Device)"]
    assert pageable
    a = analyze([load(path)], cfg=Thresholds())
    g = with_evidence(a.gaps, a.cfg)
    held = g[g["evidence_kind"].astype(str) == "pageable-copy"]
    assert len(held) and (held["class"].astype(str) == "data-starved").all()
    for s, e in zip(held["start_ns"], held["end_ns"], strict=True):
        assert _overlap((int(s), int(e)), pageable) >= 0.5 * (e - s)  # the raw copies cover it
    assert "pageable host-to-device copy" in held["evidence"].iloc[0]
    fix = first_response("data-starved", "pageable-copy")
    assert "pin_memory=True" in fix and "non_blocking=True" in fix
