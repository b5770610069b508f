"""Click options and option parsing shared by several subcommands.

``workload_options`` adds the MFU flags and ``--job FILE`` (the command receives ``workload``: a
:class:`~traceread.metrics.workload.Workload` or None); ``workload_flag_options`` hands the file and
the flags over apart, for a command that finds job files of its own (``scan``). ``thresholds`` and
``gates`` read ``--config``/``--set`` and ``--fail-on``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import click

from traceread import bounds, kernel_classes
from traceread.config import Thresholds, load_config_file, parse_set_options
from traceread.errors import UsageError
from traceread.metrics.workload import (
    DTYPES,
    MODES,
    RECOMPUTE,
    coerce_field,
    make_workload,
    read_workload_file,
)


def thresholds(config_path: str | None, set_items: tuple[str, ...]) -> Thresholds:
    """The thresholds of ``--config`` (and its ``[kernel_patterns]``, registered here) and ``--set``."""
    conf = load_config_file(config_path) if config_path else {}
    kernel_classes.register_patterns_from_config(conf.get("kernel_patterns") or {}, config_path or "--config")
    return Thresholds().with_overrides({**(conf.get("thresholds") or {}), **parse_set_options(set_items)})


def gates(items: tuple[str, ...]) -> list[tuple[str, float]]:
    """``--fail-on CLASS:PCT`` items as (class, percent)."""
    # from its home: importing traceread.analysis here would import pandas before the load (runner.prefetch)
    from traceread.vocabulary import PARTS

    out = []
    for item in items:
        cls, sep, pct = item.rpartition(":")
        if not sep:
            raise UsageError(f"--fail-on expects CLASS:PCT, got {item!r}")
        # NaN or inf would never compare true: a gate that never fires (bounds: 0..100)
        out.append((cls, bounds.percent(pct, f"--fail-on {item!r}")))
        if cls not in PARTS:
            raise UsageError(f"--fail-on: unknown class {cls!r}; choose one of {', '.join(PARTS)}")
    return out


_OPTIONS: list[tuple[str, dict[str, Any]]] = [
    ("--params", {"help": "Model parameter count N (7e9, 7B)."}),
    ("--flops-per-token", {"help": "Useful model FLOPs per token, instead of 6N (train) / 2N (inference)."}),
    ("--tokens-per-step", {"help": "Tokens per optimizer step across all data-parallel ranks."}),
    ("--global-batch", {"help": "Sequences per optimizer step across all data-parallel ranks."}),
    ("--seq-len", {"help": "Sequence length in tokens."}),
    ("--micro-batch", {"help": "Sequences per micro-batch per data-parallel rank."}),
    ("--grad-accum", {"help": "Micro-batches per optimizer step (gradient accumulation)."}),
    ("--dp", {"help": "Data-parallel degree."}),
    ("--dtype", {"type": click.Choice(DTYPES), "help": "Training/serving precision (picks the peak)."}),
    ("--recompute", {"type": click.Choice(RECOMPUTE), "help": "Activation recompute (HFU = MFU x 8/6 for full)."}),
    ("--recompute-factor", {"help": "Executed/useful FLOPs for selective recompute (no default)."}),
    ("--attention-flops", {"is_flag": True, "default": False,
                           "help": "Also report MFU including attention FLOPs (needs --layers, --hidden)."}),
    ("--layers", {"help": "Transformer layers (for --attention-flops)."}),
    ("--hidden", {"help": "Hidden size (for --attention-flops)."}),
    ("--mode", {"type": click.Choice(MODES), "help": "train (6N per token) or inference (2N, plus MBU)."}),
    ("--gpus", {"help": "Total GPUs of the job, when the trace has no world size."}),
    ("--gpu", {"help": "GPU model from the peak table (e.g. H100-SXM), overriding the trace's name."}),
    ("--peak-tflops", {"help": "Dense peak TFLOP/s per GPU for --dtype (never the sparse figure)."}),
    ("--peak-bandwidth", {"help": "Peak memory bandwidth per GPU, TB/s."}),
    ("--bytes-per-step", {"help": "Inference: bytes read from GPU memory per step (default: N x dtype size)."}),
    ("--job", {"type": click.Path(dir_okay=False), "help": "TOML file with any of these inputs."}),
]


def _param_name(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def workload_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Add the MFU flags and ``--job`` to a click command; the command receives ``workload=Workload|None``."""
    def merge(path: str | None, cli_values: dict[str, Any]) -> dict[str, Any]:
        return {"workload": make_workload(read_workload_file(path) if path else {}, cli_values)}

    return _with_job_flags(fn, merge)


def workload_flag_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Like :func:`workload_options`, but the command receives ``job_file`` (the ``--job`` path or None) and
    ``job_values`` (the flags given) apart, for commands that find job files of their own (``scan``)."""
    return _with_job_flags(fn, lambda path, cli_values: {"job_file": path, "job_values": cli_values})


def _with_job_flags(fn: Callable[..., Any], finish: Callable[[str | None, dict[str, Any]], dict[str, Any]]
                    ) -> Callable[..., Any]:
    names = [_param_name(flag) for flag, _ in _OPTIONS]

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        values = {n: kwargs.pop(n, None) for n in names}
        path = values.pop("job")
        cli_values = {k: (coerce_field(k, v, "--") if v is not None and v is not False else v)
                      for k, v in values.items()}
        kwargs.update(finish(path, cli_values))
        return fn(*args, **kwargs)

    for flag, opts in reversed(_OPTIONS):
        opts = dict(opts)
        opts.setdefault("default", None)
        wrapper = click.option(flag, _param_name(flag), **opts)(wrapper)
    return wrapper
