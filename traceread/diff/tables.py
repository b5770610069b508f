"""The side-by-side tables of a diff: attribution, kernels, host ops, collectives, ranks.

Each function reads two :class:`~traceread.diff.side.SideFacts` and returns a DataFrame (plain
data). "Per step" divides a side's totals by its profiled steps, so sides with different step counts
compare. Kernel deltas are split into the part due to the call count and the part due to the mean
duration: ``delta = (n_a - n_b) * mean_b + n_a * (mean_a - mean_b)``, so "more calls" is never read as
"slower calls".
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from traceread.diff.kernel_key import kernel_key
from traceread.diff.side import SideFacts
from traceread.vocabulary import BUSY_PARTS, PARTS

KERNEL_COLUMNS = ["name", "name_after", "matched_by", "status", "count_before", "count_after", "mean_ns_before",
                  "mean_ns_after", "ns_per_step_before", "ns_per_step_after", "delta_ns_per_step",
                  "delta_from_count_ns", "delta_from_duration_ns"]
HOST_COLUMNS = ["name", "status", "count_before", "count_after", "total_ns_before", "total_ns_after",
                "count_per_step_before", "count_per_step_after", "ns_per_step_before", "ns_per_step_after",
                "delta_ns_per_step"]


def _rel(before: float, after: float) -> float | None:
    return (after - before) / before if before else None


def attribution_table(b: SideFacts, a: SideFacts) -> pd.DataFrame:
    """Per part: mean ns per step and share, before and after, absolute and relative delta per step."""
    rows = []
    for p in PARTS:
        x, y = b.parts_per_step.get(p, 0.0), a.parts_per_step.get(p, 0.0)
        rows.append({"part": p, "kind": "busy" if p in BUSY_PARTS else "idle",
                     "ns_per_step_before": x, "ns_per_step_after": y, "delta_ns_per_step": y - x,
                     "relative_delta": _rel(x, y), "share_before": b.shares.get(p, 0.0),
                     "share_after": a.shares.get(p, 0.0)})
    return pd.DataFrame(rows)


def _per_step(df: pd.DataFrame, steps: int) -> pd.DataFrame:
    n = max(steps, 1)
    return df.assign(count_ps=df["count"] / n, ns_ps=df["total_ns"] / n,
                     mean=df["total_ns"] / df["count"].clip(lower=1))


def _key_merge(left: pd.DataFrame, right: pd.DataFrame) -> pd.DataFrame:
    """Match names left unmatched by the spelling-neutral key; several names with one key are summed."""
    def by_key(df: pd.DataFrame) -> pd.DataFrame:
        k = df.assign(key=[kernel_key(n) for n in df["name"]])
        g = k.groupby("key", sort=False)
        return pd.DataFrame({"name": g["name"].first(), "count": g["count"].sum(),
                             "total_ns": g["total_ns"].sum()}).reset_index()
    lk, rk = by_key(left), by_key(right)
    m = lk.merge(rk, on="key", how="outer", suffixes=("_b", "_a"), indicator=True)
    return m


def kernel_table(b: SideFacts, a: SideFacts) -> pd.DataFrame:
    """Kernels by change in GPU time per step: matched by full name, else by :func:`kernel_key`."""
    kb, ka = b.kernels, a.kernels
    exact = kb.merge(ka, on="name", how="outer", suffixes=("_b", "_a"), indicator=True)
    both = exact[exact["_merge"] == "both"].assign(name_a=lambda d: d["name"], by="name")
    both = both.rename(columns={"name": "name_b"})
    rest_b = exact.loc[exact["_merge"] == "left_only", ["name", "count_b", "total_ns_b"]].rename(
        columns={"count_b": "count", "total_ns_b": "total_ns"})
    rest_a = exact.loc[exact["_merge"] == "right_only", ["name", "count_a", "total_ns_a"]].rename(
        columns={"count_a": "count", "total_ns_a": "total_ns"})
    keyed = _key_merge(rest_b, rest_a) if len(rest_b) or len(rest_a) else pd.DataFrame()
    frames = [both[["name_b", "name_a", "by", "count_b", "count_a", "total_ns_b", "total_ns_a"]]]
    if len(keyed):
        keyed = keyed.assign(by=np.where(keyed["_merge"] == "both", "key", ""))
        frames.append(keyed[["name_b", "name_a", "by", "count_b", "count_a", "total_ns_b", "total_ns_a"]])
    f = pd.concat([x for x in frames if len(x)], ignore_index=True) if any(len(x) for x in frames) else \
        pd.DataFrame(columns=["name_b", "name_a", "by", "count_b", "count_a", "total_ns_b", "total_ns_a"])
    if f.empty:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in KERNEL_COLUMNS})
    for c in ("count_b", "count_a", "total_ns_b", "total_ns_a"):
        f[c] = pd.to_numeric(f[c], errors="coerce").fillna(0).astype(np.float64)
    nb, na = max(b.steps_total, 1), max(a.steps_total, 1)
    cb, ca = f["count_b"] / nb, f["count_a"] / na
    mb = np.where(f["count_b"] > 0, f["total_ns_b"] / f["count_b"].clip(lower=1), np.nan)
    ma = np.where(f["count_a"] > 0, f["total_ns_a"] / f["count_a"].clip(lower=1), np.nan)
    tb, ta = f["total_ns_b"] / nb, f["total_ns_a"] / na
    status = np.where(f["count_b"] == 0, "new", np.where(f["count_a"] == 0, "vanished", "changed"))
    both_mask = (f["count_b"] > 0) & (f["count_a"] > 0)
    from_count = np.where(both_mask, (ca - cb) * np.nan_to_num(mb), ta - tb)
    from_dur = np.where(both_mask, ca * (np.nan_to_num(ma) - np.nan_to_num(mb)), 0.0)
    out = pd.DataFrame({
        "name": f["name_b"].where(f["name_b"].notna(), f["name_a"]).astype(str),
        "name_after": f["name_a"].fillna("").astype(str), "matched_by": f["by"].fillna("").astype(str),
        "status": status, "count_before": cb, "count_after": ca, "mean_ns_before": mb, "mean_ns_after": ma,
        "ns_per_step_before": tb, "ns_per_step_after": ta, "delta_ns_per_step": ta - tb,
        "delta_from_count_ns": from_count, "delta_from_duration_ns": from_dur})
    order = np.lexsort((out["name"].to_numpy(), -np.abs(out["delta_ns_per_step"].to_numpy())))
    return out.iloc[order].reset_index(drop=True)[KERNEL_COLUMNS]


def host_op_table(b: SideFacts, a: SideFacts) -> pd.DataFrame:
    """Host ops and annotations added, removed and changed (count, total time), as HTA's TraceDiff lists them."""
    if b.host_ops is None or a.host_ops is None:  # not recorded on a side (scan reports)
        return pd.DataFrame({c: pd.Series(dtype=object) for c in HOST_COLUMNS})
    m = b.host_ops.merge(a.host_ops, on="name", how="outer", suffixes=("_b", "_a"))
    if m.empty:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in HOST_COLUMNS})
    for c in ("count_b", "count_a", "total_ns_b", "total_ns_a"):
        m[c] = m[c].fillna(0).astype(np.int64)
    nb, na = max(b.steps_total, 1), max(a.steps_total, 1)
    status = np.where(m["count_b"] == 0, "added", np.where(m["count_a"] == 0, "removed",
                      np.where(m["count_b"] != m["count_a"], "count changed", "same count")))
    out = pd.DataFrame({"name": m["name"].astype(str), "status": status,
                        "count_before": m["count_b"], "count_after": m["count_a"],
                        "total_ns_before": m["total_ns_b"], "total_ns_after": m["total_ns_a"],
                        "count_per_step_before": m["count_b"] / nb, "count_per_step_after": m["count_a"] / na,
                        "ns_per_step_before": m["total_ns_b"] / nb, "ns_per_step_after": m["total_ns_a"] / na})
    out["delta_ns_per_step"] = out["ns_per_step_after"] - out["ns_per_step_before"]
    rank = out["status"].map({"added": 0, "removed": 0, "count changed": 1, "same count": 2}).to_numpy()
    order = np.lexsort((out["name"].to_numpy(), -np.abs(out["delta_ns_per_step"].to_numpy()), rank))
    return out.iloc[order].reset_index(drop=True)[HOST_COLUMNS]


