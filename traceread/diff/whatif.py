"""Each fix's prediction from the before side beside the measured after side, and whether the fix made delivered.

The before side's replay (the report's ``whatif`` object, :mod:`traceread.whatif`) predicts the
median steady step with each fix; the after side's median steady step is what was measured. With
``--fix CAUSE`` (the fix that was made) the diff says whether the after run is within
``diff_fix_tolerance`` of that prediction, or inside its stated interval (delivered), slower (fell short: the share of the
predicted saving it delivered) or faster (beat the prediction: something else changed too, or the
fix removed more than its lever).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from traceread.render.fmt import saving, signed_pct
from traceread.whatif import ALL_FIXED

DELIVERED, FELL_SHORT, BEAT = "delivered", "fell short", "beat the prediction"


@dataclass(frozen=True)
class FixRow:
    fix: str
    cause: str
    predicted_step_ns: int | None  # None: one-time work (no steady-state figure)
    predicted_saving_ns: int | None
    naive_step_ns: int | None
    error: float | None  # measured after / predicted - 1
    predicted_high_ns: int | None = None  # the far end of the predicted step's interval (whatif step_high_ns)


@dataclass(frozen=True)
class FixCheck:
    """The predictions of the before side against the after side (module doc)."""

    before_step_ns: int  # the before side's measured median step (the replay's own figure)
    after_step_ns: int | None  # the after side's median steady step
    replay_error: float
    dependency_error: float | None
    rows: tuple[FixRow, ...]
    fix: str | None = None  # the fix that was made (--fix)
    outcome: str = ""  # delivered, fell short, beat the prediction; "" without --fix or a prediction
    delivered_share: float | None = None  # measured saving / predicted saving
    sentence: str = ""


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.2f} ms"


def check(whatif: dict[str, Any] | None, after_step_ns: float | None, fix: str | None,
          tolerance: float) -> FixCheck | None:
    """``whatif``: the before side's report ``whatif`` object (None: no replay, no check)."""
    if not whatif:
        return None
    after = int(after_step_ns) if after_step_ns is not None else None
    preds = list(whatif.get("fixes") or []) + ([whatif["all_fixed"]] if whatif.get("all_fixed") else [])
    rows = tuple(FixRow(p["fix"], p["cause"], p["step_ns"], p["saving_ns"], p.get("naive_step_ns"),
                        (after / p["step_ns"] - 1.0) if after is not None and p["step_ns"] else None,
                        p.get("step_high_ns"))
                 for p in preds)
    before = int(whatif["measured_step_ns"])
    out = FixCheck(before, after, float(whatif["replay_error"]), whatif.get("dependency_error"), rows, fix)
    if fix is None:
        return out
    row = next((r for r in rows if r.fix == fix or r.cause == fix), None)
    if row is None or row.predicted_step_ns is None or after is None:
        why = "the after side has no steady steps" if after is None else \
            "the replay gives no steady-state prediction for it"
        return FixCheck(**{**out.__dict__, "sentence": f"The {fix} fix cannot be checked: {why}."})
    predicted, saving = row.predicted_step_ns, before - after
    share = saving / row.predicted_saving_ns if row.predicted_saving_ns else None
    err = after / predicted - 1.0
    high = row.predicted_high_ns if row.predicted_high_ns is not None and row.predicted_high_ns > predicted else None
    inside = high is not None and predicted <= after <= high
    # Inside the stated interval is what was predicted, whatever the tolerance about its near end
    outcome = DELIVERED if inside or abs(err) <= tolerance else (FELL_SHORT if err > 0 else BEAT)
    tail = {DELIVERED: f"it delivered what was predicted (within {tolerance:.0%})",
            FELL_SHORT: "it fell short of the prediction" + (f": {share:.0%} of the predicted saving" if share is not None
                                                             else ""),
            BEAT: "it beat the prediction: something besides this fix moved too, or the fix removed more than "
                  "its lever"}[outcome]
    span = f"{_ms(predicted)}" if high is None else f"{predicted / 1e6:,.2f}-{_ms(high)}"
    where = "" if high is None else (", inside the predicted interval" if inside else ", outside the predicted interval")
    sentence = (f"The {fix} fix was predicted to take the median step from {_ms(before)} to {span} "
                f"({signed_pct(predicted / before - 1)}); the after run measures {_ms(after)} ({signed_pct(after / before - 1)}, "
                f"{signed_pct(err)} against the prediction{where}): {tail}.")
    return FixCheck(**{**out.__dict__, "outcome": outcome, "delivered_share": share, "sentence": sentence})


