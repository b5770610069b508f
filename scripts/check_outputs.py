"""Write every output of every command over a set of traces into one folder and list each file's hash.

A refactor that must change no output byte is checked by running this before and after and comparing
the two listings (``--compare OLD.sha256``). The set: every trace under ``fixtures/`` and the shared
reference traces (``../shared/traces`` or ``TRACEREAD_SHARED``: kineto/, nsys/ and formats/), each through ``analyze`` (Markdown,
JSON, Perfetto, PNG), ``gaps`` (table, JSON, CSV), ``kernels``, ``whatif`` and ``info``; the real
before/after pair through ``diff``; ``fixtures/`` through ``scan`` (Markdown, JSON, parquet).

Commands run in this one process through ``traceread.cli.main`` (as the tests call it), each one's
standard output captured into a file of its own, so the listing also covers what a terminal shows.

    python scripts/check_outputs.py OUTDIR                 # writes OUTDIR/ and OUTDIR.sha256
    python scripts/check_outputs.py OUTDIR --compare BASE.sha256
    python scripts/check_outputs.py OUTDIR --list-only      # hashes an OUTDIR written before

The scan's cache folder, its lock file (the scan's pid), its timing and its settings key differ between two runs of the same code and
are left out; the output folder's own path is replaced by ``OUT`` and the checkout's by ``REPO`` (two
worktrees of the same code list the same hashes).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import os
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("TRACEREAD_SHARED", REPO.parent / "shared")) / "traces"
PAIR = ("kineto/kineto2021_resnet50_workers0_run2.pt.trace.json.gz",
        "kineto/kineto2021_resnet50_workers4_run2.pt.trace.json.gz")
# formats whose readers are not part of every build: outputs for them are listed, not compared
KNOWN = (".json", ".json.gz", ".sqlite", ".pb", ".rpd")


def _traces() -> list[Path]:
    found = [p for p in sorted((REPO / "fixtures").iterdir()) if p.name.endswith(KNOWN)]
    for sub in ("kineto", "nsys", "formats"):
        d = SHARED / sub
        if d.is_dir():
            found += [p for p in sorted(d.iterdir()) if p.name.endswith(KNOWN)]
    return found


def _run(argv: list[str], stdout_file: Path) -> int:
    from traceread.cli import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
        rc = main(argv)
    stdout_file.write_text(f"exit {rc}\n" + buf.getvalue())
    return rc


def write_all(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    traces = _traces()
    for i, path in enumerate(traces, 1):
        stem = f"{path.parent.name}__{path.name}"
        d = out / stem
        d.mkdir(exist_ok=True)
        p = str(path)
        print(f"[{i}/{len(traces)}] {stem}", file=sys.stderr, flush=True)
        _run(["analyze", p, "-o", str(d / "report.md"), "--json", str(d / "report.json"),
              "--perfetto", str(d / "diag.pftrace"), "--plot", str(d / "timeline.png")], d / "analyze.out")
        _run(["gaps", p, "--json", str(d / "gaps.json"), "--csv", str(d / "gaps.csv")], d / "gaps.out")
        _run(["kernels", p, "--json", str(d / "kernels.json")], d / "kernels.out")
        _run(["whatif", p, "--json", str(d / "whatif.json")], d / "whatif.out")
        _run(["info", p, "--json", str(d / "info.json")], d / "info.out")
    if all((SHARED / n).is_file() for n in PAIR):
        d = out / "diff_pair"
        d.mkdir(exist_ok=True)
        a, b = (str(SHARED / n) for n in PAIR)
        _run(["diff", a, b, "-o", str(d / "diff.md"), "--json", str(d / "diff.json")], d / "diff.out")
        _run(["diff", a, b, "--fix", "data-starved", "--json", str(d / "diff_fix.json")], d / "diff_fix.out")
    d = out / "analyze_fixtures_dir"
    d.mkdir(exist_ok=True)
    _run(["analyze", str(REPO / "fixtures"), "-o", str(d / "report.md"), "--json", str(d / "report.json"),
          "--plot", str(d / "timeline.png")], d / "analyze.out")
    d = out / "scan_fixtures"
    _run(["scan", str(REPO / "fixtures"), "--out", str(d), "--workers", "1"], out / "scan.out")


# What differs between two runs of the same code: the scan's timing, its settings key and its cache
VOLATILE_KEYS = ("seconds", "settings_key")


def _stable(f: Path, out: Path) -> bytes:
    data = f.read_bytes()
    if f.name == "scan.out":
        data = re.sub(rb"[0-9.]+ s -> .*", b"S s -> OUT", data)
    elif f.name == "index.json":
        doc = json.loads(data)

        def drop(x: object) -> object:
            if isinstance(x, dict):
                return {k: drop(v) for k, v in x.items() if k not in VOLATILE_KEYS}
            if isinstance(x, list):
                return [drop(v) for v in x]
            return x
        data = json.dumps(drop(doc), sort_keys=True).encode()
    return data.replace(str(out).encode(), b"OUT").replace(str(REPO).encode(), b"REPO")


def listing(out: Path) -> dict[str, str]:
    sums = {}
    for f in sorted(out.rglob("*")):
        if f.is_file() and ".traceread-cache" not in f.parts and f.name != ".traceread-scan.lock":
            sums[str(f.relative_to(out))] = hashlib.sha256(_stable(f, out)).hexdigest()
    return sums


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--compare", type=Path, help="a listing written before: report every file that differs")
    ap.add_argument("--list-only", action="store_true", help="only hash an OUTDIR written before")
    args = ap.parse_args()
    if not args.list_only:
        write_all(args.out)
    sums = listing(args.out)
    text = "".join(f"{h}  {name}\n" for name, h in sums.items())
    Path(f"{args.out}.sha256").write_text(text)
    total = hashlib.sha256(text.encode()).hexdigest()
    print(f"{len(sums)} files, listing sha256 {total}")
    if args.compare:
        old = dict(reversed(line.split("  ", 1)) for line in args.compare.read_text().splitlines())
        old = {k.strip(): v for k, v in old.items()}
        differ = sorted(n for n in set(old) | set(sums) if old.get(n) != sums.get(n))
        for n in differ:
            print(f"DIFFERS: {n}")
        print(f"{len(differ)} of {len(set(old) | set(sums))} files differ")
        return 1 if differ else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
