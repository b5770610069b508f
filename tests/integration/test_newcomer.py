"""A newcomer's session: the README's commands on ``fixtures/``, run as the installed ``traceread``
command, and none of the rough edges a first user met (issue 46, "Stale and noisy") shows up.

Each command runs through a shell in a temporary folder that holds only ``fixtures/``, as
tests/test_readme.py runs the README; what it prints and writes is read back and checked for: a
count with the wrong plural ("1 steady steps"), a negative or zero predicted saving, Markdown
backslash escapes in ``whatif``/``diff`` terminal text, an empty table header cell, scan's best fix
of "0.000", a Perfetto track named "CPU thread -N", and the thresholds table without ``--verbose``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES

RESNET = "fixtures/kineto2021_resnet50_bare_list.pt.trace.json.gz"
BEFORE = "fixtures/kineto2021_resnet50_workers0_run2.pt.trace.json.gz"
AFTER = "fixtures/kineto2021_resnet50_workers4_run2.pt.trace.json.gz"
NCCL = "fixtures/hta_nccl_a100_rank0of2.json.gz"  # its replay predicts no gain for most fixes

SINGULAR_SLIP = re.compile(r"(?<![\d.,])1 (?:steady )?(?:steps|gaps|ranks|traces|kernels|jobs|GPUs)\b")
ESCAPE = re.compile(r"\\[_*\[\]#~`]")


def _run(folder: Path, command: str) -> str:
    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    env.pop("TRACEREAD_SHARED", None)
    proc = subprocess.run(command, shell=True, cwd=folder, env=env, capture_output=True, text=True,  # noqa: S602
                          timeout=600)
    assert proc.returncode == 0, f"{command}\n{proc.stderr[-2000:]}"
    return proc.stdout


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("newcomer")
    (folder / "fixtures").symlink_to(FIXTURES, target_is_directory=True)
    return folder


def _tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """Every Markdown table of ``text``: its header cells and its rows' cells."""
    lines, out = text.splitlines(), []
    for i in range(len(lines) - 1):
        if lines[i].startswith("|") and re.fullmatch(r"\|( *:?-{3,}:? *\|)+", lines[i + 1].strip()):
            rows = []
            for ln in lines[i + 2:]:
                if not ln.startswith("|"):
                    break
                rows.append(_cells(ln))
            out.append((_cells(lines[i]), rows))
    return out


def _cells(line: str) -> list[str]:
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def _no_rough_edges(text: str, where: str) -> None:
    assert not SINGULAR_SLIP.search(text), (where, SINGULAR_SLIP.search(text))
    tables = _tables(text)
    for headers, rows in tables:
        assert all(headers), f"{where}: a table header cell is empty: {headers}"
        for col, h in enumerate(headers):
            if "saving" in h.lower():
                cells = [r[col] for r in rows if col < len(r)]
                bad = [c for c in cells if c.startswith("-") or re.match(r"\+?0\.0+ ms", c)]
                assert not bad, f"{where}: a saving of nothing or less printed: {bad}"
    assert "| Threshold |" not in text, f"{where}: the thresholds table without --verbose"


def test_analyze_to_the_terminal_and_to_files(home: Path) -> None:
    text = _run(home, f"traceread analyze {RESNET}")
    assert "## Verdict" in text
    _no_rough_edges(text, "analyze")
    assert "thresholds: the defaults (`traceread analyze --verbose` lists them)." in text
    _run(home, f"traceread analyze {RESNET} -o report.md --json report.json")
    report = (home / "report.md").read_text("utf-8")
    _no_rough_edges(report, "analyze -o")
    assert report == text  # the file is what the terminal showed
    doc = json.loads((home / "report.json").read_text("utf-8"))
    assert len(doc["thresholds"]) > 50  # the JSON keeps every threshold
    # the compact part of `traceread kernels`' tables, pointing at the command for every row (issue 46)
    gpu = text.split("## Where the GPU time went", 1)[1].split("\n## ", 1)[0]
    for table in ("GPU time by launching op (top 5 of", "Copies and memsets by kind", "Host API calls (top 5 of"):
        assert table in gpu, table
    assert "| `aten::cudnn_convolution` |" in gpu and "| H2D | Pageable |" in gpu
    assert "`traceread kernels kineto2021_resnet50_bare_list.pt.trace.json.gz`" in gpu
    (tables,) = doc["kernels_tables"]
    assert len(tables["ops"]["rows"]) == 5 and tables["ops"]["total_rows"] > 5
    # the table is one flag away, and names an override
    verbose = _run(home, f"traceread analyze -v {RESNET} --set outlier_step_factor=3")
    assert "## Appendix: thresholds in force" in verbose
    assert "| Threshold |" in verbose and "`outlier_step_factor=3.0`" in verbose


