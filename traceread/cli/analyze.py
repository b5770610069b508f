"""``traceread analyze TRACE [TRACE...]``: the diagnosis report (Markdown), plus JSON, picture, Perfetto."""

from __future__ import annotations

import re

import click

from traceread import kernel_classes
from traceread.analysis import PARTS, Failure, analyze
from traceread.cli.output import json_option
from traceread.config import Thresholds, load_config_file, parse_set_options
from traceread.errors import EXIT_GATE, EXIT_OK, EXIT_USAGE, TraceReadError, UsageError
from traceread.job import job_options
from traceread.loaders import load
from traceread.render import write_outputs


def _thresholds(config_path: str | None, set_items: tuple[str, ...]) -> Thresholds:
    conf = load_config_file(config_path) if config_path else {}
    for cls, patterns in (conf.get("kernel_patterns") or {}).items():
        for regex in [patterns] if isinstance(patterns, str) else patterns:
            kernel_classes.register_pattern(cls, regex)
    return Thresholds().with_overrides({**(conf.get("thresholds") or {}), **parse_set_options(set_items)})


def _gates(items: tuple[str, ...]) -> list[tuple[str, float]]:
    gates = []
    for item in items:
        cls, _, pct = item.rpartition(":")
        try:
            gates.append((cls, float(pct.rstrip("%"))))
        except ValueError:
            raise UsageError(f"--fail-on expects CLASS:PCT, got {item!r}") from None
        if cls not in PARTS:
            raise UsageError(f"--fail-on: unknown class {cls!r}; choose one of {', '.join(PARTS)}")
    return gates


def _check_rank_pattern(pattern: str | None) -> None:
    if pattern is None:
        return
    from traceread.ranks.identity import compile_rank_pattern

    try:
        compile_rank_pattern(pattern)
    except (ValueError, re.error) as exc:
        raise UsageError(f"--rank-pattern: {exc}") from None


@click.command("analyze")
@click.argument("traces", nargs=-1, required=True)
@click.option("-o", "--output", "md_path", default="-", metavar="PATH", help="Markdown report file (default: stdout).")
@json_option
@click.option("--plot", "plot_path", metavar="PNG|SVG", help="Timeline picture of the median and worst steps.")
@click.option("--perfetto", "perfetto_path", metavar="PATH", help="Annotated Perfetto trace (.pftrace).")
@click.option("--perfetto-steps", type=click.Choice(["key", "all"]), default="key", show_default=True,
              help="key: the median and worst steps; all: every step.")
@click.option("--top-gaps", type=click.IntRange(min=0), default=10, show_default=True, help="Gaps listed.")
@click.option("--fail-on", multiple=True, metavar="CLASS:PCT", help="Exit 1 when CLASS takes >= PCT% of step time.")
@click.option("--set", "set_items", multiple=True, metavar="NAME=VALUE", help="Override a threshold.")
@click.option("--config", "config_path", metavar="TOML", help="Config file ([thresholds], [kernel_patterns]).")
@click.option("--warmup-steps", type=click.IntRange(min=0), default=None, help="Treat the first K steps as warmup.")
@click.option("--step-range", metavar="NAME", default=None, help="NVTX range that marks one step (nsys input).")
@click.option("--rank-pattern", metavar="REGEX", default=None,
              help="File-name rank pattern for traces without rank metadata; needs a named group (?P<rank>...).")
@job_options
def command(traces, md_path, json_path, plot_path, perfetto_path, perfetto_steps, top_gaps, fail_on,
            set_items, config_path, warmup_steps, step_range, rank_pattern, job) -> int:
    """Diagnose why GPU time is lost: dominant cause, evidence, scoreboard and what to do next."""
    cfg, gates = _thresholds(config_path, set_items), _gates(fail_on)
    _check_rank_pattern(rank_pattern)
    loaded, failures = [], []
    for path in traces:
        try:
            loaded.append(load(path, progress=True, step_range=step_range))
        except TraceReadError as exc:
            failures.append(Failure(path, exc.problem))
            click.echo(f"traceread: error: {exc}", err=True)
    if not loaded:
        return EXIT_USAGE
    try:
        result = analyze(loaded, job=job, cfg=cfg, top_gaps=top_gaps, warmup_steps=warmup_steps,
                         step_range=step_range, failures=failures, rank_pattern=rank_pattern)
    except MemoryError:  # name the input: the process-wide message cannot
        raise TraceReadError(", ".join(t.meta.path for t in loaded), "out of memory while analysing: needs more "
                             "memory than this process may use (--max-memory, or a machine with more memory)") from None
    md_out = None if (json_path == "-" and md_path == "-") else md_path
    write_outputs(result, md_out, json_path, plot_path, perfetto_path, perfetto_steps)
    if failures:
        return EXIT_USAGE
    shares = result.shares()
    tripped = [(c, p) for c, p in gates if 100 * shares[c] >= p]
    for cls, pct in tripped:
        click.echo(f"traceread: --fail-on {cls}:{pct:g} tripped: {cls} is {100 * shares[cls]:.1f}% of step time",
                   err=True)
    return EXIT_GATE if tripped else EXIT_OK
