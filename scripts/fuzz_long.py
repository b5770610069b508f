"""Fuzz traceread for a chosen time: the test suite's mutations of real and generated traces, at random.

    python scripts/fuzz_long.py --minutes 30 --failures fuzz-failures/ [--seed N]

Seeds: Kineto JSON, nsys exports and a file of every other format traceread detects (rocprofv3,
rocpd, RPD, xplane, trace-viewer JSON, Perfetto...: ``tests/fuzz/fuzz_formats.py``; a new format is
one entry of ``tracesynth.format_samples.SAMPLES``). Each input runs through ``analyze``, ``gaps``,
``kernels`` or ``info`` in a watched worker process
(60 s hang watchdog); each Kineto input is also loaded by the compiled scanner and by the msgspec
fallback, which must agree. An input that gives anything but a result or a one-line exit-2 error naming the
file (or lets a raw control character from the trace reach the output) is copied into ``--failures``
with a ``.txt`` beside it saying what was done and what happened. Mutations: the suite's (byte flips,
truncation, wrong types, control characters and invalid UTF-8 in string fields, integers at 2^31,
2^53, 2^63, 2^64 and beyond, long stretches without an event boundary, SQLite layouts) plus world
sizes up to 10^12 (``LONG_JSON_MUTATIONS``), and XSpace protobufs (``tests/fuzz/fuzz_xplane.py``); the
worker's memory is capped at 8 GiB.
Issue 48's classes (``tests/fuzz/fuzz_issue48.py``, a third of the inputs; the other formats a fifth): numbers at their edges in
every option that takes one (NaN, infinity, 1e-13, 2^63, 2^64...), user regexes that backtrack, a byte
order mark, ``traceEvents`` of another type or twice, a second ``ts``, bidi controls and formula
starters in names (the Markdown and CSV are checked too), names of thousands of template groups,
permuted correlation ids, runs of NUL bytes, an nsys column computed on read.
Needs the test extras (``pip install -e '.[test]'``); reads ../shared/traces when present.
"""

from __future__ import annotations

import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import click

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "tests"), str(REPO / "tests" / "fuzz")]

import fuzz_issue48 as i48  # noqa: E402
from fuzz_formats import format_seeds, mutate_format, mutations  # noqa: E402
from fuzz_harness import Worker, check_case  # noqa: E402
from fuzz_mutations import (  # noqa: E402
    COMMANDS,
    LONG_JSON_MUTATIONS,
    LONG_SQLITE_MUTATIONS,
    json_bases,
    mutate_json,
    mutate_sqlite,
    nsys_bases,
    write_json_case,
)
from fuzz_xplane import BYTE_MUTATIONS as XPLANE_MUTATIONS  # noqa: E402
from fuzz_xplane import XPLANE_COMMANDS, mutate_xplane, xplane_bases  # noqa: E402

from traceread.loaders.kineto.scan import BUILT as SCANNER_BUILT  # noqa: E402

ISSUE48_SHARE = 0.35  # of the inputs: issue 48's classes (tests/fuzz/fuzz_issue48.py)


def _issue48_case(rnd: random.Random, worker: Worker, jb: dict, nb: dict, case: Path, command: str
                  ) -> tuple[str, str, str | None]:
    """One input of issue 48's classes: (base, what was done, the problem found or None)."""
    pick = rnd.random()
    if pick < 0.3:  # a number or a pattern at its edge, on an unchanged trace
        base = rnd.choice(sorted(jb))
        path = write_json_case(case, base, jb[base].encode(), gz=False)
        argv = i48.argv_case(rnd, str(path), str(case))
        return base, "argv " + " ".join(argv), i48.argv_problem(worker.run(argv))
    if pick < 0.4:
        base = rnd.choice(sorted(nb))
        path = case / f"{base.split('.')[0]}.sqlite"
        shutil.copyfile(nb[base], path)
        how = i48.mutate_sqlite(rnd, path, rnd.choice(i48.SQLITE_KINDS))
        return base, how, check_case(worker, str(path), command, str(case))
    base = rnd.choice(sorted(jb))
    kind = rnd.choice(i48.JSON_KINDS)
    data, how = i48.mutate(rnd, jb[base], kind)
    path = write_json_case(case, base, data, gz=rnd.random() < 0.3)
    why = check_case(worker, str(path), command, str(case))
    if not why and kind in ("bidi-names", "formula-names"):
        md, table = case / "out" / "r.md", case / "out" / "g.csv"
        md.parent.mkdir()
        for argv in (["analyze", str(path), "-o", str(md)], ["gaps", str(path), "--csv", str(table)]):
            outcome = worker.run(argv)
            if outcome.rc not in (0, 1):
                why = f"traceread {' '.join(argv)}: exit {outcome.rc}: {outcome.err[-400:]}"
                break
        why = why or i48.output_problem(md, table)
    return base, how, why


