"""Issue 48's classes for the long fuzz (``scripts/fuzz_long.py``): numbers at their edges in every
option that takes one, user regexes that backtrack, and hostile inputs (a byte order mark,
``traceEvents`` of another type or given twice, a second ``ts``, bidi controls and formula starters
in names, names of thousands of template groups, permuted correlation ids, runs of NUL bytes, an
nsys column computed on read).

``argv_case`` builds a command line whose numbers or patterns are the edge; its acceptable result
is exit 0 or 1, or exit 2 with one ``traceread:`` line (a usage error names the option, not the
file). ``mutate`` changes a Kineto JSON text; ``output_problem`` checks what the Markdown and CSV
outputs of such a case hold (no raw bidi control, no cell that starts a formula).
"""

from __future__ import annotations

import csv
import json
import random
import re
import sqlite3
from pathlib import Path

from fuzz_harness import Outcome

EDGE_NUMBERS = ["nan", "NaN", "inf", "-inf", "Infinity", "-1", "0", "0.0", "1e-13", "1e-300", "5e-324", "1e308",
                "1e400", str(2**31), str(2**53 + 1), str(2**63 - 1), str(2**63), str(2**64), "9" * 40, "0.5", "1",
                "2", "100", "101", "1.5", "-0", "0x10", "", " ", "1e3", "7B", "1.3M"]
PATTERNS = ["(a+)+$", "(x|xy)*z", "(.*a){12}", "(\\w+\\s?)+$", "^(a|a?)+$", ".*.*.*=", "[", "(?P<rank>\\d+)",
            "gemm", "(?i)nccl|gemm", "(.)\\1", "a{1,100000}"]
CLASSES = ["data-starved", "launch-bound", "comm-bound", "sync-stall", "one-time-cost", "idle", "busy", "nope"]
CAUSES = ["comm-bound", "data-starved", "launch-bound", "memory-bound", "pipeline-bubble", "sync-stall"]
MFU_FLAGS = ["--params", "--global-batch", "--seq-len", "--tokens-per-step", "--micro-batch", "--grad-accum", "--dp",
             "--gpus", "--peak-tflops", "--peak-bandwidth", "--flops-per-token", "--layers", "--hidden"]
SETS = ["outlier_step_factor", "min_judged_gap_ns", "diff_confidence", "diff_bootstrap_samples", "comm_cover",
        "whatif_memory_factor"]

JSON_KINDS = ("bom", "events-type", "events-twice", "ts-twice", "bidi-names", "formula-names", "template-names",
              "corr-permute", "nul-run")
SQLITE_KINDS = ("generated-column",)


def argv_case(rnd: random.Random, path: str, out_dir: str) -> list[str]:
    """A command line on ``path`` whose number or pattern is at an edge."""
    v = rnd.choice(EDGE_NUMBERS)
    out = str(Path(out_dir) / "out.json")
    pick = rnd.randrange(8)
    if pick == 0:
        return ["analyze", path, "--fail-on", f"{rnd.choice(CLASSES)}:{v}", "--json", out]
    if pick == 1:
        return [rnd.choice(["--max-gzip-ratio", "--max-events", "--max-json-size"]), v, "info", path]
    if pick == 2:
        return ["whatif", path, "--fix", f"{rnd.choice(CAUSES)}={v}", "--json", out]
    if pick == 3:
        return ["whatif", path, "--scale", f"{rnd.choice(PATTERNS)}={rnd.choice(['2', v])}", "--json", out]
    if pick == 4:
        flags = rnd.sample(MFU_FLAGS, rnd.randint(1, 3))
        return ["analyze", path, *[x for f in flags for x in (f, rnd.choice(EDGE_NUMBERS))], "--json", out]
    if pick == 5:
        return ["analyze", path, "--set", f"{rnd.choice(SETS)}={v}", "--json", out]
    if pick == 6:
        return ["analyze", path, rnd.choice(["--step-range", "--rank-pattern"]), rnd.choice(PATTERNS), "--json", out]
    return ["analyze", path, "--warmup-steps", v, "--top-gaps", rnd.choice(EDGE_NUMBERS), "--json", out]


def argv_problem(outcome: Outcome) -> str | None:
    """Why the result of an :func:`argv_case` is not acceptable, or None."""
    if outcome.rc is None:
        return outcome.why
    if outcome.control:
        return f"a raw control character reached the output: {outcome.control}"
    if outcome.rc in (0, 1):
        return None
    err = outcome.err.strip()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    if outcome.rc != 2 or "Traceback" in err or not lines or not all(ln.startswith(("traceread: ", "Error: ", "Usage: ",
                                                                                     "Try ")) for ln in lines):
        return f"exit {outcome.rc}: {err[-600:]}"
    return None


def _doc(text: str) -> tuple[dict | list, list]:
    doc = json.loads(text)
    evs = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
    return doc, evs if isinstance(evs, list) else []


def _named(evs: list) -> list[dict]:
    return [ev for ev in evs if isinstance(ev, dict) and isinstance(ev.get("name"), str)
            and ev.get("cat") in ("kernel", "cpu_op", "user_annotation", "gpu_memcpy", "cuda_runtime")]


