"""Planted one-time costs, allocator thrash and sync-then-host-work, in both formats (tracesynth.one_time).

Every scenario is written as Kineto and as nsys SQLite, loaded back and classified; idle time is
compared with the planted truth ns by ns (the machinery of scripts/eval_rules.py), at jitter 0.2.
"""

from __future__ import annotations

import io

import pytest
from tracesynth.kineto_writer import write_kineto
from tracesynth.nsys_writer import write_nsys
from tracesynth.one_time import SCENARIOS, plant_scenario
from tracesynth.planted import classify_file, confusion, scores, truth_for

from traceread import load
from traceread.analysis import analyze
from traceread.config import Thresholds
from traceread.render import jsonout, markdown

CFG = Thresholds()
ABOUT = {"capture": ("one-time-cost",), "compile": ("one-time-cost",), "lazy-load": ("one-time-cost",),
         "allocator-thrash": ("sync-stall",), "sync-host-work": ("launch-bound", "unattributed")}


def _write(planted, fmt: str, tmp_path) -> list[str]:
    if fmt == "nsys":
        return [write_nsys(planted.scenario, str(tmp_path / "t.sqlite"))]
    return write_kineto(planted.scenario, str(tmp_path / "t.rank{rank}.pt.trace.json"))


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_planted_scenario_scores_by_time(name, fmt, tmp_path):
    planted = plant_scenario(name, seed=3, jitter=0.2, steps=6)
    total = None
    for path in _write(planted, fmt, tmp_path):
        classified = classify_file(path, CFG)
        mat, _ = confusion(classified, truth_for(planted.truth, classified, planted.scenario.origin_epoch_ns))
        total = mat if total is None else total + mat
    s = scores(total)
    for cls in ABOUT[name]:
        assert s.loc[cls, "truth_ns"] > 0
        assert s.loc[cls, "precision"] >= 0.95 and s.loc[cls, "recall"] >= 0.95, s


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_allocator_thrash_gets_the_allocator_fix_first(fmt, tmp_path):
    """Gaps held by recurring cudaFree/cudaMalloc: sync-stall named 'allocator', and the first fix and
    the first lever are the caching allocator's, not 'remove .item()'."""
    planted = plant_scenario("allocator-thrash", seed=1, jitter=0.2, steps=6, ranks=1)
    a = analyze([load(p) for p in _write(planted, fmt, tmp_path)], cfg=CFG)
    assert a.dominant_cause == "sync-stall" and a.dominant_evidence == "allocator"
    out = io.StringIO()
    markdown.render(a, out)
    text = out.getvalue().replace("\\_", "_")  # markdown escapes underscores
    verdict = text.split("## Verdict", 1)[1].split("##", 1)[0]
    assert "expandable_segments" in verdict and ".item()" not in verdict
    levers = text.split("## What to do next", 1)[1]
    assert levers.index("expandable_segments") < levers.index(".item()")
    assert jsonout.to_report(a)["dominant_evidence"] == "allocator"


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_capture_window_is_not_steady_state(fmt, tmp_path):
    planted = plant_scenario("capture", seed=2, jitter=0.2, steps=2, ranks=1)
    a = analyze([load(p) for p in _write(planted, fmt, tmp_path)], cfg=CFG, warmup_steps=0)
    assert a.dominant_cause == "one-time-cost" and a.dominant_evidence == "graph-capture"
