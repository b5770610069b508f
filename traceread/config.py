"""Every tunable threshold, in one place, with its unit and the reason for its default.

Pass a :class:`Thresholds` explicitly to analyses. Override from the CLI (``--set name=value``) or a
TOML config file (``[thresholds]`` table). ``docs/rules.md`` lists them for users; a test checks that
the two agree.
"""

from __future__ import annotations

import dataclasses
import math
import os
import stat
import sys
from dataclasses import dataclass, field
from typing import Any

from traceread.errors import UsageError


def _t(default: Any, unit: str, why: str) -> Any:
    return field(default=default, metadata={"unit": unit, "why": why})


@dataclass(frozen=True)
class Thresholds:
    """Named thresholds. Each field's metadata carries its unit and a one-line reason."""

    # --- steps (interval engine) ---
    outlier_step_factor: float = _t(
        1.5, "x median", "a step 1.5x the median is a stall (checkpoint, allocator), not steady state")
    warmup_min_steps: int = _t(
        4, "steps", "only drop ProfilerStep#0 as warmup when enough steps remain to measure")
    step_infer_min_steps: int = _t(
        3, "steps", "with no step markers, a range or kernel pattern must repeat this often to be the step")
    step_infer_min_cover: float = _t(
        0.8, "fraction of launches", "a repeating range is the step only if it holds most of the GPU work")
    step_infer_min_match: float = _t(
        0.8, "fraction of kernels", "a kernel period is the step only if most kernels recur one period later")

    # --- rules (gap classification; docs/rules.md explains each) ---
    min_judged_gap_ns: int = _t(
        1_000, "ns", "below ~1 us timestamps (integer-us traces) cannot separate causes")
    turnaround_max_ns: int = _t(
        3_000, "ns", "a gap this short whose next kernel was already queued is the GPU's own "
        "kernel-to-kernel turnaround, not a wait")
    data_loader_cover: float = _t(
        0.5, "fraction of gap", "data-starved needs loader/H2D-batch activity over most of the gap")
    comm_cover: float = _t(
        0.5, "fraction of gap", "comm-bound needs communication running during most of the gap")
    comm_tail_max: float = _t(
        0.25, "fraction of gap", "compute waiting for communication starts as it ends; a gap going on for over "
        "a quarter of its length after the last collective ended waited on something else")
    sync_drain_tolerance_ns: int = _t(
        2_000, "ns", "host/GPU clock skew: a sync that returns this close to the drain still held it")
    launch_cpu_cover: float = _t(
        0.5, "fraction of gap", "launch-bound: host inside runtime/launch calls for most of the gap")
    launch_max_ns_per_launch: int = _t(
        500_000, "ns per launch", "launch-bound: eager dispatch of one op rarely exceeds ~0.5 ms; a "
        "longer quiet host stretch is some other host work")
    launch_call_max_ns: int = _t(
        1_000_000, "ns", "a launch costs microseconds; one CUDA call over 1 ms is driver work (lazy module "
        "load, context or stream creation, allocation), not dispatch overhead")
    host_stall_min_ns: int = _t(
        5_000_000, "ns", "dispatch records a child op or CUDA call every few microseconds; one op holding its "
        "thread 5 ms with none is compiling, recording, initializing or computing on the host, not launching")
    one_time_cover: float = _t(
        0.5, "fraction of gap", "one-time-cost: compilation, graph capture, module loading, first launches, "
        "context creation or allocator growth cover most of the gap")
    one_time_run_gap_ns: int = _t(
        10_000_000, "ns", "module-load / driver-init calls this close together on a thread are one loading "
        "run (the host time between them is the same initialization)")
    one_time_verdict_share: float = _t(
        0.25, "fraction of step", "one-time costs this large make the window not steady state: the verdict "
        "says how to re-profile instead of naming a fix")
    allocator_recur_presence: float = _t(
        0.5, "fraction of steps", "allocator calls in at least half of the steps (and two or more) recur "
        "every step (thrash); fewer are growth in the first steps (one-time)")
    sync_stall_min_share: float = _t(
        0.5, "fraction of gap", "sync-stall: the host was provably blocked in a sync (or a synchronizing "
        "allocator call) for at least half of the gap")
    sync_refill_max_ns: int = _t(
        50_000, "ns", "a next launch this soon after the sync returned is the stall's own refill, not "
        "other host work")
    capture_lead_min_ns: int = _t(
        1_000_000, "ns", "capture-boundary: a device's first recorded GPU op starting this long after its launch "
        "call returned (or a blocking call at the capture's start held this long) waited on GPU work issued "
        "before the capture; a launch with nothing ahead of it starts within tens of microseconds")
    capture_tail_min_ns: int = _t(
        5_000_000, "ns", "capture-boundary: the last step ending in a stretch this long with no host op and no "
        "GPU op (and twice the other steps' own empty endings) is the profiler shutting down")
    sync_min_wait_ns: int = _t(
        20_000, "ns", "a sync with nothing queued returns in a few us; one that waited 20 us or more while the GPU "
        "ran queued work took away the host's lead (a drain-sync stall)")
    bus_min_copy_bytes: int = _t(
        4 << 20, "bytes", "a copy of 4 MiB takes over 100 us on any PCIe link, far beyond its ~10 us latency: its "
        "rate measures the link; smaller copies are latency-bound")
    bus_min_fraction: float = _t(
        0.7, "fraction of link rate", "pinned host-to-device copies in a gap moving bytes at 70% or more of the "
        "fastest rate the trace's large copies reached are limited by the bus, not by the loader")
    input_work_min_ns: int = _t(
        500_000, "ns", "data-starved by host-side input work: a gap longer than one op's eager dispatch (~0.5 ms), "
        "mostly held by launch-free host frames that produce the batch")
    bubble_min_steps: int = _t(
        4, "steps", "periodicity cannot be judged from fewer analysed steps")
    bubble_presence: float = _t(
        0.75, "fraction of steps", "a structural bubble is present in nearly every step")
    bubble_phase_tolerance: float = _t(
        0.05, "fraction of step", "same phase: within 5% of the step length")
    bubble_max_cv: float = _t(
        0.2, "coefficient of variation", "bubble durations are stable; stochastic stalls are not")
    bubble_duration_tolerance: float = _t(
        0.35, "fraction of median", "the same gap by order in the step: +-20% jitter on a bubble stays within "
        "25% of its median; a 3x longer stall at that place is not the same gap")
    bubble_order_phase_tolerance: float = _t(
        0.05, "fraction of step", "the same gap by order: a fill stays at the start and a drain at the end; a "
        "wait elsewhere that happens to share the order (a one-off before the drain) is not it")
    recurring_dur_factor: float = _t(
        2.0, "x median", "one recurring gap: the same kernels before and after it at the same place in each step, "
        "and a duration within 2x of the group's median (a much longer stall there is something else)")
    recurring_near_band: float = _t(
        0.1, "fraction of gap", "a recurring gap's members whose evidence lies within 10 points of a cover "
        "threshold take the class of the group's pooled idle; clearer evidence keeps its own class")
    bubble_min_gap_ns: int = _t(
        20_000, "ns", "launch jitter gaps (a few us) recur too; a bubble is a real pause")

    # --- run-level verdicts ---
    healthy_max_idle: float = _t(
        0.10, "fraction of step", "under ~10% idle the remaining gains are inside the kernels")
    memory_bound_min_share: float = _t(
        0.5, "fraction of busy", "most busy time in memory-bound kernels means fusion is the lever")
    note_min_share: float = _t(
        0.01, "fraction of step", "attribution notes about time under ~1% of the step are noise")

    # --- report (what the analyze report shows) ---
    report_second_min_share: float = _t(
        0.10, "fraction of step", "a second cause under ~10% of step time is not worth a reader's next move")

    # --- jobs and stragglers (traceread.ranks) ---
    capture_window_slack_ns: int = _t(
        2_000_000_000, "ns", "ranks of one capture start their profilers within a second or so of each other "
        "(plus NTP skew of tens of ms); windows further apart are separate captures")
    align_max_end_spread_ns: int = _t(
        1_000_000, "ns", "a collective completes within microseconds on all its ranks; matched calls whose aligned "
        "ends still scatter by over 1 ms are probably not the same collectives")
    straggler_min_wait_share: float = _t(
        0.02, "fraction of others' time", "a rank is a straggler only when the others' waiting for it costs "
        "at least ~2% of their window: less is noise a balanced job has too")
    straggler_min_excess: float = _t(
        2.0, "x median rank", "the wait caused must be at least twice that caused by the median other rank: in "
        "a balanced job every rank is last now and then")
    straggler_min_uncertainty_factor: float = _t(
        3.0, "x alignment uncertainty", "a lateness within 3x the clock alignment's uncertainty could be the "
        "alignment's own error")
    straggler_min_own_excess: float = _t(
        0.02, "fraction of a step", "a rank's own delay in a step (compute or own idle longer than the median rank "
        "of its pipeline stage) counts when it is at least ~2% of its step: less is jitter every rank has")
    straggler_min_step_share: float = _t(
        0.5, "fraction of steps", "one rank is named a straggler only when the others' waiting is mostly for it in "
        "at least half the steps; waiting that moves between ranks from step to step is no single straggler")
    straggler_min_collectives: int = _t(
        4, "matched collectives", "a straggler or slow stage is named only from at least 4 collectives matched "
        "across ranks: fewer (one all-reduce of a short capture) cannot tell a slow rank from a late start")
    straggler_min_steps: int = _t(
        2, "steps", "... over at least 2 steps (where steps are known): a claim about the job's pace needs "
        "lateness that recurs from step to step")
    straggler_min_late_collectives: int = _t(
        3, "collectives", "a rank is named only when it arrived last at 3 collectives or more and its lateness "
        "is not confined to its first collective (its process starting later: start skew)")
    straggler_confined_min_ratio: float = _t(
        4.0, "x the median collective's longest wait", "waits confined to a few collectives are judged when each "
        "is at least 4 times the job's median longest wait per collective (and above the alignment's uncertainty): "
        "smaller ones are the collectives' ordinary spread")
    job_min_present_share: float = _t(
        0.5, "fraction of the world", "a job with ranks missing names a straggler only when at least half its "
        "world is present, and a slow stage only when every rank is: fewer cannot say who holds the job back")
    stage_imbalance_min_excess: float = _t(
        0.10, "fraction over other stages", "a pipeline stage is the bottleneck when every rank of it computes at "
        "least 10% longer per step than the median rank of the other stages (same micro-batches everywhere)")

    # --- scoreboard (MFU, kernel table, roofline) ---
    mfu_min_steady_steps: int = _t(
        3, "steps", "a median of fewer steady steps cannot tell a stall from the steady state")
    mfu_max_step_cv: float = _t(
        0.10, "coefficient of variation", "steady step times spread more than ~10% make MFU noisy")
    mfu_very_good: float = _t(
        0.50, "MFU", "above ~50% MFU is very good for large-model training; headroom is measured to it")
    peak_match_tolerance: float = _t(
        0.03, "fraction", "a hand-given peak within 3% of a table figure is that figure (sparse check)")
    kernel_hint_min_share: float = _t(
        0.01, "fraction of GPU time", "kernel hints ignore kernels under ~1% of GPU time")
    partial_wave_min_idle: float = _t(
        0.25, "fraction of SMs", "a grid leaving under a quarter of the SMs idle is tiling noise, not a fix")
    roofline_heavy_share: float = _t(
        0.01, "fraction of op kernel time", "the roofline calls an op heavy from ~1% of matmul/attention time")

    # --- trace sanity notes (traceread/frame/sanity.py) ---
    clock_jump_min_ns: int = _t(
        60_000_000_000, "ns", "a minute with no GPU activity inside one capture is a clock jump or two "
        "captures in one file, not a pause of the run")

    # --- what-if replay (traceread/whatif) ---
    whatif_wait_min_ns: int = _t(
        10_000, "ns", "a GPU op starting this much later than its launch and stream allow waited for another "
        "stream (an event wait); launch jitter is a few us")
    whatif_graph_node_ns: int = _t(
        1_000, "ns per kernel", "launch-bound fix: a kernel inside a replayed CUDA graph costs the host about 1 us "
        "(one cudaGraphLaunch for the whole sequence)")
    whatif_graph_kernel_gap_ns: int = _t(
        340, "ns", "launch-bound fix: a replayed CUDA graph runs its kernels 0.26-0.42 us apart on a real eager-to-graph "
        "pair (eager: 1.0-1.4 us); used where the trace holds no graph launches to measure it from and its GPU "
        "generation has no sourced figure (docs/whatif.md); a value set here wins over that table")
    whatif_graph_launch_ns: int = _t(
        10_000, "ns per graph", "launch-bound fix: a cudaGraphLaunch holds the host about 10 us before the graph's first "
        "kernel can start (an assumption where the trace holds no graph launch to measure it from and its GPU "
        "generation has no sourced figure, docs/whatif.md); a value set here wins over that table")
    whatif_launch_linked_min: float = _t(
        0.1, "fraction of kernels", "launch-bound fix: a rank with fewer of its kernels' launches recorded (an XLA "
        "trace that records only its copies) cannot tell the dispatch before a kernel from the host's other work, as "
        "the rule says who waited cannot be told: the fix is not predicted there")
    whatif_memory_factor: float = _t(
        1.5, "x faster", "memory-bound fix: fusing elementwise/normalization kernels saves about a third of their "
        "memory traffic")
    whatif_worker_host_slowdown: float = _t(
        0.053, "fraction of host time", "data-starved fix: loader worker processes compete with the training thread; "
        "its per-op host time rose 5.3% (453 -> 477 us a convolution) from 0 to 4 workers on a real pair: the far "
        "end of the prediction's interval")
    whatif_bubble_factor: float = _t(
        2.0, "x smaller", "pipeline-bubble fix: an interleaved 1F1B schedule with 2 virtual stages halves the bubble")

    # --- diff (traceread diff BEFORE AFTER) ---
    diff_min_steps: int = _t(
        4, "steady steps per side", "the rank test's smallest two-sided p with 4 steps a side is 0.029, under "
        "diff_alpha; with 3 it is 0.1: fewer steps cannot tell a change from run-to-run noise")
    diff_alpha: float = _t(
        0.05, "p-value", "the usual 5% false-alarm rate of the Mann-Whitney U test on per-step times")
    diff_confidence: float = _t(
        0.95, "fraction", "confidence of the block-bootstrap interval of the ratio of medians")
    diff_bootstrap_samples: int = _t(
        2000, "resamples", "enough for stable 2.5/97.5 percentiles; seeded, so a diff is reproducible")
    diff_min_change: float = _t(
        0.02, "fraction of step time", "two runs of the same code differ by ~1-2% (placement, clocks); a "
        "smaller significant change is not called a change")
    diff_offset_min_shift: float = _t(
        0.05, "fraction of step time", "offsetting changes: a part moving this much while the total does "
        "not is worth saying")
    diff_fix_tolerance: float = _t(
        0.05, "fraction of step time", "diff --fix: the after run's median step within this of the replay's "
        "predicted step delivered what was predicted (the replay's acceptance bound on real and generated pairs)")
    diff_shape_top_ops: int = _t(
        5, "op signatures", "the work-per-step check compares the recorded shapes of the heaviest matmul/"
        "attention ops")

    def with_overrides(self, overrides: dict[str, Any]) -> Thresholds:
        """A copy with ``overrides`` applied; values are coerced to each field's type."""
        fields = {f.name: f for f in dataclasses.fields(self)}
        coerced: dict[str, Any] = {}
        for key, raw in overrides.items():
            if key not in fields:
                raise UsageError(f"unknown threshold {key!r}; known: {', '.join(sorted(fields))}")
            coerced[key] = _checked(key, fields[key], type(getattr(self, key)), raw)
        return dataclasses.replace(self, **coerced)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @staticmethod
    def describe() -> list[dict[str, Any]]:
        """Name, default, unit and reason of every threshold (for docs and report method notes)."""
        return [
            {"name": f.name, "default": f.default, "unit": f.metadata["unit"], "why": f.metadata["why"]}
            for f in dataclasses.fields(Thresholds)
        ]


