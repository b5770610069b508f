"""What the user knows about the workload and the trace cannot say: model size, tokens, precision.

:class:`Workload` holds the MFU inputs a user gives once, on the command line (the flags of
``traceread.cli.options.workload_options``) or in a small TOML file (``--job job.toml``; keys as the
flags without dashes, at the top level or in a ``[job]`` table; every key in docs/job-file.md). Command-line flags
override the file.
Inconsistent combinations (two token counts that disagree, ``--recompute full`` with a factor,
attention FLOPs without the model shape) are a :class:`~traceread.errors.UsageError`.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

from traceread import bounds
from traceread.errors import UsageError

MODES: tuple[str, ...] = ("train", "inference")
RECOMPUTE: tuple[str, ...] = ("none", "full", "selective")
DTYPES: tuple[str, ...] = ("bf16", "fp16", "fp8", "tf32", "fp32")
FULL_RECOMPUTE_FACTOR = 8 / 6  # one extra forward (2N) on top of forward+backward (6N)

_SUFFIX = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}
_COUNT = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([kmbgt]?)\s*$", re.IGNORECASE)


def parse_count(value: Any, what: str) -> float:
    """A positive count like ``7e9``, ``7B``, ``1.3M``, ``4096``."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        out = float(value)
    else:
        m = _COUNT.match(str(value))
        if not m:
            raise UsageError(f"{what}: cannot read {value!r} as a number (e.g. 7e9 or 7B)")
        out = float(m.group(1)) * _SUFFIX[m.group(2).lower()]
    if not out > 0:
        raise UsageError(f"{what} must be positive, got {value!r}")
    # one place for every number (traceread.bounds): finite and at most 2^63-1, as the JSON holds it
    return bounds.finite(out, what, 0.0, float(bounds.INT64_MAX), lo_open=True)


def _int(value: Any, what: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):  # exact, however large: then refused
        return bounds.integer(value, what, 1, bounds.INT64_MAX)
    out = parse_count(value, what)
    if out != int(out):
        raise UsageError(f"{what} must be a whole number, got {value!r}")
    return bounds.integer(int(out), what, 1, bounds.INT64_MAX)


