"""The words of the analysis' notes (``traceread.note.Note``): one function per kind, shared by the
Markdown and JSON reports (a note given as a sentence is that sentence)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from traceread.note import (
    AGGREGATED_EVENTS,
    ALIGNED_ENDS_DISAGREE,
    ALL_STEPS_FLAGGED,
    BASE_TIME_NOT_A_TIME,
    BUBBLES_NOT_JUDGED,
    BUBBLES_NOT_JUDGED_MORE,
    BYTES_UNRECORDED,
    CAPTURE_EDGES,
    CLAIMS_NO_RANK,
    COLLAPSED_STEPS,
    COMM_DURING_OTHER_IDLE,
    CUT_IN_EVENT_ARRAY,
    DEVICE_NAMES_UNRECOGNISED,
    DEVICES_NAMED_FROM_ARCH,
    DEVICES_UNNAMED,
    DP_EXCEEDS_GPUS,
    EPOCH_OUT_OF_RANGE,
    EPOCH_UNKNOWN,
    EVENTS_BEFORE_EPOCH,
    EVENTS_COUNTED,
    EVENTS_REPAIRED,
    EVENTS_SKIPPED,
    EXTERNAL_STREAM_WAITS,
    FEW_STEADY_STEPS,
    FILE_NAME_RANK_OUT_OF_RANGE,
    FIRST_STEP_WARMUP,
    FP8_GEMMS_SEEN,
    FP8_NOT_SEEN,
    GAPS_EXCEED_IDLE,
    GPU_NOT_DESCRIBED,
    GPU_SPAN_STEP,
    GPUS_DIFFER,
    GRAD_ACCUM_DISAGREES,
    GRAPH_TIME,
    GZIP_CHECK_MISMATCH,
    INFERRED_WAITS,
    ITERATION_RANGES,
    KERNEL_PERIOD,
    LAUNCHES_NOT_RECORDED,
    MBU_BYTES_ESTIMATE,
    MBU_NEEDS_BYTES,
    MEMORY_BOUND_NEXT,
    MFU_OVER_100,
    MICRO_BATCHES,
    MONOTONIC_CLOCK,
    NEGATIVE_DURATIONS,
    NO_EVENT_ARRAY,
    NO_EVENTS,
    NO_HOST_API,
    NO_HOST_PLANE,
    NO_NVTX_MATCH,
    NO_NVTX_RANGE_NAMED,
    NO_PEAK_BANDWIDTH,
    NOISY_STEPS,
    NOTHING_TO_ATTRIBUTE,
    ODD_DEVICE_IDS,
    ODD_DEVICE_IDS_INT32,
    ONE_OPTIMIZER_STEP_ASSUMED,
    OPTIMIZER_STEP_SPANS,
    OPTIMIZER_STEPS_PER_PROFILER_STEP,
    OUTLIER_STEPS,
    OVERLAPPING_KERNELS,
    PACKET_CUT,
    PACKETS_COUNTED,
    PEAK_OF_OTHER_DTYPE,
    PROFILER_STEP_PAST_INT64,
    RANK_CLAIM_OUT_OF_RANGE,
    RANK_CLAIMED_TWICE,
    RANK_NOT_ALIGNED,
    REPEATED_GPU_ACTIVITY,
    REPEATED_LAYERS,
    REPEATING_RANGE,
    ROOFLINE_GPU_UNKNOWN,
    ROOFLINE_NO_SHAPES,
    RPD_JSON,
    RPD_NO_DEVICE,
    SESSION_TIME,
    SIDE_FILE,
    SINGLE_RANGE_STEP,
    STEP_NUMBER_PAST_INT64,
    STEPS_FROM_LINE,
    STEPS_FROM_MARKER,
    STEPS_FROM_MODULE,
    STEPS_NVTX_RANGES,
    STRAGGLER_COMM_BOUND,
    TABLE_EMPTY,
    TIME_SHIFTED_EXPORT,
    TIMELINE_HOLES,
    TIMING_OUTLIERS_EXCLUDED,
    TIMING_WARMUP_EXCLUDED,
    TOKENS_COVER_MICRO_BATCHES,
    TPU_NO_LAUNCHES,
    TRAILER_NOT_JSON,
    UNCLASSIFIED_BUSY,
    UNDEFINED_EVENT_METADATA,
    UNENDED_MARKERS,
    UNEXPLAINED_WAITS,
    UNMARKED_RANKS,
    UNORDERED_DEPENDENCIES,
    VIEWER_DROPPED_EVENTS,
    VIEWER_NOT_ROWS,
    WAITING_FOR,
    WARMUP_GIVEN,
    WORLD_SIZE_OUT_OF_RANGE,
    Note,
)


def _straggler_comm_bound(d: dict[str, Any]) -> str:
    return (f"comm-bound: {d['waiting_ns'] / 1e6:.3f} ms of the comm-bound time on the other ranks of {d['job']} is "
            f"waiting for straggler rank {d['rank']} ({d['cause']}), not slow interconnect (see the job section)")


def _waiting_for(d: dict[str, Any]) -> str:
    who = f"straggler rank {d['who']}" if d["waits_on"] == "rank" else f"pipeline stage {d['who']}"
    fix = (" (slower than the other stages: rebalance layers across stages; a different schedule does not "
           "remove it)" if d["waits_on"] == "stage" else "")
    cls = d["idle_class"]
    return (f"{cls}: {d['share']:.0%} of the {cls} time on the other ranks of {d['job']} is waiting for "
            f"{who}{fix} (see the job section)")


def _repeated_gpu_activity(d: dict[str, Any]) -> str:
    return (f"{d['count']} GPU activities appear more than once (same stream, times, name and correlation): "
            "the file repeats events, so kernel counts and per-kernel totals include the repeats")


def _overlapping_kernels(d: dict[str, Any]) -> str:
    return (f"{d['count']} kernels start before the previous kernel on their stream ended: a stream runs "
            "its kernels in order, so clocks were skewed or captures merged; busy time counts the overlap once")


def _timeline_holes(d: dict[str, Any]) -> str:
    return (f"the GPU timeline has {d['count']} hole(s) of at least {d['min_ns'] / 1e9:.0f} s (longest "
            f"{float(d['longest_ns']) / 1e9:.0f} s): a clock jump or several captures in one file; steps across a "
            "hole are not steady state")


def _bubbles_not_judged(d: dict[str, Any]) -> str:
    return (f"pipeline bubbles cannot be judged on rank {d['rank']} device {d['device']}: only {d['steps']} analysed "
            f"step(s), periodicity needs at least {d['needed']}")


def _bubbles_not_judged_more(d: dict[str, Any]) -> str:
    return (f"pipeline bubbles cannot be judged on {d['pairs']} more rank/device pairs either: only "
            f"{d['fewest']}-{d['most']} analysed step(s)")


def _repeated_layers(d: dict[str, Any]) -> str:
    k, p = d["repeats"], d["kernels"]
    return (f"One forward pass with {k} repeated layers: treated as one step (its kernel sequence repeats "
            f"every {p} kernels {k} times inside the pass; a layer is not an iteration).")


def _single_range_step(d: dict[str, Any]) -> str:
    out = (f"No step markers: the single range {d['name']!r} holds {d['cover']:.0%} of the kernel launches: it is "
           "the step (one per rank).")
    if d["layers"]:
        out += " " + _repeated_layers({"repeats": d["layers"][0], "kernels": d["layers"][1]})
    return out


def _kernel_period(d: dict[str, Any]) -> str:
    desc = "; ".join(f"rank {r}: {n} periods of {p} kernels, {m:.0%} recur one period later" for r, n, p, m in d["periods"])
    return (f"No step markers: steps inferred from the repeating sequence of kernels ({desc}); kernels "
            "before the first and after the last whole period are left out. This is the longest repeating "
            "pattern the capture holds (a unit seen twice wins over a layer repeating inside it).")


def _collapsed_steps(d: dict[str, Any]) -> str:
    early = d["early"]
    why = (f"; {early:,} of {d['linked']:,} linked GPU ops start before the launch call their correlation id "
           "names, so the correlation ids do not match the launches (permuted or damaged) and a step is stretched "
           "over the ones after it" if early else ": the GPU work launched in an earlier step runs past them")
    return f"{d['count']} step(s) are 0 ns long on the GPU{why}."


# What the capture's edges held, by evidence kind (capture-boundary's evidence)
_EDGE_WHAT = {"uncaptured-work": "GPU work issued before the capture began",
              "blocking-call": "a blocking call at the capture's start waiting on earlier GPU work",
              "shutdown": "the profiler shutting down after the last step"}


def _capture_edges(d: dict[str, Any]) -> str:
    parts = ", ".join(f"{_EDGE_WHAT.get(k, k)} {v / 1e6:.2f} ms" for k, v in d["split"])
    share = d["share"]
    whole = "over 99%" if 0.995 <= share < 1 else f"{share:.0%}"  # never "100%" while some time was captured
    return (f"capture boundary: {whole} of step time lies at the capture's edges ({parts}); it is kept out of "
            "the causes' shares and the verdict, whose shares are of the remaining captured time")


def _peak_of_other_dtype(d: dict[str, Any]) -> str:
    out = f"--peak-tflops {d['tflops']:g} is the {d['gpu']}'s dense {d['other']} peak but the run is {d['dtype']}"
    if d["dense"]:
        out += f" (dense {d['dense']:g} TFLOP/s): MFU is off by {d['dense'] / d['other_tflops']:.2g}x"
    return out


# The MFU's warnings: the inputs or the timing make the figure doubtful
_MFU_WARNINGS: dict[str, Callable[[dict[str, Any]], str]] = {
    GPUS_DIFFER: lambda d: f"--gpus {d['gpus']} differs from the trace's world size {d['world']}; using --gpus",
    GRAD_ACCUM_DISAGREES: lambda d: (f"token count and step time disagree: --grad-accum {d['grad_accum']} but the "
                                     f"trace shows {d['count']:.3g} micro-batches per optimizer step"),
    TOKENS_COVER_MICRO_BATCHES: lambda d: (f"the trace shows {d['count']:.3g} micro-batches per optimizer step: the "
                                           "token count must cover all of them (and every data-parallel rank), not "
                                           "one micro-batch"),
    DP_EXCEEDS_GPUS: lambda d: f"--dp {d['dp']} exceeds the job's {d['gpus']} GPUs: the token count is too large",
    MFU_OVER_100: lambda d: (f"MFU {d['mfu']:.0%} exceeds 100%: an input is wrong (tokens per step, GPU count, "
                             "or the peak)"),
    NO_PEAK_BANDWIDTH: lambda d: "no peak bandwidth for this GPU: pass --peak-bandwidth for MBU",
    MBU_NEEDS_BYTES: lambda d: "MBU needs --bytes-per-step or --params",
    FP8_GEMMS_SEEN: lambda d: (f"the trace shows fp8 GEMMs ({d['count']} ops/kernels) but the precision is "
                               f"{d['dtype']}: against the {d['dtype']} peak MFU is inflated (fp8 doubles the dense "
                               "peak); use --dtype fp8"),
    FP8_NOT_SEEN: lambda d: "--dtype fp8, but the recorded matmuls are bf16/fp16: the fp8 peak understates MFU",
    PEAK_OF_OTHER_DTYPE: _peak_of_other_dtype,
    DEVICE_NAMES_UNRECOGNISED: lambda d: (f"some device names were not recognised ({list(d['names'])}); using "
                                          f"{d['gpu']}"),
    ALL_STEPS_FLAGGED: lambda d: "every step is flagged warmup or outlier; timing uses all steps",
    FEW_STEADY_STEPS: lambda d: (f"only {d['count']} steady step(s) timed: one step can hide a stall (checkpoint, "
                                 f"allocator, slow batch); profile at least {d['needed']}"),
    NOISY_STEPS: lambda d: f"steady step times vary (CV {d['cv']:.0%} > {d['max_cv']:.0%}): MFU is noisy",
    OPTIMIZER_STEPS_PER_PROFILER_STEP: lambda d: (f"each profiler step holds {d['count']} optimizer steps "
                                                  "(Optimizer.step# markers); MFU uses the optimizer-step period"),
    OPTIMIZER_STEP_SPANS: lambda d: (f"an optimizer step spans ~{d['profiler_steps']:.2g} profiler steps "
                                     "(Optimizer.step# markers); MFU uses the optimizer-step period"),
}


def _devices_unnamed(d: dict[str, Any]) -> str:
    why = "the trace-viewer JSON keeps no device stats" if d["viewer"] else "the xplane gives no model name"
    return f"device(s) {', '.join(map(str, d['devices']))}: {why} (pass --gpu NAME for MFU and the roofline)"


# The loaders' caveats
_LOADER_CAVEATS: dict[str, Callable[[dict[str, Any]], str]] = {
    NO_EVENTS: lambda d: "the trace holds no events",
    PACKET_CUT: lambda d: "the file ends inside a trace packet (cut short?): the packets before the cut were read",
    NO_EVENT_ARRAY: lambda d: "file ends before the event array: it holds no events",
    CUT_IN_EVENT_ARRAY: lambda d: (f"file ends inside the event array at byte {d['cut_at']:,} of the JSON text; kept the "
                                   f"{d['kept']:,} complete events before the cut"),
    GZIP_CHECK_MISMATCH: lambda d: ("the gzip's CRC or length check does not match its data: the file is damaged (a bad "
                                    "copy?) and the events loaded may be incomplete or wrong"),
    TRAILER_NOT_JSON: lambda d: "the keys after the event array are incomplete or not valid JSON",
    EVENTS_BEFORE_EPOCH: lambda d: (f"{d['count']:,} event(s) start before 2001 while the others are Unix-epoch times "
                                    "(a timestamp given twice in an event, or a damaged one): kept as they are"),
    BASE_TIME_NOT_A_TIME: lambda d: (f"baseTimeNanoseconds {d['base']} is not a time in 1..{d['max_ns']} "
                                     "ns (before 2100): relative timestamps, the epoch is unknown"),
    EPOCH_UNKNOWN: lambda d: "relative timestamps and no baseTimeNanoseconds: the epoch is unknown",
    EVENTS_REPAIRED: lambda d: f"repaired {d['count']:,} event(s) with {d['what']} (a known writer bug)",
    EVENTS_SKIPPED: lambda d: f"skipped {d['count']:,} event(s): {d['what']}",
    EVENTS_COUNTED: lambda d: f"{d['what']}: {d['count']:,} event(s)",
    PACKETS_COUNTED: lambda d: f"{d['what']}: {d['count']:,}",
    VIEWER_NOT_ROWS: lambda d: f"{d['count']:,} counter or async event(s) of the trace viewer are not rows",
    SIDE_FILE: lambda d: (f"a {d['suffix']} file lies beside the database (a writer was active?): rows only in it are "
                          "not read"),
    SESSION_TIME: lambda d: (("the trace-viewer JSON does not record" if d["viewer"] else "no Task Environment plane "
                              "records") + " the profile's start time: times are ns from the profile's start"),
    STEPS_FROM_LINE: lambda d: f"Steps are the {d['count']} events of the device's Steps line.",
    STEPS_FROM_MODULE: lambda d: (f"No step markers: steps are the {d['count']} runs of the XLA module {d['module']!r} "
                                  "(the module run most often" + (", timed on the host" if d["host"] else "")
                                  + "), each from its start to the next run's start."),
    VIEWER_DROPPED_EVENTS: lambda d: ("the trace viewer dropped events past its size limit (filteredByVisibility): the "
                                      "counts and times here cover only the events it kept; read the .xplane.pb of "
                                      "the same run"),
    TPU_NO_LAUNCHES: lambda d: ("TPU: ops are issued by the device's own program, not launched one by one by the "
                                "host, so no op links to a launch call and launch-bound is not judged"),
    NO_HOST_PLANE: lambda d: ("no host plane (/host:CPU): a device-only capture, so idle time cannot be traced to a "
                              "host cause (launches, data loading, synchronization)"),
    EPOCH_OUT_OF_RANGE: lambda d: (f"TARGET_INFO_SESSION_START_TIME.utcEpochNs {d['epoch']} is not a time in "
                                   f"1..{d['max_ns']} ns (before 2100): session time base"),
    TIME_SHIFTED_EXPORT: lambda d: "export was written with a time normalize/shift option; times are as exported",
    NO_NVTX_RANGE_NAMED: lambda d: f"no NVTX range named {d['pattern']!r}; steps will be inferred",
    STEP_NUMBER_PAST_INT64: lambda d: "a step number is past 2^63-1: steps are numbered in time order instead",
    ODD_DEVICE_IDS: lambda d: (f"{d['count']:,} GPU rows carry a deviceId outside 0..{d['label'] - 1}: shown as "
                               f"device {d['label']} (one label for all of them)"),
    ODD_DEVICE_IDS_INT32: lambda d: (f"{d['count']:,} GPU rows carry a device id outside the int32 range: shown as "
                                     "one label"),
    MONOTONIC_CLOCK: lambda d: "times are the profiled node's monotonic clock (ns); the file gives no epoch offset",
    NO_HOST_API: lambda d: ("no host API calls in this capture (kernel trace only): GPU idle time cannot be tied to "
                            "host-side causes (launch overhead, synchronization)"),
    RPD_NO_DEVICE: lambda d: ("an RPD database names no device: GPUs are shown by their gpuId without a model (pass "
                              "--gpu NAME for MFU and the roofline)"),
    RPD_JSON: lambda d: ("read from rpd2tracing's JSON: times are whole microseconds (the RPD has ns) and no device "
                         "is named; load the .rpd it was made from where you have it"),
    RANK_CLAIM_OUT_OF_RANGE: lambda d: f"distributedInfo.rank {d['value']} is outside 0..{d['max']}: ignored",
    WORLD_SIZE_OUT_OF_RANGE: lambda d: f"distributedInfo.world_size {d['value']} is outside 1..{d['max']}: ignored",
    FILE_NAME_RANK_OUT_OF_RANGE: lambda d: f"the rank {d['value']} in the file name is outside 0..{d['max']}: ignored",
    GPU_NOT_DESCRIBED: lambda d: (f"GPU {d['device']} ran the kernels but deviceProperties does not describe it: its "
                                  "model is unknown (pass --gpu NAME for MFU and the roofline)"),
    PROFILER_STEP_PAST_INT64: lambda d: ("a ProfilerStep# number is past 2^63-1: steps are numbered in time order "
                                         "instead"),
    DEVICES_NAMED_FROM_ARCH: lambda d: (f"device(s) {', '.join(map(str, d['devices']))}: the xplane gives no model "
                                        "name; named from the architecture, compute units and memory its plane "
                                        "records"),
    DEVICES_UNNAMED: _devices_unnamed,
    NEGATIVE_DURATIONS: lambda d: f"{d['count']:,} event(s) with a negative duration: made zero-length",
    AGGREGATED_EVENTS: lambda d: f"{d['count']:,} aggregated event(s) (num_occurrences, no time) left out",
    UNDEFINED_EVENT_METADATA: lambda d: f"{d['count']:,} event(s) name metadata their plane does not define: named ''",
}


# The job's alignment notes
def fmt_ms(ns: float) -> str:
    """The job section's time words (``traceread.ranks.waiting.fmt_ms``), imported when a job note is worded:
    ``info`` words a loader's notes through this module and must not import the ranks (and pandas) for it."""
    from traceread.ranks.waiting import fmt_ms as words

    return words(ns)


