"""No Python function of traceread runs once per gap: the analysis, its evidence sentences and its
outputs are column operations (numpy, pandas, orjson, Arrow), so their cost does not grow with a
Python call per row.

A generated trace of tens of thousands of gaps is analysed and written (JSON report, Markdown,
scan's parquet columns, ``gaps --json``) under a profiler hook that counts every call of a function
defined in traceread; the most-called one must stay far below the number of gaps. Helpers that
format once per *distinct* value (durations to the digits shown) are allowed: they are counted too,
and stay under the bound because gaps share their shown values.
"""

from __future__ import annotations

import collections
import os
import sys
from pathlib import Path

import orjson
import pytest
from tracesynth.kineto_writer import write_kineto
from tracesynth.planted import CLASSES, PlantSpec, plant

import traceread
from traceread import load
from traceread.cli import main
from traceread.render import jsonout, markdown
from traceread.runner import analyze
from traceread.scan.tables import gap_numbers, gap_texts

PER_GAP_SHARE = 0.1  # the most-called traceread function: at most one call per ten gaps
# traceread's own code is what lies under the installed package's folder: a name test ("traceread" in the
# path) also matched pandas and numpy inside a venv kept in a clone named traceread-src
PACKAGE_DIR = os.path.dirname(traceread.__file__) + os.sep


@pytest.fixture(scope="module")
def big_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = plant(PlantSpec(seed=5, ranks=1, steps=120, weights={c: 1.0 for c in CLASSES}))
    (path,) = write_kineto(p.scenario, str(tmp_path_factory.mktemp("big") / "big.pt.trace.json"))
    return Path(path)


def _calls(fn) -> collections.Counter:
    counts: collections.Counter = collections.Counter()

    def hook(frame, event, arg) -> None:
        if event == "call" and frame.f_code.co_filename.startswith(PACKAGE_DIR):
            counts[(frame.f_code.co_filename[len(PACKAGE_DIR):], frame.f_code.co_name)] += 1

    sys.setprofile(hook)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return counts


def test_analysis_and_outputs_make_no_python_call_per_gap(big_trace: Path, tmp_path: Path) -> None:
    trace = load(str(big_trace))
    holder = {}

    def run() -> None:
        a = analyze([trace])
        holder["gaps"] = len(a.gaps)
        holder["json"] = jsonout.dumps(a)
        markdown.to_markdown(a)
        gap_numbers(a.gaps), gap_texts(a.gaps, a.cfg)

    counts = _calls(run)
    gaps = holder["gaps"]
    assert gaps > 20_000
    assert len(orjson.loads(holder["json"])["gaps"]["start_ns"]) == gaps  # every gap was written
    (where, n), = counts.most_common(1)
    assert n <= PER_GAP_SHARE * gaps, f"{where} called {n} times for {gaps} gaps"


def test_gaps_command_makes_no_python_call_per_gap(big_trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "g.json"
    counts = _calls(lambda: main(["gaps", str(big_trace), "--json", str(out), "--csv", str(tmp_path / "g.csv"),
                                       "--derived"]))
    gaps = len(orjson.loads(out.read_bytes())["gaps"]["start_ns"])
    assert gaps > 20_000
    (where, n), = counts.most_common(1)
    assert n <= PER_GAP_SHARE * gaps, f"{where} called {n} times for {gaps} gaps"


def test_evidence_formatted_in_chunks_reads_the_same(big_trace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Evidence is formatted a chunk of rows at a time (a memory bound): any chunk size gives the
    same classes, sentences and kinds."""
    from traceread import rules
    from traceread.rules import evidence

    trace = load(str(big_trace))
    a = analyze([trace])
    whole = evidence.with_evidence(a.gaps, a.cfg)
    monkeypatch.setattr(rules, "EVIDENCE_CHUNK_ROWS", 997)
    monkeypatch.setattr(evidence, "CHUNK_ROWS", 997)
    b = analyze([trace])
    chunked = evidence.with_evidence(b.gaps, b.cfg)
    assert len(whole) > 10 * 997
    for c in ("class", "evidence", "evidence_kind"):
        assert chunked[c].astype(str).tolist() == whole[c].astype(str).tolist()
