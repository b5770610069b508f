"""A note as data: what the analysis found worth a line of the method notes, worded only by the renderers.

``Note(kind, data, label)``: ``kind`` names the finding, ``data`` its figures as (name, value) pairs in order
(hashable, so equal notes are listed once), ``label`` the input it is about (its file name, shown before the
words) or "". ``traceread.render.notes`` words each kind; a note the analysis has no kind for yet travels as
its sentence (a ``str``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# The kinds the analysis makes (its job block), with their data:
# the comm-bound time on a job's other ranks that is waiting for a straggler: job, rank, cause, waiting_ns
STRAGGLER_COMM_BOUND = "straggler-comm-bound"
# how much of the other ranks' largest idle class is waiting for one rank or stage: idle_class, share, job,
# waits_on (rank | stage), who (its rank or stage)
WAITING_FOR = "waiting-for"
# The frame's sanity checks (traceread.frame.sanity):
# GPU activities the file holds more than once: count
REPEATED_GPU_ACTIVITY = "repeated-gpu-activity"
# compute kernels that start before the previous kernel on their stream ended: count
OVERLAPPING_KERNELS = "overlapping-kernels"
# holes in the GPU timeline of at least clock_jump_min_ns: count, min_ns, longest_ns
TIMELINE_HOLES = "timeline-holes"
# The steps (traceread.engine.steps, traceread.engine.step_inference):
# --step-range matched: count (ranges), pattern
STEPS_NVTX_RANGES = "steps-nvtx-ranges"
# --step-range matched nothing: pattern
NO_NVTX_MATCH = "no-nvtx-match"
# steps between repeated calls of a per-iteration marker: label (the call's name), count (steps)
STEPS_FROM_MARKER = "steps-from-marker"
# no step found: each rank's GPU-active span is one step
GPU_SPAN_STEP = "gpu-span-step"
# one forward pass whose kernel sequence repeats per layer: repeats, kernels (per repeat)
REPEATED_LAYERS = "repeated-layers"
# one range spanning the work is the step: name, cover (its share of the launches), layers (repeats, kernels) or None
SINGLE_RANGE_STEP = "single-range-step"
# ranges numbered as iterations are the steps: name, count (per rank, at least), cover
ITERATION_RANGES = "iteration-ranges"
# a repeating NVTX range / annotation is the step: name, count (per rank, at least), min_cover
REPEATING_RANGE = "repeating-range"
# the repeating kernel sequence is the step: periods ((rank, periods, kernels per period, recurring share), ...)
KERNEL_PERIOD = "kernel-period"
# steps with no GPU time left: count, early (linked ops starting before their launch), linked (linked ops)
COLLAPSED_STEPS = "collapsed-steps"
# the first steps are warmup (--warmup-steps): steps
WARMUP_GIVEN = "warmup-given"
# ProfilerStep#0 marked warmup (no warmup recorded by the schedule)
FIRST_STEP_WARMUP = "first-step-warmup"
# steps flagged as outliers: count, factor
OUTLIER_STEPS = "outlier-steps"
# step markers without a duration, left out: count
UNENDED_MARKERS = "unended-markers"
# ranks with GPU work but no step markers: ranks
UNMARKED_RANKS = "unmarked-ranks"
# The attribution (traceread.attribution):
# step time inside CUDA graphs whose kernels are not traced: graph_ns, total_ns
GRAPH_TIME = "graph-time"
# memory-bound kernels' share of busy time when an idle cause dominates: share
MEMORY_BOUND_NEXT = "memory-bound-next"
# kernels of unknown class: share (of busy time)
UNCLASSIFIED_BUSY = "unclassified-busy"
# communication during idle gaps given to another cause: hidden_ns, total_ns
COMM_DURING_OTHER_IDLE = "comm-during-other-idle"
# step time at the capture's edges: share, split ((evidence kind, ns), ...)
CAPTURE_EDGES = "capture-edges"
# no analysed steps
NOTHING_TO_ATTRIBUTE = "nothing-to-attribute"
# a unit's classified gaps sum past its idle time: rank, device, excess_ns
GAPS_EXCEED_IDLE = "gaps-exceed-idle"
# The MFU's step timing (traceread.metrics.steptime, traceread.metrics.mfu):
# warmup steps left out of the step time: steps
TIMING_WARMUP_EXCLUDED = "timing-warmup-excluded"
# outlier steps left out of the step time: count, longest_ns, median_ns
TIMING_OUTLIERS_EXCLUDED = "timing-outliers-excluded"
# no Optimizer.step# markers: one optimizer step per profiler step assumed
ONE_OPTIMIZER_STEP_ASSUMED = "one-optimizer-step-assumed"
# the trace's micro-batches per optimizer step: count
MICRO_BATCHES = "micro-batches"
# how MBU estimates bytes per step from the parameters: bytes_per_param
MBU_BYTES_ESTIMATE = "mbu-bytes-estimate"
# The MFU's warnings (traceread.metrics.mfu, traceread.metrics.steptime, traceread.metrics.peaks):
# --gpus differs from the trace's world size: gpus, world
GPUS_DIFFER = "gpus-differ"
# --grad-accum differs from the micro-batches the trace shows: grad_accum, count
GRAD_ACCUM_DISAGREES = "grad-accum-disagrees"
# micro-batches per optimizer step seen, no --grad-accum: count
TOKENS_COVER_MICRO_BATCHES = "tokens-cover-micro-batches"
# --dp exceeds the job's GPUs: dp, gpus
DP_EXCEEDS_GPUS = "dp-exceeds-gpus"
# MFU past 100%: mfu
MFU_OVER_100 = "mfu-over-100"
# MBU without a peak bandwidth
NO_PEAK_BANDWIDTH = "no-peak-bandwidth"
# MBU without --bytes-per-step or --params
MBU_NEEDS_BYTES = "mbu-needs-bytes"
# fp8 GEMMs seen but the precision is another: dtype, count
FP8_GEMMS_SEEN = "fp8-gemms-seen"
# --dtype fp8 while the matmuls are bf16/fp16
FP8_NOT_SEEN = "fp8-not-seen"
# --peak-tflops is another precision's dense peak: tflops, gpu, other, dtype, dense (TFLOP/s or None), factor
PEAK_OF_OTHER_DTYPE = "peak-of-other-dtype"
# device names not in the peak table: names (as written), gpu (the row used)
DEVICE_NAMES_UNRECOGNISED = "device-names-unrecognised"
# every step is warmup or outlier: all steps timed
ALL_STEPS_FLAGGED = "all-steps-flagged"
# fewer steady steps than wanted: count, needed
FEW_STEADY_STEPS = "few-steady-steps"
# steady step times vary: cv, max_cv
NOISY_STEPS = "noisy-steps"
# each profiler step holds several optimizer steps: count
OPTIMIZER_STEPS_PER_PROFILER_STEP = "optimizer-steps-per-profiler-step"
# an optimizer step spans several profiler steps: profiler_steps
OPTIMIZER_STEP_SPANS = "optimizer-step-spans"
# The loaders' caveats (a Trace's meta.warnings; a caveat no kind covers yet is its sentence):
# the trace holds no events
NO_EVENTS = "no-events"
# a Perfetto file cut inside a packet
PACKET_CUT = "packet-cut"
# Kineto JSON read front to back (traceread.loaders.kineto):
# the file ends before its event array
NO_EVENT_ARRAY = "no-event-array"
# the file ends inside the event array: cut_at (bytes of JSON text), kept (complete events before the cut)
CUT_IN_EVENT_ARRAY = "cut-in-event-array"
# the gzip's CRC or length check does not match its data
GZIP_CHECK_MISMATCH = "gzip-check-mismatch"
# the keys after the event array are incomplete or not valid JSON
TRAILER_NOT_JSON = "trailer-not-json"
# some events start before 2001 while the others are Unix-epoch times: count
EVENTS_BEFORE_EPOCH = "events-before-epoch"
# baseTimeNanoseconds is not a time: base (as shown: at most 40 characters), max_ns
BASE_TIME_NOT_A_TIME = "base-time-not-a-time"
# relative timestamps and no baseTimeNanoseconds
EPOCH_UNKNOWN = "epoch-unknown"
# events repaired (a known writer bug): what, count
EVENTS_REPAIRED = "events-repaired"
# events skipped: what (why), count
EVENTS_SKIPPED = "events-skipped"
# events with a named problem: what, count
EVENTS_COUNTED = "events-counted"
# Perfetto packets or fields of a named kind the reader left out: what, count
PACKETS_COUNTED = "packets-counted"
# the trace-viewer JSON's counter or async events, which are not rows: count
VIEWER_NOT_ROWS = "viewer-not-rows"
# a -wal or -journal file beside a database: suffix
SIDE_FILE = "side-file"
# an xplane whose profile start time is not recorded: viewer (the trace-viewer JSON, else an XSpace)
SESSION_TIME = "session-time"
# xplane steps: from the device's Steps line (count); from the runs of one XLA module (count, module,
# host: timed on the host threads)
STEPS_FROM_LINE = "steps-from-line"
STEPS_FROM_MODULE = "steps-from-module"
# the trace viewer dropped events past its size limit (XPlane JSON)
VIEWER_DROPPED_EVENTS = "viewer-dropped-events"
# TPU ops are not launched by the host
TPU_NO_LAUNCHES = "tpu-no-launches"
# no host plane in an XPlane capture
NO_HOST_PLANE = "no-host-plane"
# an nsys session start time that is not a time: epoch, max_ns
EPOCH_OUT_OF_RANGE = "epoch-out-of-range"
# an nsys export with a time normalize/shift option
TIME_SHIFTED_EXPORT = "time-shifted-export"
# --step-range matched no NVTX range at load: pattern
NO_NVTX_RANGE_NAMED = "no-nvtx-range-named"
# an NVTX step number past int64
STEP_NUMBER_PAST_INT64 = "step-number-past-int64"
# nsys GPU rows with a deviceId past the labels: count, label (the one label they share)
ODD_DEVICE_IDS = "odd-device-ids"
# rocprof GPU rows with a device id past int32: count
ODD_DEVICE_IDS_INT32 = "odd-device-ids-int32"
# rocprofv3 JSON times on the node's monotonic clock
MONOTONIC_CLOCK = "monotonic-clock"
# a rocprofv3 capture without host API calls
NO_HOST_API = "no-host-api"
# an RPD database naming no device
RPD_NO_DEVICE = "rpd-no-device"
# rpd2tracing's JSON (whole microseconds, no device)
RPD_JSON = "rpd-json"
# distributedInfo.rank outside 0..max: value (as shown), max
RANK_CLAIM_OUT_OF_RANGE = "rank-claim-out-of-range"
# distributedInfo.world_size outside 1..max: value (as shown), max
WORLD_SIZE_OUT_OF_RANGE = "world-size-out-of-range"
# a rank in the file name outside 0..max: value (as shown), max
FILE_NAME_RANK_OUT_OF_RANGE = "file-name-rank-out-of-range"
# a GPU that ran kernels but deviceProperties does not describe: device
GPU_NOT_DESCRIBED = "gpu-not-described"
# a ProfilerStep# number past int64
PROFILER_STEP_PAST_INT64 = "profiler-step-past-int64"
# xplane devices named from their architecture: devices
DEVICES_NAMED_FROM_ARCH = "devices-named-from-arch"
# xplane devices without a model name: devices, viewer (the trace-viewer JSON, which keeps no device stats)
DEVICES_UNNAMED = "devices-unnamed"
# xplane events with a negative duration, made zero-length: count
NEGATIVE_DURATIONS = "negative-durations"
# xplane aggregated events (no time) left out: count
AGGREGATED_EVENTS = "aggregated-events"
# xplane events naming metadata their plane does not define: count
UNDEFINED_EVENT_METADATA = "undefined-event-metadata"
# The job's alignment (traceread.ranks.job):
# a trace that claims no rank: (its label is the note's label)
CLAIMS_NO_RANK = "claims-no-rank"
# a rank claimed by several traces: rank, traces (their labels)
RANK_CLAIMED_TWICE = "rank-claimed-twice"
# a rank whose clock could not be aligned: rank, method (how the alignment failed)
RANK_NOT_ALIGNED = "rank-not-aligned"
# a rank whose matched collectives still disagree after alignment: rank, spread_ns
ALIGNED_ENDS_DISAGREE = "aligned-ends-disagree"
# The what-if replay's notes (traceread.whatif):
# same-time dependencies the replay could not order: count
UNORDERED_DEPENDENCIES = "unordered-dependencies"
# cross-stream waits inferred from timing: count
INFERRED_WAITS = "inferred-waits"
# GPU ops that waited with no recorded op to wait for: count, wait_ns
UNEXPLAINED_WAITS = "unexplained-waits"
# GPU ops held by a stream wait on an event recorded before the capture (external waits): count, wait_ns
EXTERNAL_STREAM_WAITS = "external-stream-waits"
# ranks whose kernels' launches are mostly not recorded, where the launch-bound fix is not predicted: ranks,
# kernels, launched (of those kernels, with a recorded launch)
LAUNCHES_NOT_RECORDED = "launches-not-recorded"
# The pipeline-bubble rule (traceread.rules.pipeline_bubble):
# a rank/device with too few analysed steps to judge periodicity: rank, device, steps, needed
BUBBLES_NOT_JUDGED = "bubbles-not-judged"
# the rank/device pairs past the ones named, in one line: pairs, fewest, most (analysed steps)
BUBBLES_NOT_JUDGED_MORE = "bubbles-not-judged-more"
# The kernel tables (traceread.metrics.tables, traceread.metrics.compact, traceread.metrics.roofline):
# a table with no row: table (its name in metrics.tables.TABLES)
TABLE_EMPTY = "table-empty"
# memory-bound kernels without recorded bytes: missing, total (memory-bound kernels), share (of their GPU time;
# None when they last 0 ns), typed (some op recorded dtypes), partial (kernels of indexing/gather ops)
BYTES_UNRECORDED = "bytes-unrecorded"
# the GPU is not in the peak table: no ridge point
ROOFLINE_GPU_UNKNOWN = "roofline-gpu-unknown"
# no recorded shapes of matmul/attention ops owning kernels
ROOFLINE_NO_SHAPES = "roofline-no-shapes"


@dataclass(frozen=True)
class Note:
    """A finding of ``kind`` with its figures (``data``); :meth:`of` takes them as keywords."""

    kind: str
    data: tuple[tuple[str, Any], ...] = ()
    label: str = ""  # the input the note is about, shown before its words ("" for the whole analysis)

    @classmethod
    def of(cls, kind: str, /, **data: Any) -> Note:
        return cls(kind, tuple(data.items()))

    def under(self, label: str) -> Note:
        """This note about the input ``label`` (its file name)."""
        return Note(self.kind, self.data, label)

    @property
    def fields(self) -> dict[str, Any]:
        """``data`` as a dict (name -> value)."""
        return dict(self.data)