_JOB_NOTES: dict[str, Callable[[dict[str, Any]], str]] = {
    CLAIMS_NO_RANK: lambda d: "claims no rank, left out of the alignment",
    RANK_CLAIMED_TWICE: lambda d: (f"rank {d['rank']} is claimed by {len(d['traces'])} traces "
                                   f"({', '.join(d['traces'])}): left out of the alignment, neither replaces the other"),
    RANK_NOT_ALIGNED: lambda d: f"rank {d['rank']}: {d['method']}; its arrivals are not compared",
    ALIGNED_ENDS_DISAGREE: lambda d: (f"rank {d['rank']}: matched collectives' end times still disagree by "
                                      f"{fmt_ms(d['spread_ns'])} (robust spread) after alignment, where one collective "
                                      "ends within microseconds on every rank: the matched calls may not be the same "
                                      "collectives (no sequence number or process group recorded); its offset and "
                                      "waits are unreliable"),
}


# The what-if replay's notes
_WHATIF_NOTES: dict[str, Callable[[dict[str, Any]], str]] = {
    UNORDERED_DEPENDENCIES: lambda d: (f"{d['count']} dependencies between events recorded at the same time could not "
                                       "be ordered and were left out"),
    INFERRED_WAITS: lambda d: (f"{d['count']} cross-stream waits inferred from timing (no stream wait the trace "
                               "identifies held them)"),
    UNEXPLAINED_WAITS: lambda d: (f"{d['count']} GPU ops started {d['wait_ns'] / 1e6:,.3f} ms in all later than their "
                                  "launch and stream allow, with no recorded op to wait for (an unrecorded dependency: "
                                  "another process, work issued before the capture); the replay keeps each wait as "
                                  "measured, the dependencies-alone replay leaves it out"),
    EXTERNAL_STREAM_WAITS: lambda d: (f"{d['count']} GPU ops waited {d['wait_ns'] / 1e6:,.3f} ms in all on events "
                                      "recorded before the capture (a stream wait with no event record before it): "
                                      "external waits, kept as measured by both replays, not replay error"),
    LAUNCHES_NOT_RECORDED: lambda d: _launches_not_recorded(d['ranks'], d['kernels'], d['launched']),
}