@click.command()
@click.option("--minutes", type=float, default=10.0, show_default=True, help="How long to fuzz.")
@click.option("--failures", "failures_dir", default="fuzz-failures", show_default=True,
              help="Folder for failing inputs and their descriptions.")
@click.option("--seed", type=int, default=None, help="Seed of the run (default: from the clock).")
def main(minutes: float, failures_dir: str, seed: int | None) -> None:
    seed = int(time.time()) if seed is None else seed
    rnd = random.Random(seed)
    tty = sys.stderr.isatty()
    with tempfile.TemporaryDirectory(prefix="traceread-fuzz-") as tmp_s:
        tmp = Path(tmp_s)
        jb, nb, fb = json_bases(tmp), nsys_bases(tmp), format_seeds(tmp / "format-seeds")
        xb = xplane_bases()
        worker = Worker()
        deadline = time.monotonic() + minutes * 60
        start, runs, bad = time.monotonic(), 0, 0
        try:
            while time.monotonic() < deadline:
                case = tmp / f"case{runs}"
                case.mkdir()
                command = rnd.choice(COMMANDS)
                draw = rnd.random()
                is_json = draw < 0.575  # the rest up to 0.8: an nsys export
                if draw < ISSUE48_SHARE:  # issue 48's classes: edge numbers, patterns, hostile names
                    base, how, why = _issue48_case(rnd, worker, jb, nb, case, command)
                    path = next((p for p in sorted(case.iterdir()) if p.is_file()), case)
                    is_json = path.suffix != ".sqlite" and not how.startswith("argv")
                elif draw >= 0.8:
                    is_json = False
                    if draw >= 0.9:  # an XSpace protobuf (.xplane.pb), mutated field by field
                        base = rnd.choice(sorted(xb))
                        command = rnd.choice(XPLANE_COMMANDS)
                        data, how = mutate_xplane(rnd, xb[base], rnd.choice(XPLANE_MUTATIONS))
                        path = case / f"{base}.xplane.pb"
                        path.write_bytes(data)
                    else:  # every other format detected (format_seeds): one seed entry per format
                        base = rnd.choice(sorted(fb))
                        kind = rnd.choice(mutations(fb[base]))
                        (case / "in").mkdir()
                        path, how = mutate_format(rnd, fb[base], case / "in", kind)
                    why = check_case(worker, str(path), command, str(case))
                else:
                    if is_json:
                        base = rnd.choice(sorted(jb))
                        kind = rnd.choice(LONG_JSON_MUTATIONS)
                        data, how = mutate_json(rnd, jb[base], kind)
                        path = write_json_case(case, base, data, gz=rnd.random() < 0.5)
                    else:
                        base = rnd.choice(sorted(nb))
                        kind = rnd.choice(LONG_SQLITE_MUTATIONS)
                        path = case / f"{base.split('.')[0]}.sqlite"
                        shutil.copyfile(nb[base], path)
                        how = mutate_sqlite(rnd, path, kind)
                    why = check_case(worker, str(path), command, str(case))
                if not why and is_json and SCANNER_BUILT:  # the compiled scanner must match the fallback
                    why = worker.compare_decoders(str(path))
                runs += 1
                if why:
                    bad += 1
                    os.makedirs(failures_dir, exist_ok=True)
                    keep = Path(failures_dir) / f"{seed}-{runs:06d}-{path.name}"
                    shutil.copyfile(path, keep)
                    keep.with_name(keep.name + ".txt").write_text(f"base: {base}\nmutation: {how}\n{why}\n")
                shutil.rmtree(case, ignore_errors=True)
                if tty:
                    el = time.monotonic() - start
                    print(f"\r{runs} inputs, {bad} failing, {el:.0f} s of {minutes * 60:.0f} s", end="",
                          file=sys.stderr, flush=True)
        finally:
            worker.close()
    if tty:
        print(file=sys.stderr)
    el = time.monotonic() - start
    print(f"fuzz_long: seed {seed}: {runs} inputs in {el:.0f} s, {runs - bad} clean, {bad} failing"
          + (f" (written to {failures_dir}/)" if bad else ""))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