def attach(d: Any, before: list[Any], fix: str | None, tolerance: float) -> Any:
    """``d`` (a :class:`~traceread.diff.compare.Diff`) with its ``whatif``: the predictions of the
    before side's first capture (``before``: its captures) against the after side's median step."""
    import dataclasses

    predicted = before[0].whatif if before else None
    c = check(predicted, d.after.median_step_ns, fix, tolerance)
    units = (d.comparability or {}).get("step_units", "same")
    if c is not None and fix is not None and units != "same":  # a "fell short" on steps of other units misleads
        c = dataclasses.replace(c, outcome="", delivered_share=None,
                                sentence=f"The {fix} fix cannot be checked: the two sides' steps may be of different "
                                         "units (see the warnings).")
    return dataclasses.replace(d, whatif=c)


def record(c: FixCheck | None) -> dict[str, Any] | None:
    """The diff JSON's ``whatif`` object (``diff.schema.json``)."""
    if c is None:
        return None
    return {"before_step_ns": c.before_step_ns, "after_step_ns": c.after_step_ns, "replay_error": c.replay_error,
            "dependency_error": c.dependency_error, "fix": c.fix, "outcome": c.outcome or None,
            "delivered_share": c.delivered_share, "sentence": c.sentence,
            "predictions": [{"fix": r.fix, "cause": r.cause, "predicted_step_ns": r.predicted_step_ns,
                             "predicted_saving_ns": r.predicted_saving_ns, "naive_step_ns": r.naive_step_ns,
                             "error": r.error, "predicted_high_ns": r.predicted_high_ns} for r in c.rows]}


def markdown(c: FixCheck | None) -> list[str]:
    """The diff's section: each fix's prediction beside the measured after side."""
    from traceread.render.fmt import table
    from traceread.render.names import md_text
    from traceread.render.whatif import MIN_SHOWN_SHARE

    if c is None:
        return []
    rows = []
    for r in c.rows:
        made = " (made)" if c.fix is not None and (r.fix == c.fix or r.cause == c.fix) else ""
        moves = r.predicted_saving_ns is not None and abs(r.predicted_saving_ns) >= MIN_SHOWN_SHARE * c.before_step_ns
        if r.predicted_step_ns is None or not (moves or made):  # as the report: fixes that move the step
            continue
        high = r.predicted_high_ns if r.predicted_high_ns and r.predicted_high_ns > r.predicted_step_ns else None
        rows.append([md_text(r.fix) + made, _ms(r.predicted_step_ns) if high is None else
                     f"{r.predicted_step_ns / 1e6:,.2f}-{_ms(high)}",
                     saving(r.predicted_saving_ns, decimals=2),
                     _ms(r.naive_step_ns) if r.naive_step_ns is not None else "-",
                     f"{signed_pct(r.error)}" if r.error is not None else "-"])
    dep = f", dependencies alone {signed_pct(c.dependency_error)}" if c.dependency_error is not None else ""
    after = _ms(c.after_step_ns) if c.after_step_ns is not None else "no steady steps"
    if len(rows) == 1 and rows[0][0] == ALL_FIXED:
        rows = []
    body = table(["fix", "predicted step", "predicted saving", "naive", "after vs predicted"], rows, "lrrrr") \
        if rows else "No fix is predicted to move the median step."
    return ["## What each fix was predicted to buy (before side) against the after side", "",
            f"The before side's replay (docs/whatif.md; replay error calibrated {signed_pct(c.replay_error)}{dep}) from its "
            f"measured median step {_ms(c.before_step_ns)}; the after side measures {after}.", "",
            body, ""] + ([md_text(c.sentence), ""] if c.sentence else [])