INT64_MAX = 2**63 - 1
# Allowed values by unit (lowest, highest, whether each end is open); a name in _RANGE_OF overrides.
# A value outside would crash an analysis (a negative resample count, an infinite time, a
# confidence above 1) or make it meaningless; each is refused at the command line instead.
_FRACTION = (0.0, 1.0, False, False)
_RANGE_OF: dict[str, tuple[float, float, bool, bool]] = {
    "diff_confidence": (0.0, 1.0, True, True),
    "diff_alpha": (0.0, 1.0, True, False),
    "diff_bootstrap_samples": (1, 1_000_000, False, False),  # each resample is a pass over the steps
    "diff_min_steps": (1, INT64_MAX, False, False),
    "outlier_step_factor": (1.0, math.inf, False, True),
    "bubble_duration_tolerance": (0.0, math.inf, False, True),  # a fraction of the median, may pass 1
    "whatif_memory_factor": (1.0, math.inf, False, True),  # a speed-up: 1 changes nothing
    "whatif_bubble_factor": (1.0, math.inf, False, True),
    "whatif_worker_host_slowdown": (0.0, 1.0, False, False),
}


def allowed_range(name: str, typ: type, unit: str) -> tuple[float, float, bool, bool]:
    """The values threshold ``name`` accepts: (lowest, highest, lowest excluded, highest excluded)."""
    if name in _RANGE_OF:
        return _RANGE_OF[name]
    if typ is float and (unit.startswith("fraction") or unit in ("MFU", "p-value")):
        return _FRACTION
    return (0, INT64_MAX, False, False) if typ is int else (0.0, math.inf, False, True)


