"""``traceread analyze TRACE [TRACE...]``: the diagnosis report (Markdown), plus JSON, picture, Perfetto."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable

import click

from traceread.cli.options import gates, thresholds, workload_options
from traceread.cli.output import json_option, output_path, reader_gone
from traceread.errors import EXIT_GATE, EXIT_OK, EXIT_USAGE, TraceReadError, UsageError
from traceread.loaders import expand_paths, left_out_notes
from traceread.printable import printable
from traceread.runner import load
from traceread.runner.prefetch import also_import
from traceread.trace import shown_path


def _check_rank_pattern(pattern: str | None) -> None:
    if pattern is None:
        return
    from traceread.ranks.identity import compile_rank_pattern

    try:
        compile_rank_pattern(pattern)
    except (ValueError, re.error) as exc:
        raise UsageError(f"--rank-pattern: {exc}") from None


def _expand(traces: tuple[str, ...], left_out: list[tuple[str, str]]) -> list[str]:
    """The trace files of the inputs: a directory stands for every trace under it (as ``diff DIR``);
    what a folder held but could not be read is added to ``left_out`` and said on standard error."""
    for path in traces:
        if not os.path.isdir(path):
            continue
        # Imported only for a folder: the diff package is not light (memory-capped runs feel it).
        from traceread.diff.scan_sides import is_scan_output

        if is_scan_output(path):
            raise UsageError(f"{path}: a `traceread scan` output directory; its reports are under traces/ "
                             "(diff two scan outputs with `traceread diff`)")
    try:
        return expand_paths(traces, left_out)
    except TraceReadError as exc:
        raise UsageError(str(exc)) from None
    finally:
        for path, why in left_out:
            click.echo(f"traceread: note: {printable(shown_path(path))}: left out: {printable(why)}", err=True)


@click.command("analyze")
@click.argument("traces", nargs=-1, required=True)  # files, or directories of them
@click.option("-o", "--output", "md_path", default="-", metavar="PATH", callback=output_path, help="Markdown report file (default: stdout).")
@json_option
@click.option("--plot", "plot_path", metavar="PATH", callback=output_path,
              help="Timeline picture of the median and worst steps (.png, .svg, .pdf, .jpg).")
@click.option("--ranks", "plot_ranks", metavar="all|LIST", default=None,
              help="Ranks --plot draws: all (default: every rank of a job, one row group each, stragglers "
                   "marked) or a list such as 0,3,5-7; one rank: its detailed timeline.")
@click.option("--perfetto", "perfetto_path", metavar="PATH", callback=output_path, help="Annotated Perfetto trace (.pftrace).")
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
@click.option("-v", "--verbose", is_flag=True,
              help="End the Markdown report with every threshold in force (the JSON always has them).")
@workload_options
def command(traces, md_path, json_path, plot_path, plot_ranks, perfetto_path, perfetto_steps, top_gaps, fail_on,
            set_items, config_path, warmup_steps, step_range, rank_pattern, verbose, workload) -> int:
    """Diagnose why GPU time is lost: dominant cause, evidence, scoreboard and what to do next.

    TRACES: trace files, or directories (every trace under one, as `traceread diff DIR` reads it)."""
    cfg, fail_gates = thresholds(config_path, set_items), gates(fail_on)
    _check_rank_pattern(rank_pattern)
    ranks: tuple[int, ...] | None = None
    if plot_path:
        from traceread.render.plot import plot_format
        from traceread.render.plot_job import parse_ranks

        plot_format(plot_path)
        ranks = parse_ranks(plot_ranks)
    elif plot_ranks is not None:
        raise UsageError("--ranks chooses the ranks of the --plot picture: give --plot PATH too")
    # What runs after the load, imported beside the first trace's decode (traceread.runner.prefetch).
    also_import("traceread.analysis", "traceread.engine.steps", "traceread.engine.gaps", "traceread.rules", "traceread.attribution",
                "traceread.metrics.kernels", "traceread.metrics.collectives", "traceread.whatif", "traceread.render",
                *(["traceread.render.jsonout"] if json_path else []), *(["traceread.render.markdown"] if md_path else []))
    # Freed heap pages are reused from the start (traceread.runner.heap.reuse_freed_pages): the analysis then
    # takes the pages the load's decode buffers freed, instead of faulting in fresh ones (which the
    # kernel must zero first, on the analysis' time). The
    # analysis' peak is above the load's, so keeping the load's freed pages does not raise it.
    from traceread.runner import analysis_heap

    analysis_heap()
    loaded, unreadable = [], []
    left_out: list[tuple[str, str]] = []  # what the folders held but could not be read
    for path in _expand(traces, left_out):
        try:
            loaded.append(load(path, progress=True, step_range=step_range))
        except TraceReadError as exc:
            unreadable.append((path, exc.problem))
            click.echo(f"traceread: error: {printable(str(exc))}", err=True)
    if not loaded:
        return EXIT_USAGE
    # Imported once the traces are loaded: pandas, which these import, was imported beside the
    # first trace's decode (traceread.runner.prefetch) instead of before it.
    from traceread.analysis import Analysis, Failure
    from traceread.render import check_outputs, write_json, write_outputs
    from traceread.runner import analyze
    from traceread.runner.write import replaced_released

    def with_left_out(a: Analysis) -> Analysis:  # the report says what its folders held but it could not read
        return dataclasses.replace(a, notes=a.notes + left_out_notes(left_out)) if left_out else a

    md_out = None if (json_path == "-" and md_path == "-") else md_path
    check_outputs(md_out, json_path, plot_path, perfetto_path)  # before any is written
    failures = [Failure(path, problem) for path, problem in unreadable]
    # A report on standard output whose reader went away (`| head`) ends there; the analysis and its
    # --fail-on gates do not: the exit code still says whether a gate tripped
    gone: list[BrokenPipeError] = []
    # (the files the reports replace are let go on a thread while the next output is made)
    with replaced_released() as release:

        def early(found: Analysis, whole: Callable[[], Analysis]) -> None:
            # The JSON report first, as always: its tables are written while the replay finishes
            if json_path:
                try:
                    write_json(with_left_out(found), json_path, lambda: with_left_out(whole()), release)
                except BrokenPipeError as exc:
                    gone.append(exc)

        try:
            result = analyze(loaded, workload=workload, cfg=cfg, top_gaps=top_gaps, warmup_steps=warmup_steps,
                             step_range=step_range, failures=failures, rank_pattern=rank_pattern, early=early)
        except MemoryError:  # name the input: the process-wide message cannot
            raise TraceReadError(", ".join(t.meta.path for t in loaded), "out of memory while analysing: needs "
                                 "more memory than this process may use (--max-memory, or a machine with more "
                                 "memory)") from None
        result = with_left_out(result)  # (exit 0: other inputs were read)
        try:  # (the Markdown on its own: a reader that goes away does not keep the picture from its file)
            write_outputs(result, md_out, verbose=verbose, release=release)
        except BrokenPipeError as exc:
            gone.append(exc)
        write_outputs(result, None, None, plot_path, perfetto_path, perfetto_steps, plot_ranks=ranks)
    if gone:
        reader_gone()
    if failures:
        return EXIT_USAGE
    shares = result.shares()
    tripped = [(c, p) for c, p in fail_gates if 100 * shares[c] >= p]
    for cls, pct in tripped:
        click.echo(f"traceread: --fail-on {cls}:{pct:g} tripped: {cls} is {100 * shares[cls]:.1f}% of step time",
                   err=True)
    return EXIT_GATE if tripped else EXIT_OK
