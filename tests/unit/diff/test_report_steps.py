"""diff reads the steps of scan's per-trace reports in either shape: the table of columns of report schema
2.0, or the list of one object per step (with ``idle_by_class``) that a 1.x scan directory holds."""

from __future__ import annotations

from traceread.diff.side import _step_rows
from traceread.vocabulary import GAP_CLASSES, part_col


def test_columns_and_records_give_the_same_rows() -> None:
    records = [{"rank": 0, "device": 0, "step": s, "start_ns": 100 * s, "end_ns": 100 * s + 90, "busy_ns": 60,
                "idle_ns": 30, "warmup": s == 0, "outlier": False,
                "idle_by_class": {c: (10 if c in ("launch-bound", "sync-stall") else 0) for c in GAP_CLASSES}
                | {"unattributed": 10}} for s in range(3)]
    columns = {k: [r[k] for r in records] for k in records[0] if k != "idle_by_class"}
    columns.update({part_col(c): [r["idle_by_class"][c] for r in records] for c in GAP_CLASSES})
    rows = _step_rows(columns)
    assert rows == _step_rows(records)
    assert [r["step"] for r in rows] == [0, 1, 2] and rows[0]["warmup"] and not rows[1]["warmup"]
    assert all(sum(r[part_col(c)] for c in GAP_CLASSES) == r["idle_ns"] for r in rows)
    assert _step_rows({}) == _step_rows([]) == _step_rows(None) == []
