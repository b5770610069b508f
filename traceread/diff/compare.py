"""The verdict of a diff: comparability, the significance test, throughput, and where the time went.

``compare(before, after, cfg) -> Diff`` reads two :class:`SideFacts` and returns plain data.

Order of judgement (first that applies decides the verdict):

1. ``not comparable``: a side has no steps; the GPU models differ; the world sizes differ; or the
   work per step differs (the recorded input shapes of the heaviest matmul/attention ops differ) and
   the job inputs do not give tokens per step on both sides.
2. ``inconclusive``: fewer than ``diff_min_steps`` steady steps on either side.
3. ``improved`` / ``regressed``: the Mann-Whitney U test on the per-step values (step times, or
   tokens/s when both sides give tokens per step) has p < ``diff_alpha``, the block-bootstrap
   interval of the ratio of medians excludes 1, and the medians moved by at least
   ``diff_min_change``. Otherwise ``no significant change`` (and, when parts of the step moved by
   ``diff_offset_min_shift`` in opposite directions, the reason says the changes offset).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from traceread import causes
from traceread.causes.builtin import HEALTHY
from traceread.config import Thresholds
from traceread.diff import stats, tables
from traceread.diff.side import SideFacts
from traceread.vocabulary import GAP_CLASSES, PARTS

DIFF_SCHEMA_VERSION = "1.3"
VERDICTS = ("improved", "regressed", "no significant change", "inconclusive", "not comparable")


@dataclass(frozen=True, eq=False)
class Diff:
    """A diff as plain data (rendered by :mod:`traceread.diff.render`, JSON by :func:`traceread.diff.render.to_json`)."""

    before: SideFacts
    after: SideFacts
    verdict: str
    reason: str
    warnings: tuple[str, ...]
    metric: str  # "step time" or "tokens/s"
    step_time_ratio: float | None  # median after / median before
    throughput_ratio: float | None  # tokens/s after / before (when both sides give tokens)
    test: dict[str, Any] | None  # name, statistic, z, p_value, interval, confidence, block_length, seed
    change_pct: float | None  # worse-is-positive percent change of the compared metric
    shift: str  # the one sentence about the dominant cause
    first_fix: str
    offsetting: str  # "" or the sentence about offsetting changes
    comparability: dict[str, Any]
    attribution: pd.DataFrame
    kernels: pd.DataFrame
    host_ops: pd.DataFrame
    collectives: pd.DataFrame
    ranks: pd.DataFrame
    cfg: Thresholds
    notes: tuple[str, ...] = field(default=())
    whatif: Any = None  # traceread.diff.whatif.FixCheck: the before side's predictions against the after side


def _share_text(cause: str, share: float) -> str:
    if cause == "healthy":
        return f"healthy ({share:.0%} of step time idle)"
    return f"{cause} ({share:.0%} of step time)"


def shift_sentence(b: SideFacts, a: SideFacts) -> str:
    """The dominant cause before and after, in one sentence."""
    if b.dominant_cause == a.dominant_cause:
        return (f"The dominant cause stays {b.dominant_cause} ({b.dominant_cost_share:.0%} of step time "
                f"before, {a.dominant_cost_share:.0%} after).")
    if a.dominant_cause == "healthy":
        busy = a.shares.get("compute-bound", 0.0)
        return (f"The dominant gap shifted from {_share_text(b.dominant_cause, b.dominant_cost_share)} to "
                f"compute: the run is healthy, compute-bound kernels take {busy:.0%} of step time and "
                f"{a.dominant_cost_share:.0%} is idle.")
    if a.dominant_cause == "memory-bound" and b.dominant_cause in GAP_CLASSES:
        # memory-bound is a busy verdict (little idle, most busy time in memory-bound kernels): the
        # bottleneck moved out of the idle gaps into the kernels themselves.
        return (f"The dominant gap shifted from {_share_text(b.dominant_cause, b.dominant_cost_share)} to "
                f"compute: the GPUs are busy, memory-bound kernels take {a.dominant_cost_share:.0%} of step "
                "time (fusion is the next lever).")
    word = "gap" if b.dominant_cause in GAP_CLASSES else "cause"
    return (f"The dominant {word} shifted from {_share_text(b.dominant_cause, b.dominant_cost_share)} to "
            f"{_share_text(a.dominant_cause, a.dominant_cost_share)}.")


def _work_check(b: SideFacts, a: SideFacts, cfg: Thresholds) -> tuple[str, str]:
    """("same"|"differs"|"unknown", why) from the recorded shapes of the heaviest matmul/attention ops.

    For every op name recorded on both sides, each of the ``diff_shape_top_ops`` heaviest signatures
    (op, input dims) of one side must be recorded on the other side at all: a batch or sequence change
    changes every shape, while noise only reorders the heavy ones.
    """
    if b.shapes.empty or a.shapes.empty:
        missing = " and ".join(s.label for s in (b, a) if s.shapes.empty)
        return "unknown", f"no recorded matmul/attention shapes on the {missing} side (record_shapes=True)"
    common = set(b.shapes["op"]) & set(a.shapes["op"])
    if not common:
        return "unknown", "the recorded matmul/attention ops differ by name, so their shapes cannot be compared"
    sig = {s.label: set(zip(s.shapes["op"], s.shapes["input_dims"], strict=True)) for s in (b, a)}
    for this, other in ((b, a), (a, b)):
        top = this.shapes[this.shapes["op"].isin(common)].head(cfg.diff_shape_top_ops)
        for op, dims in zip(top["op"], top["input_dims"], strict=True):
            if (op, dims) not in sig[other.label]:
                seen = list(dict.fromkeys(other.shapes.loc[other.shapes["op"] == op, "input_dims"]))[:2]
                shapes = {this.label: dims, other.label: ", ".join(seen)}
                return "differs", (f"the recorded input shapes of {op} differ ({shapes['before']} before, "
                                   f"{shapes['after']} after)")
    heavy = ", ".join(sorted(common))
    return "same", f"the heaviest recorded ops ({heavy}) have the same input shapes on both sides"


def comparability(b: SideFacts, a: SideFacts, cfg: Thresholds) -> tuple[dict[str, Any], list[str], str]:
    """The comparability record, the warnings that weaken the diff, and the not-comparable reason ('' if none)."""
    warnings: list[str] = []
    blocking = ""
    rec: dict[str, Any] = {"gpu_models": {"before": list(b.gpu_models), "after": list(a.gpu_models)},
                           "world_size": {"before": b.world_size, "after": a.world_size},
                           "step_source": {"before": list(b.step_sources), "after": list(a.step_sources)},
                           "formats": {"before": list(b.formats), "after": list(a.formats)}}
    if not len(b.step_values) or not len(a.step_values):
        empty = " and ".join(s.label for s in (b, a) if not len(s.step_values))
        blocking = blocking or f"no steps on the {empty} side, so there is no step time to compare"
    if b.gpu_models and a.gpu_models and set(b.gpu_models) != set(a.gpu_models):
        blocking = blocking or (f"different GPU models ({', '.join(b.gpu_models)} before, "
                                f"{', '.join(a.gpu_models)} after)")
    elif not (b.gpu_models and a.gpu_models):
        warnings.append("the GPU model is not recorded on both sides; the same hardware is assumed")
    if b.world_size and a.world_size and b.world_size != a.world_size:
        blocking = blocking or f"different world sizes ({b.world_size} before, {a.world_size} after)"
    elif not (b.world_size and a.world_size):
        warnings.append("the world size is not recorded on both sides; the same job size is assumed")
    for s in (b, a):
        if "gpu-span" in s.step_sources:
            warnings.append(f"no step markers on the {s.label} side: its whole capture counts as one step")
    if set(b.step_sources) != set(a.step_sources):
        warnings.append(f"steps were found differently ({', '.join(b.step_sources)} before, "
                        f"{', '.join(a.step_sources)} after): a step may not mean the same work")
    units = step_units(b, a)
    rec["step_units"] = units
    if units != "same":
        warnings.append(units)
    if set(b.formats) != set(a.formats):
        warnings.append(f"the sides come from different tools ({', '.join(b.formats)} before, "
                        f"{', '.join(a.formats)} after): kernels are matched by name, then by a "
                        "spelling-neutral key")
    tokens = b.tokens_per_step is not None and a.tokens_per_step is not None
    work, why = _work_check(b, a, cfg)
    rec["work_per_step"] = {"shapes": work, "why": why,
                            "tokens_per_step": {"before": b.tokens_per_step, "after": a.tokens_per_step},
                            "recorded_flops_per_step": {"before": b.flops_per_step, "after": a.flops_per_step}}
    if (b.tokens_per_step is None) != (a.tokens_per_step is None):
        warnings.append("job inputs give tokens per step on one side only; step times are compared")
    if tokens and b.tokens_per_step != a.tokens_per_step:
        warnings.append(f"the work per step changed ({b.tokens_per_step:,.0f} -> {a.tokens_per_step:,.0f} "
                        "tokens per step): tokens/s is compared, not step time")
    elif work == "differs" and not tokens:
        blocking = blocking or (f"the work per step differs: {why}; give --job-before/--job-after "
                                "(tokens per step) to compare throughput")
    elif work == "unknown" and not tokens:
        warnings.append(f"work per step not checked: {why}")
    for s in (b, a):
        if s.captures > 1:
            warnings.append(f"{s.label}: {s.captures} captures pooled; blocks of the bootstrap may span two runs")
    rec["comparable"] = not blocking
    return rec, warnings, blocking


# Inferred steps whose medians differ by this factor or more may be of different units (one side's step holding
# several of the other's): a fix is rarely worth 45% of the step and never makes a step longer.
STEP_UNITS_RATIO = 1.8


def step_units(b: SideFacts, a: SideFacts) -> str:
    """"same", or a warning that the two sides' steps may be of different units: one side's steps were inferred
    (no step markers) and the medians differ ``STEP_UNITS_RATIO``-fold or more."""
    inferred = [s.label for s in (b, a) if any(str(x).startswith("inferred") for x in s.step_sources)]
    mb, ma = b.median_step_ns, a.median_step_ns
    if not inferred or not mb or not ma:
        return "same"
    r = max(mb, ma) / min(mb, ma)
    if r < STEP_UNITS_RATIO:
        return "same"
    return (f"the {' and '.join(inferred)} side's steps were inferred (no step markers) and the median steps differ "
            f"x{r:.2f}: the two sides' steps may be of different units (one holding about {round(r)} of the other's); "
            "the step times are compared as they are and no fix is checked against them")


def _offsetting(attr: pd.DataFrame, b: SideFacts, cfg: Thresholds) -> str:
    step = b.step_ns_per_step or 1.0
    rel = attr.set_index("part")["delta_ns_per_step"] / step
    up = rel[rel >= cfg.diff_offset_min_shift].sort_values(ascending=False)
    down = rel[rel <= -cfg.diff_offset_min_shift].sort_values()
    if up.empty or down.empty:
        return ""
    return (f"the total barely moved while large changes offset each other: {up.index[0]} rose by "
            f"{up.iloc[0]:.0%} of step time and {down.index[0]} fell by {-down.iloc[0]:.0%}")


def compare(b: SideFacts, a: SideFacts, cfg: Thresholds) -> Diff:
    """Compare two sides (module doc for the order of judgement)."""
    comp, warnings, blocking = comparability(b, a, cfg)
    if b.throughput_values is not None and a.throughput_values is not None:
        tokens, xb, xa = True, b.throughput_values, a.throughput_values
    else:
        tokens, xb, xa = False, b.step_values, a.step_values
    metric = "tokens/s" if tokens else "step time"
    mb, ma = b.median_step_ns, a.median_step_ns
    ratio = ma / mb if mb and ma is not None else None
    tput_ratio = float(np.median(xa) / np.median(xb)) if tokens and len(xb) and len(xa) else None
    attr = tables.attribution_table(b, a)
    test: dict[str, Any] | None = None
    change = None
    if len(xb) and len(xa):
        u = stats.mann_whitney_u(xb, xa)
        lo, hi = stats.block_bootstrap_ratio(xb, xa, cfg.diff_bootstrap_samples, cfg.diff_confidence)
        test = {"name": stats.TEST_NAME, "values": f"per-step {metric}", "statistic": u.u, "z": u.z,
                "p_value": u.p_value, "interval_name": stats.INTERVAL_NAME, "interval": [lo, hi],
                "confidence": cfg.diff_confidence, "block_length": [stats.block_length(len(xb)),
                                                                    stats.block_length(len(xa))],
                "samples": cfg.diff_bootstrap_samples, "seed": 0, "n_before": int(len(xb)), "n_after": int(len(xa))}
        r = tput_ratio if tokens else ratio
        if r is None:  # a median step of zero ns (a damaged trace's steps): no relative change to give
            warnings.append("the median step time is 0 ns on the before side: no relative change")
        else:
            change = (1.0 - r) * 100.0 if tokens else (r - 1.0) * 100.0  # worse is positive
    offsetting = ""
    n_min = min(len(b.step_values), len(a.step_values))
    if blocking:
        verdict, reason = "not comparable", blocking
    elif n_min < cfg.diff_min_steps:
        few = [f"{s.label} {len(s.step_values)}" for s in (b, a)]
        verdict = "inconclusive"
        reason = (f"too few steady steps to tell a change from noise ({', '.join(few)}; at least "
                  f"{cfg.diff_min_steps} per side, diff_min_steps); no significance is claimed")
    else:
        assert test is not None and change is not None
        lo, hi = test["interval"]
        sig = test["p_value"] < cfg.diff_alpha and not (lo <= 1.0 <= hi) and abs(change) >= 100 * cfg.diff_min_change
        what = f"median {metric}"
        r = tput_ratio if tokens else ratio
        stat = (f"{what} x{r:.3f} (p = {test['p_value']:.2g}, {cfg.diff_confidence:.0%} interval "
                f"{lo:.3f}-{hi:.3f})")
        if sig:
            verdict = "regressed" if change > 0 else "improved"
            reason = f"{what} {'worse' if change > 0 else 'better'} by {abs(change):.1f}%: {stat}"
        else:
            verdict = "no significant change"
            if test["p_value"] < cfg.diff_alpha and not (lo <= 1.0 <= hi):
                reason = (f"{stat}: significant but under {100 * cfg.diff_min_change:.0f}% (diff_min_change), "
                          "within run-to-run variation")
            else:
                reason = f"{stat}: within the step-to-step noise"
            offsetting = _offsetting(attr, b, cfg)
            if offsetting:
                reason += f"; {offsetting}"
    return Diff(before=b, after=a, verdict=verdict, reason=reason, warnings=tuple(dict.fromkeys(warnings)),
                metric=metric, step_time_ratio=ratio, throughput_ratio=tput_ratio, test=test, change_pct=change,
                shift=shift_sentence(b, a), first_fix=_first_fix(a), offsetting=offsetting, comparability=comp,
                attribution=attr, kernels=tables.kernel_table(b, a), host_ops=tables.host_op_table(b, a),
                collectives=tables.collective_table(b, a),
                ranks=tables.rank_table(b, a), cfg=cfg,
                notes=tuple(dict.fromkeys(b.notes + a.notes)))


def _first_fix(a: SideFacts) -> str:
    cause = a.dominant_cause
    c = causes.find(cause)
    if cause == HEALTHY and c is not None:
        return f"healthy: {c.first_response}."
    return f"{cause}: {c.meaning if c else ''}; {c.first_response if c else ''}."


def gate(d: Diff, pct: float) -> tuple[bool, str]:
    """``--fail-on-regression PCT``: trips on a significant worsening of at least PCT%, or a diff that cannot tell."""
    if d.verdict in ("inconclusive", "not comparable"):
        return True, f"the diff is {d.verdict} ({d.reason}); a gate cannot pass on it"
    if d.verdict == "regressed" and d.change_pct is not None and d.change_pct >= pct:
        return True, f"{d.metric} got significantly worse by {d.change_pct:.1f}% (>= {pct:g}%)"
    return False, ""


__all__ = ["Diff", "compare", "gate", "shift_sentence", "VERDICTS", "DIFF_SCHEMA_VERSION", "PARTS"]
