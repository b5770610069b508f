"""What each fix would buy: the report's section and JSON object for a :class:`traceread.whatif.WhatIf`.

The section lists the fixes ordered by predicted saving, with the replay's own error above the table
and the naive subtraction (the step minus the cause's idle time) beside each prediction. One-time
work gets no speed-up figure (it is not steady state): what it saves once over the capture instead.
"""

from __future__ import annotations

from typing import Any

from traceread.analysis import Analysis
from traceread.render import notes as note_words
from traceread.render.fmt import ms, plural, saving, signed_pct, table
from traceread.render.names import md_text
from traceread.vocabulary import GAP_CLASSES
from traceread.whatif import LISTED_MIN_SHARE

# A dependencies-alone error past 3% names the external waits it leaves out (the replay's acceptance bound)
EXTERNAL_NAMED_ERROR = 0.03
MIN_SHOWN_SHARE = LISTED_MIN_SHARE  # a fix predicted to move the step by less than 0.1% is not listed


def _shown(w: Any) -> list[Any]:
    out = []
    for p in w.fixes:
        moves = p.saving_share is not None and abs(p.saving_share) >= MIN_SHOWN_SHARE
        idle = p.naive_step_ns is not None and p.naive_step_ns < w.measured_step_ns * (1 - MIN_SHOWN_SHARE)
        if moves or idle or p.once_ns > 0 and p.step_ns is None:
            out.append(p)
    return out


def _order_sentence(a: Analysis, shown: list[Any]) -> str:
    """One sentence where the order by predicted saving differs from the order by idle share."""
    shares = a.shares()
    steady = [p for p in shown if p.step_ns is not None and p.cause in GAP_CLASSES]
    by_saving = [p.cause for p in steady]
    by_share = sorted(by_saving, key=lambda c: -shares.get(c, 0.0))
    if len(by_saving) < 2 or by_saving[0] == by_share[0]:
        return ""
    return (f"\n\n{by_saving[0]} is predicted to buy more than {by_share[0]}, which holds the larger idle share: "
            f"a fix also moves the work its idle time was hiding or exposing, which idle shares cannot count.")


def predicted(p: Any) -> str:
    """The predicted step, and the far end of its interval where the fix moves host work elsewhere."""
    high = getattr(p, "step_high_ns", None)
    if high is None or high <= p.step_ns:
        return ms(p.step_ns)
    return f"{ms(p.step_ns)} to {ms(high)}"


def assumes(p: Any) -> str:
    """The prediction's assumption, and what its interval's far end assumes."""
    high = getattr(p, "step_high_ns", None)
    if high is None or p.step_ns is None or high <= p.step_ns:
        return str(p.assumption)
    return (f"{p.assumption}; the far end: loader workers slow the training thread's host time by "
            "whatif_worker_host_slowdown")


def replay_error_text(w: Any) -> str:
    """"calibrated +0.0%, dependencies alone -0.1%": the calibrated replay's error (zero by construction)
    and the replay's with nominal delays only (what the dependencies alone explain)."""
    if w.dependency_error is None:
        return signed_pct(w.replay_error)
    text = f"calibrated {signed_pct(w.replay_error)}, dependencies alone {signed_pct(w.dependency_error)}"
    external = int(getattr(w, "external_wait_ns", 0) or 0)
    if abs(w.dependency_error) > EXTERNAL_NAMED_ERROR and external > 0:
        text += (f", which leaves out {ms(external)} of external waits (GPU ops waiting for work the trace does not "
                 "show: another process, work issued before the capture)")
    return text


def section(a: Analysis) -> str:
    """The Markdown section (empty when the replay could not run)."""
    w = a.whatif
    if w is None:
        return ""
    head = "## What each fix would buy\n\n"
    intro = (f"Predicted by replaying the trace's dependencies (launches, streams, syncs; docs/whatif.md) with each "
             f"fix applied. Replay error: {replay_error_text(w)} (replayed {ms(w.replayed_step_ns)} against the "
             f"measured median step {ms(w.measured_step_ns)}, {plural(w.steady_steps, 'steady step')}). The naive figure "
             f"is the step minus the cause's idle time.")
    shown = _shown(w)
    if not shown:
        return head + md_text(intro) + "\n\nNo fix is predicted to move the median step."
    rows = []
    for p in shown:
        if p.step_ns is None:
            pred, saved = "one-time: no steady-state figure", f"{ms(p.once_ns)} once"
        else:
            pred, saved = predicted(p), saving(p.saving_ns, p.saving_share)
        naive = ms(p.naive_step_ns) if p.naive_step_ns is not None else "-"
        rows.append([md_text(p.fix), pred, saved, naive, md_text(assumes(p))])
    every = w.all_fixed
    if every is not None and every.step_ns is not None:
        rows.append(["all of them", predicted(every), saving(every.saving_ns or 0, every.saving_share), "-",
                     md_text(assumes(every))])
    body = table(["fix", "predicted median step", "saving", "naive", "assumes"], rows, "lrrrl")
    notes = "".join(f"\n\n{md_text(note_words.text(n))}." for n in w.notes)
    check = consistency_text(consistency_of(a))
    return head + md_text(intro) + "\n\n" + body + _order_sentence(a, shown) + notes + \
        (f"\n\n{md_text(check)}" if check else "")