def collective_table(b: SideFacts, a: SideFacts) -> pd.DataFrame:
    """Per collective type: time and exposed (not overlapped by compute) time per step, before and after."""
    m = b.collectives.merge(a.collectives, on="collective", how="outer", suffixes=("_b", "_a"))
    cols = ["collective", "count_per_step_before", "count_per_step_after", "ns_per_step_before",
            "ns_per_step_after", "exposed_ns_per_step_before", "exposed_ns_per_step_after"]
    if m.empty:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in cols})
    m = m.fillna(0)
    nb, na = max(b.steps_total, 1), max(a.steps_total, 1)
    return pd.DataFrame({"collective": m["collective"].astype(str),
                         "count_per_step_before": m["count_b"] / nb, "count_per_step_after": m["count_a"] / na,
                         "ns_per_step_before": m["total_ns_b"] / nb, "ns_per_step_after": m["total_ns_a"] / na,
                         "exposed_ns_per_step_before": m["exposed_ns_b"] / nb,
                         "exposed_ns_per_step_after": m["exposed_ns_a"] / na})[cols]


def rank_table(b: SideFacts, a: SideFacts) -> pd.DataFrame:
    """Per rank (jobs only): step, busy and idle time per step before and after, and straggler flags.

    A rank is a straggler on a side when :func:`traceread.ranks.analyze_job` names it in any capture
    (the others waited on it at collectives); ``straggler_cause_*`` says why.
    """
    if b.per_rank.empty and a.per_rank.empty:
        return pd.DataFrame()
    # one side a job, the other one rank (or one process): its side has no per-rank rows, nor columns
    before = b.per_rank if not b.per_rank.empty else a.per_rank.iloc[0:0]
    after = a.per_rank if not a.per_rank.empty else b.per_rank.iloc[0:0]
    m = before.merge(after, on="rank", how="outer", suffixes=("_before", "_after"))
    for side, facts in (("before", b), ("after", a)):
        causes = {int(s["rank"]): str(s.get("cause") or "") for s in facts.stragglers if s.get("rank") is not None}
        m[f"straggler_{side}"] = m["rank"].isin(list(causes))
        m[f"straggler_cause_{side}"] = [causes.get(int(r), "") for r in m["rank"]]
    for c in ("step_ns", "busy_ns", "idle_ns"):
        m[f"delta_{c}"] = m[f"{c}_after"] - m[f"{c}_before"]
    return m.sort_values("rank").reset_index(drop=True)
