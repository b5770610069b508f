"""``traceread whatif TRACE... [--fix CAUSE[=FACTOR]]... [--fix bus-bound=FACTOR]... [--scale PATTERN=FACTOR]...``:
predicted step per fix."""

from __future__ import annotations

import re

import click

from traceread import bounds
from traceread.atomic import atomic_open
from traceread.cli.options import thresholds
from traceread.cli.output import emit, json_option, output_path
from traceread.errors import EXIT_OK, UsageError
from traceread.printable import printable
from traceread.runner import analyze, load
from traceread.whatif import FIX_CAUSES, Bus, Fix, Scale
from traceread.whatif.fixes import BUS_BOUND

REPLAY_FAILED = "what-if replay: "  # the analysis' unavailable line when its replay could not run


def _factor(text: str, what: str) -> float:
    # one place for every number (traceread.bounds): finite, and a factor whose int64 products hold
    return bounds.factor(text, what)


def parse_fix(item: str) -> Fix | Bus:
    """``CAUSE`` or ``CAUSE=FACTOR`` (FACTOR x faster); ``bus-bound=FACTOR``: the data-starved gaps' bus-bound copies
    (the rule's evidence kind) carry FACTOR x fewer bytes (:class:`traceread.whatif.fixes.Bus`)."""
    cause, sep, factor = item.partition("=")
    if cause == BUS_BOUND:
        if not sep or not factor:
            raise UsageError(f"--fix {item!r}: expected {BUS_BOUND}=FACTOR (FACTOR x fewer bytes over the bus)")
        return Bus(_factor(factor, f"--fix {BUS_BOUND}"))
    if cause not in FIX_CAUSES:
        raise UsageError(f"--fix {item!r}: unknown cause; known: {', '.join((*FIX_CAUSES, BUS_BOUND + '=FACTOR'))}")
    return Fix(cause, _factor(factor, f"--fix {cause}") if factor else None)


def parse_scale(item: str) -> Scale:
    """``PATTERN=FACTOR``: ops and host ranges whose name matches PATTERN, FACTOR x faster."""
    pattern, sep, factor = item.rpartition("=")
    if not sep or not pattern:
        raise UsageError(f"--scale {item!r}: expected PATTERN=FACTOR")
    bounds.user_pattern(pattern, f"--scale {item!r}", re.IGNORECASE)  # refused if it can backtrack for ever
    return Scale(pattern, _factor(factor, f"--scale {pattern}"))


@click.command("whatif")
@click.argument("traces", nargs=-1, required=True)
@click.option("--fix", "fix_items", multiple=True, metavar="CAUSE[=FACTOR]",
              help=f"A fix to predict ({', '.join(FIX_CAUSES)}); FACTOR: that many times faster; {BUS_BOUND}=FACTOR: "
                   "the bus-bound batch copies carry FACTOR times fewer bytes. Default: every lever.")
@click.option("--scale", "scale_items", multiple=True, metavar="PATTERN=FACTOR",
              help="GPU ops and host ranges whose name matches PATTERN (regex) run FACTOR times faster.")
@click.option("-o", "--output", "out_path", default="-", metavar="PATH", callback=output_path, help="Write the table here (default: stdout).")
@json_option
@click.option("--set", "set_items", multiple=True, metavar="NAME=VALUE", help="Override a threshold.")
@click.option("--config", "config_path", metavar="TOML", help="Config file ([thresholds]).")
@click.option("--warmup-steps", type=click.IntRange(min=0), default=None, help="Treat the first K steps as warmup.")
@click.option("--step-range", metavar="NAME", default=None, help="NVTX range that marks one step (nsys input).")
def command(traces, fix_items, scale_items, out_path, json_path, set_items, config_path, warmup_steps,
            step_range) -> int:
    """Predict the median step time after each fix by replaying the trace's dependencies."""
    cfg = thresholds(config_path, set_items)
    todo: list[Fix | Scale | Bus] = [parse_fix(f) for f in fix_items] + [parse_scale(s) for s in scale_items]
    loaded = [load(path, progress=True, step_range=step_range) for path in traces]
    # the analysis' own replay predicts the fixes asked for: no second replay of the same model
    result = analyze(loaded, cfg=cfg, warmup_steps=warmup_steps, step_range=step_range, fixes=todo or None)
    w = result.whatif
    if w is None:
        failed = next((line for line in result.unavailable if line.startswith(REPLAY_FAILED)), None)
        if failed is not None and ": failed (" in failed:
            raise RuntimeError(failed)  # a bug in the replay: exit 3, as when it ran outside the analysis
        raise UsageError(failed or "no steps with GPU activity to replay in " + ", ".join(traces))
    from traceread.render.names import terminal_text
    from traceread.render.whatif import consistency_of, record, text_report

    checks = consistency_of(result)
    text = text_report(w, [t.meta.path.rsplit("/", 1)[-1] for t in loaded], checks)
    if out_path != "-":  # the file is Markdown; the terminal gets the same table without its escapes
        with atomic_open(out_path, "w") as fh:
            fh.write(printable(text, layout=True))
        text = ""
    emit(terminal_text(text), record(w, checks), json_path)
    return EXIT_OK