def _launches_not_recorded(ranks: int, kernels: int, launched: int) -> str:
    one = ranks == 1
    return (f"launch-bound not predicted on {ranks:,} rank{'' if one else 's'}: the trace records the launch of "
            f"{launched:,} of {'its' if one else 'their'} {kernels:,} kernels, so the dispatch before a kernel cannot "
            f"be told from the host's other work (the fix keeps {'its' if one else 'their'} steps as recorded)")


# Why each kernel table is empty (``traceread kernels`` and the report's tables say the same)
TABLE_EMPTY_WORDS = {
    "ops": "no GPU kernels in this trace",
    "modules": ("the trace records no nn.Module hierarchy (Kineto python_function frames 'nn.Module: ...', "
                "recorded with with_stack=True; Nsight Systems exports have none)"),
    "ranges": "no annotation ranges (NVTX, record_function, ProfilerStep) in this trace",
    "copies": "no GPU copies or memsets in this trace",
    "host_api": "no CUDA/HIP runtime or driver calls in this trace",
    "collectives": "no communication kernels in this trace",
    "mem_bandwidth": "no memory-bound kernels in this trace",
}


def _bytes_unrecorded(d: dict[str, Any]) -> str:
    if not d["typed"]:
        why = ("the trace records no op input shapes with dtypes (Kineto record_shapes=True; Nsight Systems exports "
               "have none)")
    else:
        why = ("the launching op recorded no input shapes and dtypes, launched several kernels"
               + (f", or reads part of its inputs ({d['partial']} kernels of indexing/gather ops)" if d["partial"]
                  else ""))
    share = "" if d["share"] is None else f" ({d['share']:.0%} of their GPU time)"
    return f"{d['missing']} of {d['total']} memory-bound kernels{share} have no recorded bytes: {why}; not estimated"


