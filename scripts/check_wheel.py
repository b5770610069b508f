"""Build the wheel, check what it ships, and run every documented command from it in a fresh venv.

    python scripts/check_wheel.py [--keep DIR]

What ``pip install .`` gives a user: the wheel must hold the ``traceread`` package (and its data
files) and nothing else, the synthetic-trace generator (tests/tracesynth) least of all; then, in a
new virtual environment with only that wheel and its dependencies, ``traceread --help`` and each
command the README documents (analyze, info, gaps, kernels, diff, scan) run on ``fixtures/`` files
and exit 0. Exits 1 on the first failure. Takes a minute or two (the build compiles the scanner,
the venv installs the dependencies). tests/test_packaging.py checks the package discovery cheaply
on every test run; this is the full check.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import zipfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(REPO, "fixtures")
RESNET = os.path.join(FIX, "kineto2021_resnet50_bare_list.pt.trace.json.gz")
NCCL = os.path.join(FIX, "hta_nccl_a100_rank0of2.json.gz")
ALEXNET = os.path.join(FIX, "hta_alexnet_a100.json.gz")


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    print("$", " ".join(cmd), flush=True)
    res = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if res.returncode != 0:
        sys.exit(f"FAILED (exit {res.returncode}): {' '.join(cmd)}\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}")
    return res


def wheel_names(whl: str) -> list[str]:
    with zipfile.ZipFile(whl) as z:
        return z.namelist()


def check_content(names: list[str]) -> None:
    tops = {n.split("/", 1)[0] for n in names}
    extra = {t for t in tops if t != "traceread" and not t.endswith(".dist-info")}
    if extra:
        sys.exit(f"FAILED: the wheel ships more than traceread: {sorted(extra)}")
    synth = [n for n in names if "synth" in n]
    if synth:
        sys.exit(f"FAILED: the wheel ships the test-side generator: {synth[:5]}")
    for needed in ("traceread/__init__.py", "traceread/cli/__init__.py"):
        if needed not in names:
            sys.exit(f"FAILED: the wheel lacks {needed}")
    print(f"wheel content: {len(names)} files, top level {sorted(tops)}, no generator")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keep", help="build and install under this directory (kept) instead of a temporary one")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or tmp
        os.makedirs(work, exist_ok=True)
        whl_dir = os.path.join(work, "wheel")
        run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", whl_dir, REPO])
        whl = next(os.path.join(whl_dir, f) for f in os.listdir(whl_dir) if f.endswith(".whl"))
        check_content(wheel_names(whl))
        venv = os.path.join(work, "venv")
        run([sys.executable, "-m", "venv", venv])  # the wheel's tag is this interpreter's
        py = os.path.join(venv, "bin", "python")
        run([py, "-m", "pip", "install", "-q", whl])
        exe = os.path.join(venv, "bin", "traceread")
        out = os.path.join(work, "out")
        os.makedirs(out, exist_ok=True)
        # Outside the checkout, so the installed package is imported, never the source tree.
        cwd = {"cwd": out}
        run([exe, "--help"], **cwd)
        run([py, "-c", "import traceread, importlib.util as u; assert u.find_spec('tracesynth') is None; "
                       "print('imported from', traceread.__file__)"], **cwd)
        run([exe, "analyze", RESNET, "-o", os.path.join(out, "report.md")], **cwd)
        run([exe, "analyze", RESNET, "--json", os.path.join(out, "report.json")], **cwd)
        run([exe, "info", RESNET, NCCL], **cwd)
        run([exe, "gaps", RESNET, "--csv", os.path.join(out, "gaps.csv")], **cwd)
        run([exe, "kernels", NCCL], **cwd)
        run([exe, "diff", ALEXNET, RESNET], **cwd)
        run([exe, "scan", FIX, "--out", os.path.join(out, "scan")], **cwd)
    print("OK: the wheel ships traceread only, and every documented command runs from it")


if __name__ == "__main__":
    main()
