"""``traceread scan PATH... --out OUTDIR``: every trace under a tree -> reports, jobs, index, parquet."""

from __future__ import annotations

import os
import re

import click

from traceread.cli.options import gates, thresholds, workload_flag_options
from traceread.cli.output import output_path
from traceread.config import load_config_file
from traceread.errors import EXIT_GATE, EXIT_OK, EXIT_USAGE, UsageError
from traceread.printable import printable
from traceread.trace import shown_path

_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kmgt]?)i?b?\s*$", re.I)


def parse_size(text: str) -> int:
    """``4G``, ``512M``, ``1.5GiB``, ``2000000000`` -> bytes."""
    m = _SIZE.match(str(text))
    if not m:
        raise UsageError(f"--max-rss: cannot read {text!r} as a size (e.g. 4G or 512M)")
    return int(float(m.group(1)) * 1024 ** " kmgt".index(m.group(2).lower() or " "))


@click.command("scan")
@click.argument("paths", nargs=-1, required=True)
@click.option("--out", "out", required=True, metavar="OUTDIR", callback=output_path, help="Directory for the reports (created).")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Worker processes (default: the machine's cores).")
@click.option("--trace-timeout", type=click.FloatRange(min=0, min_open=True), default=1800.0, show_default=True,
              metavar="SECONDS", help="Wall-clock limit per trace; past it the worker is replaced and the file failed.")
@click.option("--max-rss", default=None, metavar="SIZE",
              help="Memory limit per worker (default: 80% of the machine's memory shared by the workers).")
@click.option("--dask", "dask", default=None, metavar="ADDRESS",
              help="Run on Dask: tcp://HOST:PORT, a scheduler file (scheduler.json), or 'local'.")
@click.option("--resume", is_flag=True, help="Continue an interrupted scan (a plain re-run also reuses results).")
@click.option("--no-cache", is_flag=True, help="Analyse every file again, ignoring earlier results.")
@click.option("--allow-out-inside", is_flag=True, help="Allow --out inside a scanned tree (it is skipped).")
@click.option("--rank-pattern", default=None, metavar="REGEX",
              help="File-name pattern with a named group 'rank' (and optional 'world'), e.g. 'r(?P<rank>\\d+)'.")
@click.option("--fail-on", multiple=True, metavar="CLASS:PCT", help="Exit 1 when CLASS takes >= PCT% of any job's "
              "step time.")
@click.option("--strict", is_flag=True, help="Exit 1 when any file could not be analysed.")
@click.option("--top-gaps", type=click.IntRange(min=0), default=10, show_default=True, help="Gaps listed per report.")
@click.option("--set", "set_items", multiple=True, metavar="NAME=VALUE", help="Override a threshold.")
@click.option("--config", "config_path", metavar="TOML", help="Config file for the whole scan.")
@click.option("--warmup-steps", type=click.IntRange(min=0), default=None, help="Treat the first K steps as warmup.")
@click.option("--step-range", metavar="NAME", default=None, help="NVTX range that marks one step (nsys input).")
@workload_flag_options
def command(paths, out, workers, trace_timeout, max_rss, dask, resume, no_cache, allow_out_inside, rank_pattern,
            fail_on, strict, top_gaps, set_items, config_path, warmup_steps, step_range, job_file,
            job_values) -> int:
    """Scan trace files under PATHs: per-trace and per-job reports, a ranked index, parquet tables.

    Exit 0 when scanned (failures are listed in OUTDIR/failures.md), 1 when --fail-on trips for a
    job or, with --strict, any file failed, 2 on a usage error or when nothing could be read.
    """
    from traceread.scan import ScanOptions, Settings, scan
    from traceread.scan.jobinputs import JobInputsFinder
    from traceread.scan.pool import default_max_rss

    if rank_pattern:
        try:
            if "rank" not in re.compile(rank_pattern).groupindex:
                raise UsageError(f"--rank-pattern {rank_pattern!r} has no named group 'rank' (write (?P<rank>\\d+))")
        except re.error as exc:
            raise UsageError(f"--rank-pattern: bad regex ({exc})") from None
    if resume and no_cache:
        raise UsageError("--resume and --no-cache contradict each other")
    from traceread import bounds  # NaN passes click's range and would never time out (bounds: one place)

    trace_timeout = bounds.finite(trace_timeout, "--trace-timeout", 0.0, 1e9, lo_open=True)
    cfg, fail_gates = thresholds(config_path, set_items), gates(fail_on)
    conf = load_config_file(config_path) if config_path else {}
    patterns = tuple(sorted((cls, tuple([rx] if isinstance(rx, str) else rx))
                            for cls, rx in (conf.get("kernel_patterns") or {}).items()))
    n = workers or (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()) or 1
    settings = Settings(cfg=cfg, kernel_patterns=patterns, top_gaps=top_gaps, warmup_steps=warmup_steps,
                        step_range=step_range, rank_pattern=rank_pattern)
    opt = ScanOptions(roots=list(paths), out=out, settings=settings, workers=n, trace_timeout_s=trace_timeout,
                      max_rss=parse_size(max_rss) if max_rss else default_max_rss(n), dask=dask,
                      jobs=JobInputsFinder(job_file, job_values), allow_out_inside=allow_out_inside,
                      use_cache=not no_cache)
    res = scan(opt)
    failed = [f for f in res.failures if f["kind"] == "failed"]
    not_traces = len(res.failures) - len(failed)
    from traceread.render.fmt import plural

    click.echo(f"traceread scan: {plural(res.analysed, 'trace')} analysed ({res.reused} reused) in "
               f"{plural(len(res.jobs), 'job')}, {len(failed)} failed, {not_traces} not traces, "
               f"{plural(sum(res.index['scan']['skipped'].values()), 'other file')} skipped, {res.seconds:.1f} s -> "
               f"{os.path.join(out, 'index.md')}")
    if res.analysed == 0:
        where = ", ".join(printable(shown_path(p)) for p in paths)
        click.echo("traceread: error: no trace could be read" + (f" (see {os.path.join(out, 'failures.md')})"
                                                                  if res.failures else
                                                                  f" (no trace files found under {where})"),
                   err=True)
        return EXIT_USAGE
    tripped = [(j["job"], c, p, j["shares"].get(c, 0.0)) for j in res.jobs for c, p in fail_gates
               if 100 * j["shares"].get(c, 0.0) >= p]
    for job, cls, pct, share in tripped:
        click.echo(f"traceread: --fail-on {cls}:{pct:g} tripped: job {job}: {cls} is {100 * share:.1f}% of step time",
                   err=True)
    if strict and failed:
        click.echo(f"traceread: --strict: {len(failed)} file(s) could not be analysed", err=True)
        return EXIT_GATE
    return EXIT_GATE if tripped else EXIT_OK
