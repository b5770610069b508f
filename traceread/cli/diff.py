"""``traceread diff BEFORE AFTER``: verdict, step-time test, attribution shift, kernel and host-op changes."""

from __future__ import annotations

from collections.abc import Callable
from typing import IO

import click

from traceread.atomic import atomic_open
from traceread.cli.options import thresholds
from traceread.cli.output import json_option, output_path
from traceread.errors import EXIT_GATE, EXIT_OK, EXIT_USAGE, TraceReadError, UsageError
from traceread.metrics.workload import Workload, make_workload, read_workload_file
from traceread.printable import printable
from traceread.trace import shown_path


def _workload(path: str | None) -> Workload | None:
    return make_workload(read_workload_file(path), {}) if path else None


@click.command("diff")
@click.argument("before")
@click.argument("after")
@click.option("-o", "--output", "md_path", default="-", metavar="PATH", callback=output_path, help="Markdown diff file (default: stdout).")
@json_option
@click.option("--job", "job_path", metavar="TOML", help="Job inputs (tokens per step, model size) for both sides.")
@click.option("--job-before", "job_before_path", metavar="TOML", help="Job inputs of the before side.")
@click.option("--job-after", "job_after_path", metavar="TOML", help="Job inputs of the after side.")
@click.option("--fail-on-regression", "fail_pct", type=float, default=None, metavar="PCT",
              help="Exit 1 when step time (tokens/s when known) got significantly worse by >= PCT%, "
                   "or the diff is inconclusive or not comparable.")
@click.option("--set", "set_items", multiple=True, metavar="NAME=VALUE", help="Override a threshold.")
@click.option("--config", "config_path", metavar="TOML", help="Config file ([thresholds], [kernel_patterns]).")
@click.option("--warmup-steps", type=click.IntRange(min=0), default=None, help="Treat the first K steps as warmup.")
@click.option("--step-range", metavar="NAME", default=None, help="NVTX range that marks one step (nsys input).")
@click.option("--fix", "fix", metavar="CAUSE", default=None,
              help="The fix that was made (data-starved, launch-bound, ...): the verdict says whether the after run "
                   "delivered what the before side's replay predicted for it (docs/whatif.md).")
def command(before, after, md_path, json_path, job_path, job_before_path, job_after_path, fail_pct, set_items,
            config_path, warmup_steps, step_range, fix) -> int:
    """Compare two runs: did the fix move the step time (or tokens/s), and where did the bottleneck go?"""
    from traceread.diff import diff
    from traceread.diff.inputs import load_side
    from traceread.diff.render import render_json, render_markdown

    if fail_pct is not None:  # NaN never compares true: a gate that never fires (traceread.bounds)
        from traceread import bounds

        fail_pct = bounds.finite(fail_pct, "--fail-on-regression", 0.0)
    if job_path and (job_before_path or job_after_path):
        raise UsageError("give --job for both sides, or --job-before/--job-after, not both")
    cfg = thresholds(config_path, set_items)
    if fix is not None:
        from traceread.whatif import FIX_CAUSES

        if fix not in FIX_CAUSES:
            raise UsageError(f"unknown --fix {printable(fix)!r}; known: {', '.join(FIX_CAUSES)}")
    job_b = _workload(job_before_path or job_path)
    job_a = _workload(job_after_path or job_path)
    from traceread.diff.scan_sides import is_scan_output

    if is_scan_output(before) and is_scan_output(after):
        return _scans(before, after, job_b, job_a, cfg, md_path, json_path, fail_pct, fix)
    sides = []
    left_out: list[tuple[str, str]] = []  # what the folders held but could not be read
    for path in (before, after):
        try:
            sides.append(load_side(path, step_range, left_out))
        except TraceReadError as exc:
            click.echo(f"traceread: error: {printable(str(exc))}", err=True)
    for path, why in left_out:  # what a folder held but could not be read: said, and noted in the report
        click.echo(f"traceread: note: {printable(shown_path(path))}: left out: {printable(why)}", err=True)
    if len(sides) < 2:
        return EXIT_USAGE
    result = diff(sides[0], sides[1], job_b, job_a, cfg, warmup_steps, step_range, fix)
    if left_out:
        import dataclasses

        from traceread.loaders import left_out_notes

        result = dataclasses.replace(result, notes=result.notes + left_out_notes(left_out))
    if json_path:
        with atomic_open(json_path, "wb") as fh:
            render_json(result, fh)
    if md_path and not (json_path == "-" and md_path == "-"):
        _write_markdown(md_path, lambda fh: render_markdown(result, fh))
    return _gate([("", result)], fail_pct)


def _write_markdown(md_path: str, render: Callable[[IO[str]], None]) -> None:
    """The Markdown report to its file, or to the terminal without Markdown's backslash escapes."""
    if md_path != "-":
        with atomic_open(md_path, "w") as fh:
            render(fh)
        return
    import io

    from traceread.render.names import terminal_text

    buf = io.StringIO()
    render(buf)
    click.echo(printable(terminal_text(buf.getvalue()), layout=True), nl=False)


def _gate(diffs, fail_pct: float | None) -> int:
    from traceread.diff import gate

    if fail_pct is None:
        return EXIT_OK
    tripped = False
    for name, d in diffs:
        hit, why = gate(d, fail_pct)
        if hit:
            click.echo(f"traceread: --fail-on-regression {fail_pct:g} tripped: {name + ': ' if name else ''}{why}",
                       err=True)
        tripped |= hit
    return EXIT_GATE if tripped else EXIT_OK


def _scans(before, after, job_b, job_a, cfg, md_path, json_path, fail_pct, fix=None) -> int:
    """Two scan output directories, diffed job by job."""
    from traceread.diff.render import render_scan_markdown, scan_to_json
    from traceread.diff.scan_sides import diff_scans
    from traceread.render.json_text import dumps

    result = diff_scans(before, after, job_b, job_a, cfg, fix)
    if json_path:
        with atomic_open(json_path, "wb") as fh:
            fh.write(dumps(scan_to_json(result)) + b"\n")
    if md_path and not (json_path == "-" and md_path == "-"):
        _write_markdown(md_path, lambda fh: render_scan_markdown(result, fh))
    return _gate(list(result.diffs), fail_pct)