def mutate(rnd: random.Random, text: str, kind: str) -> tuple[bytes, str]:
    """Mutation ``kind`` (one of JSON_KINDS) of the Kineto JSON ``text``."""
    raw = text.encode("utf-8")
    if kind == "bom":
        return b"\xef\xbb\xbf" + rnd.choice([b"", b" ", b"\n"]) + raw, "a UTF-8 byte order mark first"
    if kind == "nul-run":
        at = rnd.randrange(len(raw))
        n = rnd.choice([1, 100, 4096, 70_000])
        return raw[:at] + bytes(n) + raw[at:], f"{n} NUL bytes at byte {at}"
    doc, evs = _doc(text)
    if kind == "events-type" and isinstance(doc, dict):
        value = rnd.choice(['"a string"', "null", "{}", "3", "true"])
        out = json.dumps({**doc, "traceEvents": "\u2603"}).replace('"\u2603"', value)
        return out.encode(), f"traceEvents = {value}"
    if kind == "events-twice" and isinstance(doc, dict):
        body = json.dumps(doc)
        other = rnd.choice(["[]", json.dumps(evs[: len(evs) // 2]), '"x"'])
        out = '{"traceEvents": ' + other + ", " + body[1:] if rnd.random() < 0.5 else body[:-1] + ', "traceEvents": ' + other + "}"
        return out.encode(), f"traceEvents given twice ({other[:20]})"
    if kind == "ts-twice":
        body = json.dumps(doc)
        spots = [m.end() for m in re.finditer(r'"ts": [0-9.e+-]+', body)]
        if not spots:
            return raw, "no ts to repeat"
        done = []
        for at in sorted(rnd.sample(spots, min(len(spots), rnd.randint(1, 5))), reverse=True):
            v = rnd.choice(["1", "0", "-5", "1e300", str(2**63)])
            body = body[:at] + f', "ts": {v}' + body[at:]
            done.append(v)
        return body.encode(), f"a second ts in {len(done)} event(s): {', '.join(done)}"
    named = _named(evs)
    if not named:
        return raw + b"garbage", "trailing garbage"
    if kind == "bidi-names":
        for ev in rnd.sample(named, min(len(named), rnd.randint(1, 30))):
            ev["name"] = rnd.choice(["\u202e", "\u2066", "\u2067\u2069", "\u200f", "\u061c"]) + ev["name"]
        return json.dumps(doc).encode(), "bidi controls in names"
    if kind == "formula-names":
        for ev in rnd.sample(named, min(len(named), rnd.randint(1, 30))):
            ev["name"] = rnd.choice(["=", "+", "-", "@", "\t=", "\r="]) + rnd.choice(["cmd|' /C calc'!A0", "1+1",
                                                                                     'HYPERLINK("http://x")']) + ev["name"]
        return json.dumps(doc).encode(), "names starting a spreadsheet formula"
    if kind == "template-names":
        n = rnd.choice([10, 300, 1_600, 3_000])
        for k, ev in enumerate(rnd.sample(named, min(len(named), rnd.randint(1, 8)))):
            if rnd.random() < 0.5:
                ev["name"] = "void k<" + ", ".join(f"F{i}<float, {i * (k + 1)}>" for i in range(n)) + f", {k}>(int)"
            else:
                ev["name"] = "void k<" + "A<" * n + "int" + ">" * n + f", {k}>(int)"
        return json.dumps(doc).encode(), f"names of {n} template groups"
    # corr-permute: the kernels' correlation ids shuffled among them
    kernels = [ev for ev in evs if isinstance(ev, dict) and ev.get("cat") == "kernel" and isinstance(ev.get("args"), dict)]
    ids = [ev["args"].get("correlation") for ev in kernels]
    rnd.shuffle(ids)
    for ev, c in zip(kernels, ids, strict=True):
        ev["args"]["correlation"] = c
    return json.dumps(doc).encode(), f"correlation ids of {len(kernels)} kernels permuted"


def mutate_sqlite(rnd: random.Random, path: Path, kind: str) -> str:
    """``generated-column``: a kernel column computed on every read (refused, never evaluated)."""
    with sqlite3.connect(path) as db:
        table = "CUPTI_ACTIVITY_KIND_KERNEL"
        row = db.execute("SELECT sql FROM sqlite_master WHERE name = ?", (table,)).fetchone()
        if row is None:
            return "no kernel table"
        col = rnd.choice(["start", "end", "deviceId"])
        cols = [r[1] for r in db.execute(f"PRAGMA table_info({table})")]
        if col not in cols:
            return f"no {col} column"
        keep = [c for c in cols if c != col]
        how = rnd.choice(["VIRTUAL", "STORED"])
        db.execute(f"CREATE TABLE K2 (g0 INTEGER, {', '.join(keep)}, {col} INTEGER GENERATED ALWAYS AS "
                   f"(g0 + length(zeroblob(100000)) * 0) {how})")
        db.execute(f"INSERT INTO K2 (g0, {', '.join(keep)}) SELECT {col}, {', '.join(keep)} FROM {table}")
        db.execute(f"DROP TABLE {table}")
        db.execute(f"ALTER TABLE K2 RENAME TO {table}")
    return f"{col} a {how} generated column"


_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def output_problem(md: Path, csv_path: Path) -> str | None:
    """A raw bidi control in the Markdown or CSV, or a CSV cell that starts a formula; else None."""
    for p in (md, csv_path):
        if p.exists() and (m := _BIDI.search(p.read_text(encoding="utf-8", errors="replace"))):
            return f"a raw bidi control U+{ord(m.group()):04X} reached {p.name}"
    if csv_path.exists():
        with open(csv_path, encoding="utf-8", errors="replace", newline="") as fh:
            for row in csv.reader(fh):
                for cell in row:
                    if cell[:1] in ("=", "+", "@", "\t", "\r") or (cell[:1] == "-" and not _number(cell)):
                        return f"a CSV cell starts a formula: {cell[:40]!r}"
    return None


def _number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False
