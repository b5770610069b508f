"""``traceread analyze`` beside its own load, HTA's equivalent analysis, a bare ``orjson.loads`` and
nsys-ai's idle-gap analysis, in one run: wall seconds, CPU seconds and peak memory of each process.

Default run (issue 28's figures), each contender in its own fresh process, ``--repeat`` times
interleaved (best wall time shown; HTA and nsys-ai once):

* Kineto inputs made from a real trace by ``scripts/scale_trace.py`` (under ``--workdir``, once):
  ``--sizes`` MB of JSON (default 233 and 1100) from ``--source`` (default HTA's 2-rank NCCL A100
  trace, PyTorch 2.4+ decimal microseconds). Contenders: ``traceread info`` (the load), ``traceread
  analyze -o report.md``, ``traceread analyze -o report.md --json report.json``, HTA's
  ``TraceAnalysis`` with its temporal, idle-time and kernel breakdowns (``--hta-max-mb``: skipped on
  bigger inputs), and a process that only reads the file and runs ``orjson.loads`` on it.
* The nsys export ``scripts/bench_nsys.py --kernels N`` makes (``scripts/gen_nsys.py``: N kernels
  + N launches over 2 processes, default 5M): ``traceread analyze -o report.md`` against
  ``nsys-ai skill run gpu_idle_gaps`` on each device (run on a copy: it indexes its input).
* ``gaps`` outputs on the ``--gaps-kernels`` export (default 2M; 0 skips): the engine alone (load +
  steps + gaps: ``bench_nsys.py``'s own process), ``traceread gaps`` (the table), ``--json`` and
  ``--csv``, and beside each output a process that only writes as many bytes as that output has
  (1 MiB blocks to the same folder): the floor the disk and page cache put under writing it. Every
  writer starts with the outputs removed and ``sync`` done, so none pays for another's dirty pages.

Each contender starts with its input read through once (in the page cache: ``cached``).
Memory is the largest RSS of the process tree summed over it, sampled every 20 ms from
``/proc/PID/statm``; CPU is user + system of the process and its children (``os.wait4``). The
machine's load average is printed with the table: other jobs on a shared machine change wall
times, less so CPU times.

    .venv/bin/python scripts/bench_analyze.py                       # everything (tens of minutes)
    .venv/bin/python scripts/bench_analyze.py --sizes 233 --skip-nsys --repeat 1
    .venv/bin/python scripts/bench_analyze.py TRACE [TRACE ...]     # given traces: info / analyze only
    .venv/bin/python scripts/bench_analyze.py --baseline b176cd1 --sizes 233,1100 --gaps-kernels 0 \
        --hta-max-mb 0 --skip-nsys-ai --repeat 3                    # a commit beside the tree
    .venv/bin/python scripts/bench_analyze.py --baseline HEAD --env-after TRACEREAD_NO_CGAPS=1 ...

``--baseline REF`` checks REF out once as a git worktree under ``--workdir`` and builds its C
extensions there (``setup.py build_ext --inplace`` with this interpreter: setuptools must be
installed in it). Every traceread contender then runs for REF ("before") and for this tree
("after"), interleaved, the sides in turn first; each process runs in its own checkout with
``PYTHONPATH`` naming it (checked: each side must import its own ``traceread``). HTA, orjson and the
bare writes are not traceread's code and run once per round. The table gives before, after and
after / before of the lowest wall, CPU and peak of the rounds, with the load average. ``--env-after``
sets variables in the "after" processes only: beside ``--baseline HEAD``, what an extension earns.

HTA (``pip install traceinsight 'pandas<3'``) and nsys-ai (``pip install nsys-ai``) live in their
own virtual environments (``HTA_PYTHON``, ``NSYS_AI``; by default ``.venv-hta``/``.venv-nsysai`` in
the repo, then ``../venv-hta``/``../venv-nsysai``); they are never traceread dependencies.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from proctree import process_tree, rss_bytes

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("TRACEREAD_SHARED", REPO.parent / "shared")) / "traces"
SOURCE = SHARED / "kineto" / "hta_nccl_a100_rank0of2.json.gz"


def _tool(env: str, *candidates: Path) -> str | None:
    if os.environ.get(env):
        return os.environ[env]
    return next((str(c) for c in candidates if c.exists()), None)


HTA_PYTHON = _tool("HTA_PYTHON", REPO / ".venv-hta" / "bin" / "python", REPO.parent / "venv-hta" / "bin" / "python")
NSYS_AI = _tool("NSYS_AI", REPO / ".venv-nsysai" / "bin" / "nsys-ai", REPO.parent / "venv-nsysai" / "bin" / "nsys-ai")

TRACEREAD = [sys.executable, "-c", "from traceread.cli import run; run()"]
ORJSON = [sys.executable, "-c", "import sys, orjson; orjson.loads(open(sys.argv[1], 'rb').read())"]
# As many bytes as the file argv[1] has, written to argv[2] in 1 MiB blocks (the floor under writing it).
WRITE_SAME_SIZE = [sys.executable, "-c", "import os, sys\nleft = os.path.getsize(sys.argv[1])\nblock = b'0' * (1 << 20)\n"
                   "with open(sys.argv[2], 'wb') as f:\n    while left > 0:\n        left -= f.write(block[:left])"]
HTA_CODE = """
import logging, sys
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
ta = TraceAnalysis(trace_dir=sys.argv[1])
ta.get_temporal_breakdown(visualize=False)
ta.get_idle_time_breakdown(visualize=False)
ta.get_gpu_kernel_breakdown(visualize=False)
"""


def measure(cmd: list[str], timeout: float, root: Path = REPO, extra_env: dict[str, str] | None = None) -> dict:
    """Wall s, CPU s (process and children) and peak tree RSS (MB) of one command, run with the
    checkout ``root`` as its working directory and ``PYTHONPATH`` (``python -c`` puts the working
    directory first on ``sys.path``, so both must name the same checkout)."""
    env = {**os.environ, **(extra_env or {}), "PYTHONPATH": str(root)}
    load = os.getloadavg()[0]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=root, env=env)
    peak = 0.0
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        peak = max(peak, sum(rss_bytes(p) for p in process_tree(proc.pid)) / 2**20)
        if time.monotonic() - t0 > timeout:
            proc.kill()
            proc.wait()
            return {"error": f"stopped after {timeout:.0f} s"}
        time.sleep(0.02)
    wall = time.monotonic() - t0
    proc.returncode = code = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if code not in (0, 1):  # 1: analyze's "no verdict" exit is still a finished run
        return {"error": (err.strip().splitlines() or ["failed"])[-1][:100]}
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime,
            "peak": max(peak, usage.ru_maxrss / 1024), "load": load}


def scaled_input(workdir: Path, source: Path, size_mb: int) -> Path:
    out = workdir / f"{source.name.split('.')[0]}_{size_mb}mb.json"
    if not out.exists():
        print(f"making {out} ...", file=sys.stderr)
        subprocess.run([sys.executable, str(REPO / "scripts" / "scale_trace.py"), str(source), str(out),
                        "--size-mb", str(size_mb)], check=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    return out


def kineto_contenders(trace: Path, tmp: str, hta_dir: str | None) -> list[tuple[str, list[str]]]:
    md, js = os.path.join(tmp, "r.md"), os.path.join(tmp, "r.json")
    out = [("traceread info (the load)", [*TRACEREAD, "info", str(trace)]),
           ("traceread analyze (Markdown)", [*TRACEREAD, "analyze", str(trace), "-o", md]),
           ("traceread analyze (Markdown + JSON)", [*TRACEREAD, "analyze", str(trace), "-o", md, "--json", js])]
    if hta_dir is not None and HTA_PYTHON:
        out.append(("HTA: TraceAnalysis + temporal, idle-time, kernel breakdowns", [HTA_PYTHON, "-c", HTA_CODE, hta_dir]))
    out.append(("bare orjson.loads process", [*ORJSON, str(trace)]))
    return out


def cached(path: Path) -> None:
    """Read ``path`` through once, so that the next contender finds it in the page cache. Without this the
    first contender of a round could read it from disk (this machine's memory manager evicts idle file
    pages: a 1.1 GB `info` took 23.5 s of wall time for 3.8 s of CPU) and the ratios depended on the order."""
    with open(path, "rb", buffering=0) as f:
        while f.read(1 << 24):
            pass


# Variables set in the "after" side's processes only (--env-after): e.g. TRACEREAD_NO_CCAT=1 beside a
# baseline of the same commit times what one extension earns.
AFTER_ENV: dict[str, str] = {}

# Contenders whose code is not traceread's: timed once per round on the current tree only, even
# beside a baseline (their figures are the same for both).
NOT_TRACEREAD = ("HTA", "bare orjson", "write of", "nsys-ai")


def _best(old: dict | None, new: dict) -> dict:
    """The lowest of each figure over the repeats (a shared machine only ever adds to them)."""
    if old is None or "error" in old:
        return new
    if "error" in new:
        return old
    return {k: min(old[k], new[k]) if k in ("wall", "cpu", "peak") else max(old.get(k, 0), new[k]) for k in new}


def run_rows(label: str, size_mb: float, contenders: list[tuple[str, list[str]]], repeat: int,
             timeout: float, once: tuple[str, ...] = ("HTA", "nsys-ai"), inputs: tuple[Path, ...] = (),
             prepare: Callable[[], None] | None = None, sides: tuple[tuple[str, Path], ...] = ()) -> list[tuple]:
    """One row per contender: its figures, or with ``sides`` (``("before", checkout), ("after", REPO)``)
    a dict of each side's figures. Rounds are interleaved contender by contender, and the sides swap
    order every round so that neither always runs first."""
    best: dict[tuple[str, str], dict] = {}
    for k in range(repeat):
        for name, cmd in contenders:
            if k and (name.startswith(once) or "error" in best.get((name, "after"), {})):
                continue
            order = list(sides) if sides and not name.startswith(NOT_TRACEREAD) else [("after", REPO)]
            for side, root in order[::-1] if k % 2 else order:
                if prepare is not None:
                    prepare()
                for path in inputs:
                    cached(path)
                r = measure(cmd, timeout, root, AFTER_ENV if side == "after" else None)
                print(f"  {label} | {name} | {side}: {r}", file=sys.stderr)
                best[(name, side)] = _best(best.get((name, side)), r)
    rows = []
    for name, _ in contenders:
        if not sides:
            rows.append((label, size_mb, name, best[(name, "after")]))
        else:
            rows.append((label, size_mb, name, {s: best[(name, s)] for s, _ in sides if (name, s) in best}))
    return rows


def nsys_rows(args: argparse.Namespace, workdir: Path, sides: tuple[tuple[str, Path], ...] = ()) -> list[tuple]:
    sys.path.insert(0, str(REPO / "scripts"))
    from bench_nsys import ensure_export  # the same export bench_nsys.py measures

    export = workdir / f"bench_{args.kernels}kernels_2ranks.sqlite"
    ensure_export(str(export), args.kernels, 2, False)
    size = export.stat().st_size / 1e6
    label = f"nsys export, {args.kernels / 1e6:g}M kernels + launches, 2 GPUs"
    with tempfile.TemporaryDirectory(prefix="bench-analyze-", dir=workdir) as tmp:
        rows = run_rows(label, size, [("traceread analyze (Markdown)",
                                       [*TRACEREAD, "analyze", str(export), "-o", os.path.join(tmp, "r.md")])],
                        args.repeat, args.timeout, inputs=(export,), sides=sides)
        if NSYS_AI and not args.skip_nsys_ai:
            copy = os.path.join(tmp, "export.sqlite")
            shutil.copyfile(export, copy)  # nsys-ai writes indexes into its input and a cache beside it
            parts = []
            for d in (0, 1):
                cached(Path(copy))
                parts.append(measure([NSYS_AI, "skill", "run", "gpu_idle_gaps", copy, "--format", "json", "-p",
                                      f"device={d}"], args.timeout))
            ok = [p for p in parts if "error" not in p]
            total = ({"wall": sum(p["wall"] for p in ok), "cpu": sum(p["cpu"] for p in ok),
                      "peak": max(p["peak"] for p in ok)} if len(ok) == len(parts) else parts[0])
            rows.append((label, size, "nsys-ai gpu_idle_gaps, devices 0 and 1 (summed)",
                         {"after": total} if sides else total))
    return rows


def gaps_rows(args: argparse.Namespace, workdir: Path, sides: tuple[tuple[str, Path], ...] = ()) -> list[tuple]:
    """``gaps`` and its outputs on the ``--gaps-kernels`` export against the engine alone and against
    writing the outputs' bytes (issue 28: each within 1.5x the engine's time)."""
    sys.path.insert(0, str(REPO / "scripts"))
    from bench_nsys import TRACEREAD_CHILD, ensure_export

    export = workdir / f"bench_{args.gaps_kernels}kernels_2ranks.sqlite"
    ensure_export(str(export), args.gaps_kernels, 2, False)
    label = f"nsys export, {args.gaps_kernels / 1e6:g}M kernels: gaps outputs"
    with tempfile.TemporaryDirectory(prefix="bench-gaps-", dir=workdir) as tmp:
        js, csv, floor = (os.path.join(tmp, n) for n in ("g.json", "g.csv", "write.bin"))
        gaps = [*TRACEREAD, "gaps", str(export)]

        def prepare() -> None:  # no writer pays for an earlier one's file or dirty pages
            for name in os.listdir(tmp):
                path = os.path.join(tmp, name)
                size = os.path.getsize(path)
                os.remove(path)  # (freeing a file's cached pages takes time: here, not in a timed run)
                if name.startswith("g."):  # an output gives the floor's size: kept as a sparse file of it
                    with open(path, "wb") as fh:
                        fh.truncate(size)
            os.sync()

        contenders = [("engine: load + steps + gaps", [sys.executable, "-c", TRACEREAD_CHILD, str(export)]),
                      ("traceread gaps (the table)", gaps),
                      ("traceread gaps --json", [*gaps, "--json", js]),
                      ("write of the --json output's bytes alone", [*WRITE_SAME_SIZE, js, floor]),
                      ("traceread gaps --csv", [*gaps, "--csv", csv]),
                      ("write of the --csv output's bytes alone", [*WRITE_SAME_SIZE, csv, floor])]
        rows = run_rows(label, export.stat().st_size / 1e6, contenders, args.repeat, args.timeout,
                        inputs=(export,), prepare=prepare, sides=sides)
        sizes = {"json": os.path.getsize(js) / 1e6 if os.path.exists(js) else 0.0,
                 "csv": os.path.getsize(csv) / 1e6 if os.path.exists(csv) else 0.0}
    out = []
    for lb, mb, name, r in rows:
        fmt = name.rsplit("--", 1)[-1] if name.startswith("traceread gaps --") else None
        if fmt is not None and sides:
            name = f"{name} ({sizes[fmt]:,.0f} MB written)"
        elif fmt is not None:
            name, r = f"{name} ({sizes[fmt]:,.0f} MB written)", {**r, "output_mb": sizes[fmt]}
        out.append((lb, mb, name, r))
    return out


def table(rows: list[tuple]) -> str:
    lines = ["| input | MB | contender | wall s | CPU s | peak MB |", "|---|---:|---|---:|---:|---:|"]
    for label, size, name, r in rows:
        if "error" in r:
            lines.append(f"| {label} | {size:,.0f} | {name} | {r['error']} | | |")
        else:
            lines.append(f"| {label} | {size:,.0f} | {name} | {r['wall']:.1f} | {r['cpu']:.1f} | {r['peak']:,.0f} |")
    return "\n".join(lines)


def side_by_side(rows: list[tuple]) -> str:
    """Before, after and after / before of each figure, per input and contender, and the highest
    1-minute load average seen as one of that side's runs started."""
    head = ("| input | MB | contender | wall before | wall after | ratio | CPU before | CPU after | ratio "
            "| peak MB before | peak MB after | ratio | load before / after |")
    lines = [head, "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for label, size, name, by_side in rows:
        before = by_side.get("before", {"error": "-" if name.startswith(NOT_TRACEREAD) else "not run"})
        after = by_side.get("after", {"error": "not run"})
        cells = []
        for i, (key, fmt) in enumerate((("wall", "{:.1f}"), ("cpu", "{:.1f}"), ("peak", "{:,.0f}"))):
            b = fmt.format(before[key]) if key in before else before["error"] if not i else ""
            a = fmt.format(after[key]) if key in after else after["error"] if not i else ""
            ratio = f"{after[key] / before[key]:.2f}" if key in before and key in after and before[key] else ""
            cells += [b, a, ratio]
        load = " / ".join(f"{r['load']:.1f}" if "load" in r else "-" for r in (before, after))
        lines.append(f"| {label} | {size:,.0f} | {name} | " + " | ".join(cells) + f" | {load} |")
    return "\n".join(lines)


def baseline_checkout(ref: str, workdir: Path) -> Path:
    """A git worktree of ``ref`` under ``workdir`` with its C extensions built in place (by this
    interpreter), made once per commit and reused."""
    sha = subprocess.run(["git", "rev-parse", "--verify", f"{ref}^{{commit}}"], cwd=REPO, check=True,
                         capture_output=True, text=True).stdout.strip()
    root = (workdir / f"baseline-{sha[:12]}").resolve()
    if not (root / "traceread").is_dir():
        subprocess.run(["git", "worktree", "add", "--detach", str(root), sha], cwd=REPO, check=True)
    if not any(root.glob("traceread/loaders/kineto/_cscan*.so")):
        print(f"building {ref}'s extensions in {root} ...", file=sys.stderr)
        # setuptools must be in this environment (pip's isolated build of the editable install does not
        # leave it here: pip install setuptools)
        subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=root, check=True,
                       stdout=subprocess.DEVNULL)
    # The build skips an extension it cannot compile (optional=True); a side without one would be timed
    # on its Python twin, so each side's built set is printed beside the other's.
    built = sorted(str(p.relative_to(root)).split(".")[0] for p in root.glob("traceread/**/*.so"))
    print(f"{ref}: extensions built: {', '.join(built) or 'none'}", file=sys.stderr)
    return root


