"""``traceread kernels TRACE``: top kernels by GPU time, time by class, launch statistics, hints."""

from __future__ import annotations

import click

from traceread import kernel_classes
from traceread.cli.output import emit, json_option
from traceread.config import Thresholds, load_config_file, parse_set_options
from traceread.metrics.kernels import kernel_report
from traceread.metrics.roofline import roofline
from traceread.metrics.tables import kernel_tables
from traceread.metrics.workload import DTYPES
from traceread.render.kernels import render_kernel_report, render_roofline, roofline_dict
from traceread.render.tables import render_tables, tables_dict, write_csv
from traceread.runner import load


@click.command("kernels")
@click.argument("trace", type=click.Path(dir_okay=False))
@json_option
@click.option("--top", type=click.IntRange(min=0), default=20, show_default=True, help="Kernels shown in the table (the JSON lists all).")
@click.option("--dtype", type=click.Choice(DTYPES), default=None,
              help="Run precision for the fp32-GEMM hint (default: read from recorded shapes).")
@click.option("--gpu", default=None, help="Peak-table GPU (e.g. H100-SXM) for the roofline, overriding the trace.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
              help="TOML config with [thresholds] and [kernel_patterns] tables.")
@click.option("--set", "sets", multiple=True, metavar="NAME=VALUE", help="Override a threshold.")
@click.option("--csv", "csv_dir", metavar="DIR", default=None,
              help="Also write each table (ops, modules, ranges, copies, host_api, collectives, mem_bandwidth) "
                   "as DIR/<table>.csv.")
def command(trace: str, json_path: str | None, top: int, dtype: str | None, gpu: str | None,
            config_path: str | None, sets: tuple[str, ...], csv_dir: str | None = None) -> None:
    """Top kernels by GPU time with their class, time by class, launch statistics, hints and the
    roofline of recorded matmul/attention shapes; GPU time per op and per nn.Module, annotation ranges,
    copies by kind, the CUDA API summary, collectives and the bandwidth of memory-bound kernels."""
    cfg = Thresholds()
    kernel_classes.clear_user_patterns()
    try:
        if config_path:
            raw = load_config_file(config_path)
            cfg = cfg.with_overrides(raw.get("thresholds", {}))
            kernel_classes.register_patterns_from_config(raw.get("kernel_patterns", {}), config_path)
        cfg = cfg.with_overrides(parse_set_options(sets))
        tr = load(trace, progress=True)
        report = kernel_report(tr, cfg, dtype)
    finally:
        kernel_classes.clear_user_patterns()
    roof = roofline(tr, cfg, gpu=gpu, fp32_as="tf32" if dtype == "tf32" else "fp32")
    tables = kernel_tables(tr)
    text = render_kernel_report(report, top) + "\n\n" + render_roofline(roof, cfg, top) + "\n\n" + \
        render_tables(tables, top)
    if csv_dir:
        write_csv(tables, csv_dir)
    emit(text, {**report.to_dict(), "roofline": roofline_dict(roof), "tables": tables_dict(tables)}, json_path)
