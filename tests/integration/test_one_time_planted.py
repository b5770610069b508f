"""Planted one-time costs, allocator thrash, syncs and host-side work, in both formats (tracesynth.one_time).

Every scenario is written as Kineto and as nsys SQLite, loaded back and classified; idle time is
compared with the planted truth ns by ns (the machinery of scripts/eval_rules.py), at jitter 0.2.
"""

from __future__ import annotations

import io

import pytest
from tracesynth.kineto_writer import write_kineto
from tracesynth.nsys_writer import write_nsys
from tracesynth.one_time import _LAZY_QUERIES, SCENARIOS, plant_scenario
from tracesynth.planted import classify_file, confusion, scores, truth_for

from traceread import load
from traceread.config import Thresholds
from traceread.render import jsonout, markdown
from traceread.rules.evidence import with_evidence
from traceread.runner import analyze

CFG = Thresholds()
ABOUT = {"capture": ("one-time-cost",), "compile": ("one-time-cost",), "lazy-load": ("one-time-cost",),
         "allocator-thrash": ("sync-stall",), "sync-host-work": ("sync-stall",),
         "sync-then-evidence": ("data-starved", "sync-stall", "one-time-cost"), "sync-at-once": ("launch-bound",),
         "inline-input": ("data-starved",), "setup-teardown": ("one-time-cost",),
         "host-side": ("sync-stall", "launch-bound", "data-starved", "one-time-cost"),
         "recurring-copy": ("data-starved",)}


def _write(planted, fmt: str, tmp_path) -> list[str]:
    if fmt == "nsys":
        return [write_nsys(planted.scenario, str(tmp_path / "t.sqlite"))]
    return write_kineto(planted.scenario, str(tmp_path / "t.rank{rank}.pt.trace.json"))


# Scenarios scored elsewhere: through the analysis of the job (its files together: tests/unit/rules/test_across.py),
# or once CPU samples are added to the export (tests/unit/rules/test_sampled.py).
SCORED_ELSEWHERE = ("ranks-copy", "untraced-host")


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
@pytest.mark.parametrize("name", [n for n in SCENARIOS if n not in SCORED_ELSEWHERE])
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


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_inline_input_names_the_frames_and_moves_them_to_workers(fmt, tmp_path):
    """The training thread prepares the batch: data-starved ``host-input``, the frames named (not
    ``Python `<...>` ``), and the first fix is DataLoader workers."""
    planted = plant_scenario("inline-input", seed=0, jitter=0.2, steps=6, ranks=1)
    a = analyze([load(p) for p in _write(planted, fmt, tmp_path)], cfg=CFG)
    assert a.dominant_cause == "data-starved" and a.dominant_evidence == "host-input"
    g = with_evidence(a.gaps, a.cfg)
    ev = g.loc[g["evidence_kind"] == "host-input", "evidence"]
    assert len(ev) and ev.str.contains(r"preprocess|prepare_batch|make_batch").all()
    out = io.StringIO()
    markdown.render(a, out)
    verdict = out.getvalue().split("## Verdict", 1)[1].split("##", 1)[0]
    assert "DataLoader workers" in verdict and "Python `<…>`" not in out.getvalue()


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_drain_sync_evidence_names_its_origin_op_and_the_host_work(fmt, tmp_path):
    planted = plant_scenario("sync-host-work", seed=0, jitter=0.2, steps=6, ranks=1)
    a = analyze([load(p) for p in _write(planted, fmt, tmp_path)], cfg=CFG)
    assert a.dominant_cause == "sync-stall" and a.dominant_evidence == "sync"
    g = with_evidence(a.gaps, a.cfg)
    ev = g.loc[g["class"] == "sync-stall", "evidence"]
    assert ev.str.contains("cudaStreamSynchronize (from aten::item) waited", regex=False).all()
    assert ev.str.contains("log_metrics").any()


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_setup_teardown_is_one_time_with_the_ranges_named(fmt, tmp_path):
    planted = plant_scenario("setup-teardown", seed=0, jitter=0.2, steps=6, ranks=1)
    a = analyze([load(p) for p in _write(planted, fmt, tmp_path)], cfg=CFG, warmup_steps=0)
    g = with_evidence(a.gaps, a.cfg)
    g = g[g["class"] == "one-time-cost"]
    assert len(g) and (g["evidence_kind"] == "setup-teardown").all()
    assert g["evidence"].str.contains("init_data|clean_up|cudaHostAlloc|cudaFreeHost").all()


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_lazy_loading_inside_a_function_query_is_module_load(fmt, tmp_path):
    """Issue 42: a new kernel's module loading inside its first attribute / occupancy query or look-up
    (CUDA lazy loading) is one-time cost with evidence module-load that names the call: every such planted
    gap, in both formats."""
    planted = plant_scenario("lazy-load", seed=3, jitter=0.2, steps=6, ranks=1)
    queries = [c for c in planted.scenario.ranks[0].host_calls if c.name in _LAZY_QUERIES]
    assert len(queries) >= 3  # one per first step
    gaps = with_evidence(classify_file(_write(planted, fmt, tmp_path)[0], CFG), CFG)
    # (a gap held by one of these calls names it, whatever its class: "one CUDA call, X, held the host"; the
    # GPU's turnarounds while the queue drains under the call name it as their longest host call)
    named = gaps[gaps["evidence"].str.contains("|".join(sorted({q.name for q in queries})))
                 & (gaps["dur_ns"] >= 1_000_000)]
    assert len(named) == len(queries), named[["class", "evidence"]]
    assert set(named["class"]) == {"one-time-cost"} and set(named["evidence_kind"]) == {"module-load"}