@dataclass(frozen=True)
class Workload:
    """MFU inputs. Counts are plain numbers; ``peak_bandwidth`` is TB/s, ``peak_tflops`` TFLOP/s."""

    params: float | None = None  # parameter count N
    flops_per_token: float | None = None  # useful model FLOPs per token (instead of 6N / 2N)
    tokens_per_step: int | None = None  # tokens per optimizer step, all data-parallel ranks
    global_batch: int | None = None  # sequences per optimizer step, all data-parallel ranks
    seq_len: int | None = None
    micro_batch: int | None = None  # sequences per micro-batch per data-parallel rank
    grad_accum: int | None = None  # micro-batches per optimizer step
    dp: int | None = None  # data-parallel degree
    dtype: str | None = None  # bf16, fp16, fp8, tf32, fp32
    recompute: str | None = None  # none, full, selective
    recompute_factor: float | None = None  # executed / useful FLOPs for selective schemes
    attention_flops: bool = False  # also report MFU with attention FLOPs (PaLM convention)
    layers: int | None = None
    hidden: int | None = None
    mode: str = "train"  # train or inference
    gpus: int | None = None  # total GPUs of the job when the trace does not say
    gpu: str | None = None  # peak-table key or device name, overriding the trace's
    peak_tflops: float | None = None
    peak_bandwidth: float | None = None  # TB/s
    bytes_per_step: float | None = None  # inference: bytes read from HBM per step (all GPUs)

    def __post_init__(self) -> None:
        self.validate()

    # --- checks -----------------------------------------------------------------------------------
    def validate(self) -> None:
        """Raise UsageError on an impossible or inconsistent combination."""
        for name in sorted(_INT_FIELDS | _FLOAT_FIELDS):  # a Workload built directly (the API) as well
            value = getattr(self, name)
            if value is not None:
                coerce_field(name, value, "--")
        if self.mode not in MODES:
            raise UsageError(f"--mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.dtype is not None and self.dtype not in DTYPES:
            raise UsageError(f"--dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}")
        if self.recompute is not None and self.recompute not in RECOMPUTE:
            raise UsageError(f"--recompute must be one of {', '.join(RECOMPUTE)}, got {self.recompute!r}")
        if self.params is not None and self.flops_per_token is not None:
            raise UsageError("give --params or --flops-per-token, not both")
        if self.recompute_factor is not None:
            if self.recompute == "full":
                raise UsageError("--recompute full fixes the factor at 8/6; drop --recompute-factor "
                                 "or use --recompute selective")
            if self.recompute == "none":
                raise UsageError("--recompute none contradicts --recompute-factor")
            if self.recompute_factor < 1:
                raise UsageError("--recompute-factor is executed/useful FLOPs and cannot be below 1")
        if self.recompute == "selective" and self.recompute_factor is None:
            raise UsageError("--recompute selective needs --recompute-factor F (executed/useful FLOPs); "
                             "it has no default")
        if self.mode == "inference" and self.recompute not in (None, "none"):
            raise UsageError("recompute is a training setting; drop it with --mode inference")
        if self.attention_flops and None in (self.layers, self.hidden, self.seq_len):
            raise UsageError("--attention-flops needs --layers, --hidden and --seq-len")
        if self.gpus is not None and self.dp is not None and self.dp > self.gpus:
            raise UsageError(f"--dp {self.dp} exceeds --gpus {self.gpus}")
        self.tokens()  # raises on disagreeing token counts

    def tokens(self) -> tuple[int, str] | None:
        """Tokens per optimizer step and how they were obtained, or None when not given."""
        found: list[tuple[int, str]] = []
        if self.tokens_per_step is not None:
            found.append((self.tokens_per_step, f"--tokens-per-step {self.tokens_per_step}"))
        parts = (self.micro_batch, self.grad_accum, self.dp)
        if any(p is not None for p in parts) and not all(p is not None for p in parts):
            raise UsageError("--micro-batch, --grad-accum and --dp go together (tokens per optimizer "
                             "step = micro-batch x grad-accum x dp x seq-len)")
        mb, ga, dp = parts
        if mb is not None and ga is not None and dp is not None:
            if self.global_batch is not None and self.global_batch != mb * ga * dp:
                raise UsageError(f"--global-batch {self.global_batch} != --micro-batch {mb} x "
                                 f"--grad-accum {ga} x --dp {dp} = {mb * ga * dp}")
            if self.seq_len is not None:
                how = f"micro-batch {mb} x grad-accum {ga} x dp {dp} x seq-len {self.seq_len}"
                found.append((bounds.product([mb, ga, dp, self.seq_len], how), how))
        if self.global_batch is not None and self.seq_len is not None:
            how = f"global-batch {self.global_batch} x seq-len {self.seq_len}"
            found.append((bounds.product([self.global_batch, self.seq_len], how), how))
        if (self.global_batch is not None or all(p is not None for p in parts)) and self.seq_len is None \
                and self.tokens_per_step is None:
            raise UsageError("a batch size needs --seq-len to give tokens per optimizer step")
        values = {v for v, _ in found}
        if len(values) > 1:
            raise UsageError("token counts disagree: " + "; ".join(f"{how} = {v}" for v, how in found))
        return found[0] if found else None

    # --- derived ----------------------------------------------------------------------------------
    def flops_per_token_model(self) -> tuple[float, str] | None:
        """Useful model FLOPs per token (6N training, 2N inference) and the formula, or None."""
        if self.flops_per_token is not None:
            return self.flops_per_token, f"--flops-per-token {self.flops_per_token:.4g}"
        if self.params is None:
            return None
        k = 6 if self.mode == "train" else 2
        return k * self.params, f"{k} x N (N = {self.params:.4g} parameters)"

    def attention_flops_per_token(self) -> float | None:
        """Attention score/context FLOPs per token, PaLM convention: 12·L·d·T training, 4·L·d·T forward."""
        if not self.attention_flops:
            return None
        k = 12 if self.mode == "train" else 4
        return float(k * self.layers * self.hidden * self.seq_len)  # type: ignore[operator]  # validate() demands all three with attention_flops

    def recompute_multiplier(self) -> tuple[float, str]:
        """Executed / useful FLOPs, and why."""
        if self.recompute == "full":
            return FULL_RECOMPUTE_FACTOR, "full recompute: one extra forward, 8N/6N"
        if self.recompute_factor is not None:
            return self.recompute_factor, f"--recompute-factor {self.recompute_factor:g}"
        return 1.0, "no recompute"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def is_empty(self) -> bool:
        return self == Workload()


# --- TOML and flags ------------------------------------------------------------------------------
_FIELDS = {f.name: f for f in dataclasses.fields(Workload)}
_INT_FIELDS = {"tokens_per_step", "global_batch", "seq_len", "micro_batch", "grad_accum", "dp", "layers",
               "hidden", "gpus"}
_FLOAT_FIELDS = {"params", "flops_per_token", "recompute_factor", "peak_tflops", "peak_bandwidth",
                 "bytes_per_step"}


def coerce_field(key: str, value: Any, where: str) -> Any:
    """One input's value as its field holds it; ``where`` prefixes the name in errors (``--``, a file)."""
    what = f"{where}{key.replace('_', '-')}"
    if key in _INT_FIELDS:
        return _int(value, what)
    if key in _FLOAT_FIELDS:
        return parse_count(value, what)
    if key == "attention_flops":
        if not isinstance(value, bool):
            raise UsageError(f"{what} must be true or false")
        return value
    return str(value).lower() if key in ("mode", "dtype", "recompute") else str(value)


def read_workload_file(path: str) -> dict[str, Any]:
    """Workload inputs from a TOML file: top-level keys or a ``[job]`` table, named like the flags."""
    from traceread.config import load_config_file

    raw = load_config_file(path)
    table = raw.get("job", raw) if isinstance(raw.get("job"), dict) else raw
    out: dict[str, Any] = {}
    for key, value in table.items():
        name = key.replace("-", "_")
        if name not in _FIELDS:
            raise UsageError(f"{path}: unknown job key {key!r}; known: "
                             f"{', '.join(k.replace('_', '-') for k in _FIELDS)}")
        out[name] = coerce_field(name, value, f"{path}: ")
    return out


def make_workload(file_values: dict[str, Any], cli_values: dict[str, Any]) -> Workload | None:
    """A Workload from a job file's values overridden by command-line values; None when both are empty."""
    merged = dict(file_values)
    merged.update({k: v for k, v in cli_values.items() if v is not None and v is not False})
    if not merged:
        return None
    return Workload(**merged)