def test_whatif_tables_read_as_plain_text(home: Path) -> None:
    text = _run(home, f"traceread whatif {RESNET} --fix data-starved --fix launch-bound")
    _no_rough_edges(text, "whatif")
    assert "whatif_graph_node_ns" in text and not ESCAPE.search(text)
    one = _run(home, f"traceread whatif {RESNET} --warmup-steps 5 --fix data-starved")
    assert "over 1 steady step;" in one
    nothing = _run(home, f"traceread whatif {NCCL}")
    _no_rough_edges(nothing, "whatif (no gain)")
    assert "none (no gain predicted)" in nothing
    # the JSON keeps the replay's exact signed figure
    doc = json.loads(_run(home, f"traceread whatif {NCCL} --json -"))
    assert any(p["saving_ns"] is not None and p["saving_ns"] <= 0 for p in doc["fixes"])
    _run(home, f"traceread whatif {RESNET} -o whatif.md")
    assert "whatif\\_graph\\_node\\_ns" in (home / "whatif.md").read_text("utf-8")  # Markdown keeps its escapes


def test_diff_of_the_real_pair(home: Path) -> None:
    text = _run(home, f"traceread diff {BEFORE} {AFTER} --fix data-starved")
    assert "# traceread diff" in text and "it delivered what was predicted" in text
    _no_rough_edges(text, "diff")
    assert not ESCAPE.search(text), ESCAPE.search(text)
    _run(home, f"traceread diff {BEFORE} {AFTER} --fix data-starved -o diff.md")
    md = (home / "diff.md").read_text("utf-8")
    assert "`kineto2021_resnet50_workers0_run2.pt.trace.json.gz`" in md


def test_kernels_and_info(home: Path) -> None:
    _no_rough_edges(_run(home, f"traceread kernels {RESNET}"), "kernels")
    assert "kineto" in _run(home, f"traceread info {RESNET}")


def test_perfetto_tracks_are_named_by_what_they_hold(home: Path) -> None:
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace as PfTrace

    for path, out in ((RESNET, "resnet.pftrace"), (NCCL, "nccl.pftrace")):
        _run(home, f"traceread analyze {path} --perfetto {out} -o /dev/null")
        t = PfTrace()
        t.ParseFromString((home / out).read_bytes())
        names = [p.track_descriptor.name for p in t.packet if p.HasField("track_descriptor")]
        assert any(n.startswith("CPU thread ") for n in names)
        assert not [n for n in names if n.startswith("CPU thread -")], names
        assert any(n.startswith("host ") and "unknown tid" in n for n in names)  # the fixtures have such tids


def test_scan_into_a_fresh_folder(home: Path) -> None:
    import pyarrow.parquet as pq

    _no_rough_edges(_run(home, "traceread scan fixtures/ --out scan-report"), "scan")
    one = _run(home, f"traceread scan {RESNET} --out one-trace")
    assert "1 trace analysed" in one and " in 1 job," in one
    _no_rough_edges(one + (home / "one-trace" / "index.md").read_text("utf-8"), "scan of one trace")
    out = home / "scan-report"
    index = (out / "index.md").read_text("utf-8")
    _no_rough_edges(index, "scan index.md")
    assert not re.search(r"[a-z-]+ 0\.000\s*\|\s*$", index, re.M), "a best fix that saves 0.000 GPU-s"
    doc = json.loads((out / "index.json").read_text("utf-8"))
    for row in doc["traces"] + doc["jobs"]:
        w = row.get("whatif")
        if w and w["best_fix"]:
            assert w["best_recoverable_ns"] >= 500_000
    table = pq.read_table(out / "traces.parquet").to_pandas()
    verdicts = {t["path"]: (t["dominant_cause"], t["dominant_cost_share"]) for t in doc["traces"]}
    assert set(table["path"]) == set(verdicts)
    for _, r in table.iterrows():
        cause, share = verdicts[r["path"]]
        assert r["dominant_cause"] == cause and r["dominant_cost_share"] == pytest.approx(share)
