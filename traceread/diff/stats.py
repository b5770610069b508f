"""The significance test of a diff: Mann-Whitney U on per-step values, and a block-bootstrap interval.

Both are written in numpy (scipy is not a dependency for two formulas):

* :func:`mann_whitney_u`: two-sided test that one side's per-step values tend to be larger than the
  other's, by the normal approximation with the tie correction and a continuity correction (as
  ``scipy.stats.mannwhitneyu(method="asymptotic")``). Step times are not normal (stalls make a long
  right tail), which is why a rank test is used and not Welch's t.
* :func:`block_bootstrap_ratio`: percentile interval of ``median(after) / median(before)`` from a
  moving-block bootstrap of each side: consecutive steps are correlated (a slow data shard, a
  thermal spell), so steps are resampled in runs of ``block`` consecutive steps, not one by one.
  Seeded: the same inputs give the same interval.

Neither removes the caveat of any within-run test: steps of one run cannot show the variance
between two runs (node placement, clocks), which is what ``diff_min_change`` stands for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

TEST_NAME = "Mann-Whitney U (two-sided, normal approximation with tie and continuity correction)"
INTERVAL_NAME = "moving-block bootstrap percentile interval of the ratio of medians (after / before)"


@dataclass(frozen=True)
class UTest:
    u: float  # U of the first sample (before)
    z: float
    p_value: float


def mann_whitney_u(x: np.ndarray, y: np.ndarray) -> UTest:
    """Two-sided Mann-Whitney U of ``x`` against ``y`` (normal approximation, ties corrected)."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    n1, n2 = len(x), len(y)
    if n1 == 0 or n2 == 0:
        raise ValueError("Mann-Whitney U needs at least one value on each side")
    both = np.concatenate([x, y])
    ranks = _midranks(both)
    u1 = float(ranks[:n1].sum() - n1 * (n1 + 1) / 2.0)
    n = n1 + n2
    _, counts = np.unique(both, return_counts=True)
    tie = float((counts.astype(np.float64) ** 3 - counts).sum())
    var = n1 * n2 / 12.0 * ((n + 1) - tie / (n * (n - 1))) if n > 1 else 0.0
    mu = n1 * n2 / 2.0
    if var <= 0:
        return UTest(u=u1, z=0.0, p_value=1.0)
    diff = u1 - mu
    z = (diff - math.copysign(0.5, diff)) / math.sqrt(var) if diff else 0.0
    p = min(1.0, math.erfc(abs(z) / math.sqrt(2.0)))
    return UTest(u=u1, z=float(z), p_value=float(p))


def _midranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks, ties given the mean of the ranks they span."""
    order = np.argsort(values, kind="stable")
    sorted_v = values[order]
    starts = np.r_[True, sorted_v[1:] != sorted_v[:-1]]
    group = np.cumsum(starts) - 1
    first = np.flatnonzero(starts)
    last = np.r_[first[1:], len(values)] - 1
    mid = (first + last) / 2.0 + 1.0
    out = np.empty(len(values), dtype=np.float64)
    out[order] = mid[group]
    return out


def block_length(n: int) -> int:
    """Block length for ``n`` consecutive steps: about n^(1/3) (the usual rate), at least 1."""
    return max(1, int(round(n ** (1.0 / 3.0))))


def _block_medians(values: np.ndarray, samples: int, rng: np.random.Generator) -> np.ndarray:
    """Median of each of ``samples`` moving-block resamples of ``values`` (vectorized)."""
    n = len(values)
    b = block_length(n)
    k = -(-n // b)  # blocks per resample
    starts = rng.integers(0, n - b + 1, size=(samples, k))
    idx = (starts[:, :, None] + np.arange(b)[None, None, :]).reshape(samples, k * b)[:, :n]
    return np.median(values[idx], axis=1)


def block_bootstrap_ratio(before: np.ndarray, after: np.ndarray, samples: int = 2000, confidence: float = 0.95,
                          seed: int = 0) -> tuple[float, float]:
    """Percentile interval of ``median(after) / median(before)`` (moving-block bootstrap, seeded)."""
    before = np.asarray(before, dtype=np.float64)
    after = np.asarray(after, dtype=np.float64)
    if not len(before) or not len(after):
        raise ValueError("the bootstrap needs at least one value on each side")
    rng = np.random.default_rng(seed)
    mb = _block_medians(before, samples, rng)
    ma = _block_medians(after, samples, rng)
    ratio = ma / np.where(mb > 0, mb, np.nan)
    ratio = ratio[np.isfinite(ratio)]
    if not len(ratio):
        return float("nan"), float("nan")
    tail = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(ratio, [tail, 1.0 - tail])
    return float(lo), float(hi)
