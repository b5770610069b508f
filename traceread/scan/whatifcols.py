"""What each fix would save, for the scan: the index rows' ``whatif`` object and the tables' columns.

The per-trace figure comes from the analysis' replay (:meth:`traceread.whatif.WhatIf.per_fix`, the
same predictions as the report's "What each fix would buy"). *GPU time recoverable* puts it on the
index's own footing (``lost_ns``: GPU ns summed over the trace's GPUs over the analysed window): a
steady-state fix recovers its predicted saving share of that GPU time (none when it is predicted to
slow the step), a one-time fix the capture time it saves once on each GPU. A job's figure is the sum
of its traces' (each trace's ranks replayed on their own, as the report does for one input). In
``traces.parquet`` each (rank, device) row holds its share: the saving share times that unit's step
time, so a sum over a trace's rows is the trace's figure.
"""

from __future__ import annotations

from typing import Any

from traceread.whatif import ALL_FIXED, FIX_CAUSES

FIXES: tuple[str, ...] = FIX_CAUSES + (ALL_FIXED,)


def column(fix: str) -> str:
    """``traces.parquet`` column of a fix's recoverable GPU ns (``data-starved`` -> ``recoverable_data_starved_ns``)."""
    return "recoverable_" + fix.replace("-", "_") + "_ns"


# Under half a GPU-millisecond the index's GPU-seconds (3 decimals) read 0.000: no fix is "best" then.
MIN_BEST_NS = 500_000


def _best(recoverable: dict[str, int]) -> tuple[str | None, int]:
    """The single fix that recovers most (``all`` is not one fix); none when the most is below what
    the index shows (``recoverable_ns`` keeps every fix's exact figure)."""
    single = [(ns, fix) for fix, ns in recoverable.items() if fix != ALL_FIXED and ns >= MIN_BEST_NS]
    if not single:
        return None, 0
    ns, fix = min(single, key=lambda x: (-x[0], x[1]))
    return fix, ns


def trace_whatif(w: Any, gpu_ns: int, devices: int) -> dict[str, Any] | None:
    """The index row's ``whatif`` object for an analysis' :class:`~traceread.whatif.WhatIf` (None: no replay)."""
    if w is None:
        return None
    table = w.per_fix()
    saving: dict[str, int | None] = {}
    share: dict[str, float | None] = {}
    recoverable: dict[str, int] = {}
    for r in table.to_dict("records"):
        fix = str(r["fix"])
        if r["step_ns"] is None or r["step_ns"] != r["step_ns"]:  # one-time work: saved once per GPU
            saving[fix], share[fix] = None, None
            recoverable[fix] = int(r["once_ns"]) * devices
            continue
        saving[fix] = int(r["saving_ns"])
        share[fix] = float(r["saving_share"]) if r["saving_share"] is not None else None
        recoverable[fix] = max(0, round((share[fix] or 0.0) * gpu_ns))
    best, best_ns = _best(recoverable)
    return {"measured_step_ns": int(w.measured_step_ns), "steady_steps": int(w.steady_steps),
            "replay_error": float(w.replay_error),
            "dependency_error": float(w.dependency_error) if w.dependency_error is not None else None,
            "saving_ns": saving, "saving_share": share, "recoverable_ns": recoverable,
            "best_fix": best, "best_recoverable_ns": best_ns}


def job_whatif(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """A job's ``whatif``: its traces' recoverable GPU ns summed per fix (None when none replayed)."""
    objs = [r["whatif"] for r in rows if r.get("whatif")]
    if not objs:
        return None
    recoverable = {f: sum(int(o["recoverable_ns"].get(f, 0)) for o in objs)
                   for f in dict.fromkeys(f for o in objs for f in o["recoverable_ns"])}
    best, best_ns = _best(recoverable)
    return {"traces": len(objs), "recoverable_ns": recoverable, "best_fix": best, "best_recoverable_ns": best_ns}


def unit_columns(row: dict[str, Any], units: list[dict[str, Any]]) -> dict[str, list]:
    """``traces.parquet``'s what-if columns for the trace's (rank, device) rows (module doc)."""
    w = row.get("whatif")
    out: dict[str, list] = {"dependency_error": [w.get("dependency_error") if w else None] * len(units)}
    for fix in FIXES:
        if not w or fix not in w["recoverable_ns"]:
            out[column(fix)] = [None] * len(units)
        elif w["saving_share"].get(fix) is None:  # one-time: what each GPU saves once
            out[column(fix)] = [w["recoverable_ns"][fix] // max(len(units), 1)] * len(units)
        else:
            s = max(0.0, w["saving_share"][fix])
            out[column(fix)] = [round(s * int(u.get("step_ns") or 0)) for u in units]
    return out


def best_text(row: dict[str, Any]) -> str:
    """``data-starved 1.234`` (GPU-s) for the index tables; ``none`` when no fix recovers a shown
    amount; empty without a prediction."""
    w = row.get("whatif")
    if not w:
        return ""
    if not w.get("best_fix") or int(w.get("best_recoverable_ns") or 0) < MIN_BEST_NS:
        return "none"
    return f"{w['best_fix']} {w['best_recoverable_ns'] / 1e9:,.3f}"