def _range_text(lo: float, hi: float, lo_open: bool, hi_open: bool) -> str:
    def num(x: float) -> str:
        return "2^63-1" if x == INT64_MAX else "inf" if x == math.inf else f"{x:g}" if isinstance(x, float) else str(x)
    return f"{'(' if lo_open else '['}{num(lo)}, {num(hi)}{')' if hi_open else ']'}"


def _number(raw: Any, typ: type) -> float | int | None:
    """``raw`` (a --set string or a TOML value) as a number of type ``typ``; None when it is not one."""
    if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
        return None
    if typ is int and not isinstance(raw, float):
        try:
            return int(raw)  # exact, however large (float() would round past 2^53)
        except ValueError:
            pass
    try:
        x = float(raw)  # "1e9", "5.0"
    except (ValueError, OverflowError):
        return None
    if typ is int:
        return int(x) if x.is_integer() else None  # not 1.5, inf or nan
    return None if math.isnan(x) else x


def _checked(key: str, f: dataclasses.Field, typ: type, raw: Any) -> Any:
    """``raw`` as the threshold's type, inside its allowed range; a one-line UsageError naming the
    key and the range otherwise."""
    lo, hi, lo_open, hi_open = allowed_range(key, typ, f.metadata["unit"])
    allowed = f"{typ.__name__} in {_range_text(lo, hi, lo_open, hi_open)} ({f.metadata['unit']})"
    value = _number(raw, typ)
    if value is None:
        raise UsageError(f"threshold {key}: cannot read {raw!r}; allowed: {allowed}")
    if value < lo or value > hi or (lo_open and value == lo) or (hi_open and value == hi):
        raise UsageError(f"threshold {key}: {raw!r} is out of range; allowed: {allowed}")
    return typ(value)


