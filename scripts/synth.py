"""Write a planted-cause trace (Kineto JSON per rank and/or an nsys SQLite export) and its ground truth.

    python scripts/synth.py OUT_PREFIX [--seed N] [--ranks R] [--steps S] [--jitter J]
                            [--weight launch-bound=2 --weight sync-stall=0 ...] [--format both]

Writes ``OUT_PREFIX.rank<R>.pt.trace.json`` (Kineto, one file per rank; ``OUT_PREFIX.pt.trace.json``
with one rank), ``OUT_PREFIX.sqlite`` (nsys export) and ``OUT_PREFIX.truth.json``: every
compute-idle interval per rank/device with its planted class, in ns of the loaded frame's time
base (Kineto 2024 and nsys load to the same ns; for ``--kineto-generation int-us`` add the file's
``origin_epoch_ns``).
"""

from __future__ import annotations

import json
import os

import click
import tests_on_path  # noqa: F401 - puts tests/ on sys.path for tracesynth
from tracesynth.planted import CLASSES, PlantSpec, plant

from traceread.atomic import atomic_open


def write_planted(prefix: str, spec: PlantSpec, fmt: str = "both", nsys_schema: str = "2026",
                  kineto_generation: str = "2024") -> dict[str, list[str]]:
    """Generate ``spec`` and write its files next to ``prefix``; return the paths by kind."""
    planted = plant(spec)
    os.makedirs(os.path.dirname(os.path.abspath(prefix)), exist_ok=True)
    out: dict[str, list[str]] = {"kineto": [], "nsys": []}
    if fmt in ("both", "kineto"):
        from tracesynth.kineto_writer import write_kineto

        pattern = prefix + (".rank{rank}.pt.trace.json" if spec.ranks > 1 else ".pt.trace.json")
        out["kineto"] = write_kineto(planted.scenario, pattern, generation=kineto_generation)
    if fmt in ("both", "nsys"):
        from tracesynth.nsys_writer import write_nsys

        out["nsys"] = [write_nsys(planted.scenario, prefix + ".sqlite", schema=nsys_schema)]
    with atomic_open(prefix + ".truth.json", "w") as fh:
        json.dump(planted.truth_dict(), fh)
    out["truth"] = [prefix + ".truth.json"]
    return out


def parse_weights(items: tuple[str, ...]) -> dict[str, float]:
    weights = {c: 1.0 for c in CLASSES}
    for item in items:
        name, _, value = item.partition("=")
        if name not in CLASSES or not value:
            raise click.BadParameter(f"{item!r}: expected CLASS=WEIGHT with CLASS one of {', '.join(CLASSES)}")
        weights[name] = float(value)
    return weights


@click.command()
@click.argument("prefix")
@click.option("--seed", default=0, show_default=True)
@click.option("--ranks", default=2, show_default=True)
@click.option("--steps", default=8, show_default=True)
@click.option("--jitter", default=0.05, show_default=True, help="relative std of every duration")
@click.option("--weight", "weights", multiple=True, help="CLASS=occurrences per step (repeatable)")
@click.option("--format", "fmt", type=click.Choice(["both", "kineto", "nsys"]), default="both", show_default=True)
@click.option("--nsys-schema", default="2026", show_default=True)
@click.option("--kineto-generation", type=click.Choice(["2024", "int-us"]), default="2024", show_default=True,
              help="int-us: integer absolute-epoch microseconds (truth times then need origin_epoch_ns added)")
@click.option("--no-noise", is_flag=True, help="leave out overlapped comm, noise thread and annotations")
def main(prefix: str, seed: int, ranks: int, steps: int, jitter: float, weights: tuple[str, ...], fmt: str,
         nsys_schema: str, kineto_generation: str, no_noise: bool) -> None:
    spec = PlantSpec(seed=seed, ranks=ranks, steps=steps, jitter=jitter, weights=parse_weights(weights),
                     noise=not no_noise)
    for kind, paths in write_planted(prefix, spec, fmt, nsys_schema, kineto_generation).items():
        for p in paths:
            click.echo(f"{kind}: {p}")


if __name__ == "__main__":
    main()
