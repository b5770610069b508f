"""The module map of ``traceread/``: per package, its Python modules, their lines and the lines of its
C sources (``.c`` and ``.h``), for a git commit or the working tree.

    python scripts/module_map.py                 # the working tree (tracked and untracked, not ignored)
    python scripts/module_map.py b176cd1         # any commit, branch or tag
    python scripts/module_map.py main --depth 2  # loaders/kineto, loaders/nsys, ... apart

A package is a folder under ``traceread/`` (to ``--depth`` levels; deeper ones count in their parent);
``traceread`` itself holds the top-level modules. Lines are newline-terminated lines, blank and comment
lines included (what ``wc -l`` counts).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections import defaultdict
from pathlib import Path, PurePosixPath

REPO = Path(__file__).resolve().parent.parent
PACKAGE = "traceread"
C_SUFFIXES = (".c", ".h")


def _git(*args: str) -> bytes:
    return subprocess.run(["git", *args], cwd=REPO, check=True, capture_output=True).stdout


def files_at(ref: str | None) -> dict[str, bytes]:
    """Path -> content of every Python and C source under traceread/, at ``ref`` (None: the working tree)."""
    wanted = (".py", *C_SUFFIXES)
    if ref is None:
        names = _git("ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", PACKAGE).split(b"\0")
        paths = [n.decode() for n in names if n.decode().endswith(wanted)]
        return {p: (REPO / p).read_bytes() for p in paths if (REPO / p).is_file()}
    names = _git("ls-tree", "-r", "-z", "--name-only", ref, "--", PACKAGE).split(b"\0")
    paths = [n.decode() for n in names if n.decode().endswith(wanted)]
    if not paths:
        return {}
    # one git process for every blob: "<type> <size>\n<content>\n" per request
    out = subprocess.run(["git", "cat-file", "--batch"], cwd=REPO, check=True, capture_output=True,
                         input="".join(f"{ref}:{p}\n" for p in paths).encode()).stdout
    files, at = {}, 0
    for p in paths:
        header_end = out.index(b"\n", at)
        size = int(out[at:header_end].split()[2])
        files[p] = out[header_end + 1:header_end + 1 + size]
        at = header_end + 1 + size + 1
    return files


def package_of(path: str, depth: int) -> str:
    parts = PurePosixPath(path).parent.parts  # ("traceread", "loaders", "kineto")
    return "/".join(parts[:1 + depth])


def module_map(files: dict[str, bytes], depth: int) -> dict[str, list[int]]:
    """Package -> [modules, Python lines, C lines]."""
    rows: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for path, data in files.items():
        row = rows[package_of(path, depth)]
        if path.endswith(".py"):
            row[0] += 1
            row[1] += data.count(b"\n")
        else:
            row[2] += data.count(b"\n")
    return dict(rows)


def table(rows: dict[str, list[int]], title: str) -> str:
    lines = [f"module map of {title}", "", "| package | modules | Python lines | C lines |", "|---|---:|---:|---:|"]
    for name in sorted(rows, key=lambda n: (n != PACKAGE, n)):
        m, py, c = rows[name]
        lines.append(f"| {name} | {m} | {py:,} | {c:,} |")
    total = [sum(r[i] for r in rows.values()) for i in range(3)]
    lines.append(f"| **total** ({len(rows)} packages) | {total[0]} | {total[1]:,} | {total[2]:,} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ref", nargs="?", help="a git commit, branch or tag (default: the working tree)")
    ap.add_argument("--depth", type=int, default=1, help="folder levels under traceread/ shown apart (default 1)")
    args = ap.parse_args(argv)
    try:
        files = files_at(args.ref)
    except subprocess.CalledProcessError as e:
        print(f"module_map: {args.ref}: {e.stderr.decode(errors='replace').strip()}", file=sys.stderr)
        return 2
    title = "the working tree" if args.ref is None else args.ref
    if args.ref is not None:
        title += f" ({_git('rev-parse', '--short', args.ref).decode().strip()})"
    print(table(module_map(files, max(0, args.depth)), title))
    return 0


if __name__ == "__main__":
    sys.exit(main())