def parse_set_options(items: tuple[str, ...] | list[str]) -> dict[str, str]:
    """Parse repeated ``--set name=value`` options."""
    out: dict[str, str] = {}
    for item in items:
        if "=" not in item:
            raise UsageError(f"--set expects name=value, got {item!r}")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


# The largest config or job TOML file read (they hold tens of keys).
CONFIG_MAX_BYTES = 1 << 20


def load_config_file(path: str) -> dict[str, Any]:
    """Read a TOML config file (``[thresholds]``, ``[kernel_patterns]``, ``[job]`` tables)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10
        import tomli as tomllib
    from traceread.atomic import note_input

    note_input(path)  # an output of this command never replaces it
    try:
        # bounded like every other input: a job or config file is a few hundred bytes; one found in a
        # scanned tree may be anything (an 8 GB sparse file, 100,000 nested arrays)
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as fh:  # a FIFO never blocks the open
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise UsageError(f"{path}: not a regular file")
            data = fh.read(CONFIG_MAX_BYTES + 1)
        if len(data) > CONFIG_MAX_BYTES:
            raise UsageError(f"{path}: larger than {CONFIG_MAX_BYTES:,} bytes: not a config or job file")
        raw = tomllib.loads(data.decode("utf-8"))
    except OSError as exc:
        raise UsageError(f"{path}: cannot read config file ({exc.strerror or exc})") from None
    except UnicodeDecodeError:  # TOML is UTF-8 text
        raise UsageError(f"{path}: not valid TOML (the file is not UTF-8 text)") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML ({exc})") from None
    except RecursionError:  # the parser recurses per nesting level
        raise UsageError(f"{path}: not valid TOML (values nested too deeply)") from None
    for table in ("thresholds", "kernel_patterns"):
        if not isinstance(raw.get(table, {}), dict):
            raise UsageError(f"{path}: [{table}] must be a table, got {type(raw[table]).__name__}")
    return raw