def consistency_of(a: Analysis) -> tuple[Any, ...]:
    """The consistency checks of ``a``'s prediction (:mod:`traceread.whatif.consistency`)."""
    from traceread.whatif.consistency import checks

    if a.whatif is None:
        return ()
    return checks(a.whatif, a.shares(), a.steps, a.gaps, a.cfg.data_loader_cover)


_REASONS = {
    "bus": "the bus is the bound: batch copies ({fig} in all) hold the GPU, and prefetched they still run one after "
           "another; fewer or smaller copies would shorten the step",
    "external": "the wait is external: GPU ops waited {fig} in all for work the trace does not show (another "
                "process, work issued before the capture), which no fix of this trace removes",
    "host-work": "the idle is the host's own work on the launching thread ({fig} of its gaps over the capture), "
                 "not kernel dispatch: CUDA graphs do not remove it, and only moving that work off the training step "
                 "buys this time back",
    "gpu": "the GPU becomes the bound: the predicted step is its own busy time ({fig} a step)",
    "exposed": "the fix removes only what the rule attributed, and other work the idle was hiding stays on the "
               "critical path (predicted step {fig})",
}


def consistency_text(checks: tuple[Any, ...]) -> str:
    """One sentence per cause of at least 5% of step time whose fix buys under half its idle (why), or one that
    says every checked fix does; empty when no cause was checked."""
    if not checks:
        return ""
    failing = [c for c in checks if not c.holds]
    if not failing:
        return ("Consistency with the diagnosis: each cause of at least 5% of step time is predicted to buy at least "
                "half its idle time.")
    lines = []
    for c in failing:
        what = f"{ms(c.saving_ns)} once of {ms(c.idle_ns)} idle over the capture" if c.once else \
            f"{ms(c.saving_ns)} a step of its {ms(c.idle_ns)} idle a steady step"
        why = _REASONS.get(c.reason, "{fig}").format(fig=ms(c.figure_ns))
        lines.append(f"Consistency with the diagnosis: {c.cause} holds {c.share:.0%} of step time but its fix is "
                     f"predicted to buy {what}, under half: {why}.")
    return "\n\n".join(lines)


def _check_record(c: Any) -> dict[str, Any]:
    return {"cause": c.cause, "share": c.share, "idle_ns": c.idle_ns, "saving_ns": c.saving_ns, "once": c.once,
            "holds": c.holds, "reason": c.reason or None, "figure_ns": c.figure_ns}


def record(w: Any, checks: tuple[Any, ...] = ()) -> dict[str, Any]:
    """The report's ``whatif`` object (schema: ``$defs/whatif``); ``checks``: :func:`consistency_of`."""
    def pred(p: Any) -> dict[str, Any]:
        return {"fix": p.fix, "cause": p.cause, "step_ns": p.step_ns, "saving_ns": p.saving_ns,
                "saving_share": p.saving_share, "naive_step_ns": p.naive_step_ns, "once_ns": p.once_ns,
                "assumption": p.assumption, "step_high_ns": getattr(p, "step_high_ns", None)}

    return {"version": w.version, "measured_step_ns": w.measured_step_ns, "replayed_step_ns": w.replayed_step_ns,
            "replay_error": w.replay_error, "steady_steps": w.steady_steps,
            "dependency_step_ns": w.dependency_step_ns, "dependency_error": w.dependency_error,
            "fixes": [pred(p) for p in w.fixes],
            "all_fixed": pred(w.all_fixed) if w.all_fixed is not None else None,
            "assumptions": list(w.assumptions), "notes": [note_words.text(n) for n in w.notes],
            "nominal_delays_ns": {k: int(v) for k, v in w.nominal.items()},
            "consistency": [_check_record(c) for c in checks]}


def text_report(w: Any, paths: list[str], checks: tuple[Any, ...] = ()) -> str:
    """``traceread whatif``'s table: each requested fix, its predicted step and saving, the naive figure, and the
    consistency checks (``checks``: :func:`consistency_of`)."""
    lines = [f"What each fix would buy ({', '.join(md_text(p) for p in paths)})", "",
             f"measured median step {ms(w.measured_step_ns)} over {plural(w.steady_steps, 'steady step')}; replay "
             f"{ms(w.replayed_step_ns)} (error {replay_error_text(w)})", ""]
    rows = []
    for p in list(w.fixes) + ([w.all_fixed] if w.all_fixed is not None else []):
        if p.step_ns is None:
            rows.append([md_text(p.fix), "one-time", f"{ms(p.once_ns)} once", "-", md_text(p.assumption)])
            continue
        naive = ms(p.naive_step_ns) if p.naive_step_ns is not None else "-"
        rows.append([md_text(p.fix), predicted(p), saving(p.saving_ns, p.saving_share), naive,
                     md_text(assumes(p))])
    lines.append(table(["fix", "predicted median step", "saving", "naive", "assumes"], rows, "lrrrl"))
    check = consistency_text(checks)
    if check:
        lines += ["", md_text(check)]
    lines += ["", "Assumed dependencies:"] + [f"- {a}" for a in w.assumptions] + [f"- {note_words.text(n)}" for n in w.notes]
    return "\n".join(lines) + "\n"