def imported_from(root: Path) -> str:
    """Where ``import traceread`` finds the package when run as the contenders run (see measure)."""
    return subprocess.run([sys.executable, "-c", "import traceread; print(traceread.__file__)"], cwd=root,
                          env={**os.environ, "PYTHONPATH": str(root)}, check=True, capture_output=True,
                          text=True).stdout.strip()


def ratios(rows: list[tuple]) -> list[str]:
    """The acceptance ratios of issue 28 that this run's rows give."""
    out = []
    for label in dict.fromkeys(r[0] for r in rows):
        got = {name: r for lb, _, name, r in rows if lb == label and "error" not in r}
        info = got.get("traceread info (the load)")
        md = got.get("traceread analyze (Markdown)")
        full = got.get("traceread analyze (Markdown + JSON)") or md
        orj = got.get("bare orjson.loads process")
        hta = next((r for n, r in got.items() if n.startswith("HTA")), None)
        ns = next((r for n, r in got.items() if n.startswith("nsys-ai")), None)
        if info and full:
            out.append(f"{label}: analyze (MD + JSON) / info = {full['wall'] / info['wall']:.1f}x wall, "
                       f"{full['cpu'] / info['cpu']:.1f}x CPU; peak {full['peak']:,.0f} MB")
        if orj and full:
            out.append(f"{label}: orjson.loads process / analyze (MD + JSON) = {orj['wall'] / full['wall']:.1f}x wall")
        if hta and full:
            out.append(f"{label}: HTA / analyze (MD + JSON) = {hta['wall'] / full['wall']:.1f}x wall")
        if ns and md:
            out.append(f"{label}: nsys-ai CPU / analyze CPU = {ns['cpu'] / md['cpu']:.1f}x; peak "
                       f"{md['peak']:,.0f} MB (analyze) vs {ns['peak']:,.0f} MB (nsys-ai)")
        engine = got.get("engine: load + steps + gaps")
        for name, r in got.items():
            if engine and name.startswith("traceread gaps"):
                budget = engine["peak"] + r.get("output_mb", 0.0)
                out.append(f"{label}: {name[len('traceread '):]} / engine = {r['wall'] / engine['wall']:.2f}x wall; "
                           f"peak {r['peak']:,.0f} MB vs engine + output {budget:,.0f} MB")
                fmt = name.rsplit("--", 1)[-1].split(" ", 1)[0] if "--" in name else None
                floor = next((w for n, w in got.items() if fmt and n == f"write of the --{fmt} output's bytes alone"), None)
                if floor:  # issue 47: each output within 1.5x the engine plus the bare write of its bytes
                    out.append(f"{label}: {name[len('traceread '):]} / (engine + write of its bytes) = "
                               f"{r['wall'] / (engine['wall'] + floor['wall']):.2f}x wall")
            elif engine and name.startswith("write of"):
                out.append(f"{label}: {name} / engine = {r['wall'] / engine['wall']:.2f}x wall")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("traces", nargs="*", help="time info and analyze on these instead of the default run")
    ap.add_argument("--source", type=Path, default=SOURCE, help="the real Kineto trace to scale")
    ap.add_argument("--sizes", default="233,1100", help="MB of JSON to scale it to (comma-separated)")
    ap.add_argument("--workdir", type=Path, default=REPO / "bench-out", help="where inputs are made (ignored by git)")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--hta-max-mb", type=float, default=300, help="run HTA on inputs up to this size")
    ap.add_argument("--kernels", type=int, default=5_000_000, help="kernels in the nsys export")
    ap.add_argument("--gaps-kernels", type=int, default=2_000_000,
                    help="kernels in the export whose gaps outputs are timed (0: skip)")
    ap.add_argument("--skip-nsys", action="store_true")
    ap.add_argument("--skip-nsys-ai", action="store_true")
    ap.add_argument("--baseline", metavar="REF",
                    help="also time every traceread contender on this commit (a worktree under --workdir, "
                         "its extensions built in place), interleaved with the current tree: one table of "
                         "before, after and ratio")
    ap.add_argument("--env-after", action="append", default=[], metavar="NAME=VALUE",
                    help="set this variable in the current tree's processes only (repeatable): with "
                         "--baseline HEAD, e.g. TRACEREAD_NO_CGAPS=1 times what one extension earns")
    opts = ap.parse_args()
    for item in opts.env_after:
        name, sep, value = item.partition("=")
        if not sep or not name:
            ap.error(f"--env-after {item!r}: expected NAME=VALUE")
        AFTER_ENV[name] = value
    # absolute: each side's processes run in their own checkout
    opts.workdir, opts.source = opts.workdir.resolve(), opts.source.resolve()
    opts.traces = [str(Path(t).resolve()) for t in opts.traces]
    opts.workdir.mkdir(parents=True, exist_ok=True)
    sides: tuple[tuple[str, Path], ...] = ()
    if opts.baseline:
        sides = (("before", baseline_checkout(opts.baseline, opts.workdir)), ("after", REPO))
    for _, root in sides or (("after", REPO),):
        if root == REPO:
            built = sorted(str(p.relative_to(root)).split(".")[0] for p in root.glob("traceread/**/*.so"))
            print(f"current tree: extensions built: {', '.join(built) or 'none'}", file=sys.stderr)
        where = Path(imported_from(root))
        if not where.is_relative_to(root):
            raise SystemExit(f"{root}: its processes import traceread from {where}, not from this checkout")
        print(f"traceread from {where}", file=sys.stderr)
        # Bytecode as an installed copy has it (pip compiles on install): a checkout run with
        # PYTHONDONTWRITEBYTECODE would otherwise compile traceread in every timed process (~0.5 s).
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(root / "traceread")], check=True)
    rows: list[tuple] = []
    with tempfile.TemporaryDirectory(prefix="bench-analyze-", dir=opts.workdir) as tmp:
        if opts.traces:  # each contender starts with its input in the page cache (cached)
            for t in map(Path, opts.traces):
                rows += run_rows(t.name, t.stat().st_size / 1e6, kineto_contenders(t, tmp, None)[:3],
                                 opts.repeat, opts.timeout, inputs=(t,), sides=sides)
        else:
            for size in (int(s) for s in opts.sizes.split(",") if s):
                trace = scaled_input(opts.workdir, opts.source, size)
                mb = trace.stat().st_size / 1e6
                hta_dir = None
                if mb <= opts.hta_max_mb and not sides:
                    hta_dir = os.path.join(tmp, f"hta-{size}")
                    os.makedirs(hta_dir, exist_ok=True)
                    os.symlink(trace.resolve(), os.path.join(hta_dir, trace.name))
                contenders = kineto_contenders(trace, tmp, hta_dir)
                if sides:  # orjson's figures are the same before and after
                    contenders = [c for c in contenders if not c[0].startswith(NOT_TRACEREAD)]
                rows += run_rows(f"{opts.source.name.split('.')[0]} x{size} MB", mb, contenders, opts.repeat,
                                 opts.timeout, inputs=(trace,), sides=sides)
            if not opts.skip_nsys:
                rows += nsys_rows(opts, opts.workdir, sides)
            if opts.gaps_kernels:
                rows += gaps_rows(opts, opts.workdir, sides)
    if sides:
        extra = "".join(f" with {k}={v}" for k, v in AFTER_ENV.items())
        print(f"before: {opts.baseline} ({sides[0][1]}); after: the current tree ({REPO}){extra}\n")
        print(side_by_side(rows))
    else:
        print(table(rows))
        print()
        for line in ratios(rows):
            print(f"* {line}")
    print(f"\nload average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())} "
          f"({os.cpu_count()} CPUs); lowest wall, CPU and peak of {opts.repeat} runs each (HTA and nsys-ai once)")


if __name__ == "__main__":
    main()