_TABLE_NOTES: dict[str, Callable[[dict[str, Any]], str]] = {
    TABLE_EMPTY: lambda d: TABLE_EMPTY_WORDS[d["table"]],
    BYTES_UNRECORDED: _bytes_unrecorded,
    ROOFLINE_GPU_UNKNOWN: lambda d: "GPU not in the peak table: no ridge point (pass --gpu NAME)",
    ROOFLINE_NO_SHAPES: lambda d: "no recorded shapes of matmul/attention ops owning kernels (profile with "
                                  "record_shapes=True)",
}


WORDS: dict[str, Callable[[dict[str, Any]], str]] = {
    TIMING_WARMUP_EXCLUDED: lambda d: f"{d['steps']} warmup step(s) excluded from the step time",
    TIMING_OUTLIERS_EXCLUDED: lambda d: (f"{d['count']} outlier step(s) excluded (longest {d['longest_ns'] / 1e6:.1f} "
                                         f"ms vs median {d['median_ns'] / 1e6:.1f} ms): a stall, not the steady state"),
    ONE_OPTIMIZER_STEP_ASSUMED: lambda d: "no Optimizer.step# markers: assuming one optimizer step per profiler step",
    MICRO_BATCHES: lambda d: (f"the trace shows {d['count']:.3g} micro-batches per optimizer step (data-loader / "
                              "forward markers)"),
    MBU_BYTES_ESTIMATE: lambda d: (f"MBU estimates bytes per step as N x {d['bytes_per_param']} B (weights read once; "
                                   "KV cache and replicas not counted: pass --bytes-per-step to include them)"),
    GRAPH_TIME: lambda d: (f"{d['graph_ns'] / d['total_ns']:.0%} of step time runs inside CUDA graphs whose kernels "
                           "are not traced; it is counted as compute-bound busy time"),
    MEMORY_BOUND_NEXT: lambda d: (f"memory-bound kernels take {d['share']:.0%} of busy time: once the idle "
                                  "time is removed, fusion is the next lever"),
    UNCLASSIFIED_BUSY: lambda d: (f"kernels of unknown class take {d['share']:.0%} of busy time: counted as "
                                  "unclassified busy time, neither compute- nor memory-bound, and no lever is drawn "
                                  "from them (name them with [kernel_patterns] in a config file; the kernel table "
                                  "lists them)"),
    COMM_DURING_OTHER_IDLE: lambda d: (f"communication ran during {d['hidden_ns'] / d['total_ns']:.0%} of step time "
                                       "while compute was idle for another reason (the next kernel was not waiting "
                                       "for it); it is counted under that reason, not comm-bound"),
    CAPTURE_EDGES: _capture_edges,
    NOTHING_TO_ATTRIBUTE: lambda d: "no analysed steps: nothing to attribute",
    GAPS_EXCEED_IDLE: lambda d: (f"rank {d['rank']} device {d['device']}: classified gaps exceed idle time by "
                                 f"{d['excess_ns']} ns; scaled to the idle time"),
    STEPS_NVTX_RANGES: lambda d: f"Steps are the {d['count']} NVTX ranges matching {d['pattern']!r}.",
    NO_NVTX_MATCH: lambda d: f"No NVTX range matches {d['pattern']!r}; looking for other step markers.",
    STEPS_FROM_MARKER: lambda d: (f"No step markers: steps inferred from repeated {d['label']}#... calls, one per "
                                  f"training iteration ({d['count']} steps between consecutive calls; activity "
                                  "before the first and after the last call is left out)."),
    GPU_SPAN_STEP: lambda d: "No step markers: the GPU-active span of each rank is analysed as one step.",
    REPEATED_LAYERS: _repeated_layers,
    SINGLE_RANGE_STEP: _single_range_step,
    ITERATION_RANGES: lambda d: (f"No step markers: steps are the ranges numbered as iterations {d['name']!r} "
                                 f"({d['count']} or more per rank, holding {d['cover']:.0%} of the kernel launches); "
                                 "each step runs to the next one's start."),
    REPEATING_RANGE: lambda d: (f"No step markers: steps inferred from the repeating NVTX range / annotation "
                                f"{d['name']!r} ({d['count']} or more per rank, holding at least {d['min_cover']:.0%} "
                                "of the kernel launches between its first and last occurrence); each step runs to "
                                "the next occurrence's start, the last one period long."),
    KERNEL_PERIOD: _kernel_period,
    COLLAPSED_STEPS: _collapsed_steps,
    WARMUP_GIVEN: lambda d: f"The first {d['steps']} step(s) are warmup (--warmup-steps).",
    FIRST_STEP_WARMUP: lambda d: "ProfilerStep#0 is marked warmup: the profiler schedule recorded no warmup of its own.",
    OUTLIER_STEPS: lambda d: (f"{d['count']} step(s) longer than {d['factor']:g}x the median step are flagged as "
                              "outliers (kept in the attribution, left out of medians)."),
    UNENDED_MARKERS: lambda d: f"{d['count']} step marker(s) without a duration (no end recorded) are left out.",
    UNMARKED_RANKS: lambda d: (f"Rank(s) {', '.join(map(str, d['ranks']))} ran GPU work but carry no step markers; "
                               "they are left out of step analyses."),
    STRAGGLER_COMM_BOUND: _straggler_comm_bound,
    WAITING_FOR: _waiting_for,
    REPEATED_GPU_ACTIVITY: _repeated_gpu_activity,
    OVERLAPPING_KERNELS: _overlapping_kernels,
    TIMELINE_HOLES: _timeline_holes,
    BUBBLES_NOT_JUDGED: _bubbles_not_judged,
    BUBBLES_NOT_JUDGED_MORE: _bubbles_not_judged_more,
    **_LOADER_CAVEATS,
    **_MFU_WARNINGS,
    **_JOB_NOTES,
    **_WHATIF_NOTES,
    **_TABLE_NOTES,
}


def text(note: Note | str) -> str:
    """The sentence of ``note``."""
    if isinstance(note, str):
        return note
    words = WORDS[note.kind](note.fields)
    return f"{note.label}: {words}" if note.label else words


def text_or_empty(note: Note | str | None) -> str:
    """:func:`text` of ``note``, '' for None (a table with nothing to say)."""
    return "" if note is None else text(note)


def texts(notes: Iterable[Note | str]) -> list[str]:
    """The sentences of ``notes`` in order, each once: two notes whose figures differ but read the same (a share
    rounded to the same percent) are one line, as the analysis lists an equal note once."""
    return list(dict.fromkeys(text(n) for n in notes))
