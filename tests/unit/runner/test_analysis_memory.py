"""What the analysis holds through its replay and job section: the engine's cached selections are dropped
but the replay's once the rules, attribution and tables are done (lanes.EventView.keep_selections), before
the fixes of a replay that starts after the rules, with the same results."""

from __future__ import annotations

import numpy as np
from conftest import FIXTURES

import traceread.whatif as whatif
from traceread.engine import lanes
from traceread.loaders import load
from traceread.render.whatif import record
from traceread.runner import analyze
from traceread.whatif.model import selections

ONE = FIXTURES / "hta_nccl_a100_rank0of2.json.gz"


def test_keep_selections_drops_the_rest_and_remakes_them_alike() -> None:
    v = lanes.event_view(load(ONE))
    rank = int(v.rank[0])
    ops = v.rows(lanes.OP_LANES, rank=rank).copy()
    calls = v.rows(("cpu_thread",), cats=lanes.API_CATS, rank=rank).copy()
    union = lanes.compute_union(v, rank, int(v.device[v.rows(lanes.OP_LANES)][0]))
    kept = lanes.selection_key(lanes.OP_LANES, rank=rank)
    v.keep_selections({kept})
    assert {k for k in v._rows if k[0] != "constant"} == {kept}
    assert not v._lane_rows
    np.testing.assert_array_equal(v.rows(lanes.OP_LANES, rank=rank), ops)
    np.testing.assert_array_equal(v.rows(("cpu_thread",), cats=lanes.API_CATS, rank=rank), calls)
    again = lanes.compute_union(v, rank, int(v.device[v.rows(lanes.OP_LANES)][0]))
    for a, b in zip(union, again, strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_replay_after_the_rules_starts_with_only_its_own_selections_cached(monkeypatch) -> None:
    """A replay that starts once the rules, attribution and tables are done (several inputs, or one of more
    than REPLAY_BESIDE_RULES_MAX_EVENTS events: the 5M-kernel export) finds the view holding only the
    selections it reads. (A replay beside the rules reads the gaps as soon as they are classified, beside
    the attribution and tables, which still read the engine's.) The prediction is the same either way."""
    import traceread.runner.replay as replay

    trace = load(ONE)
    beside = record(analyze([trace]).whatif)
    monkeypatch.setattr(replay, "REPLAY_BESIDE_RULES_MAX_EVENTS", 0)
    real = whatif.predict_staged
    held: list[set] = []

    def spy(traces, *args, **kwargs):
        held.append({k for k in lanes.cached_view(traces[0])._rows if k[0] != "constant"})
        return real(traces, *args, **kwargs)

    monkeypatch.setattr(whatif, "predict_staged", spy)
    a = analyze([trace])
    got = record(a.whatif)
    ranks = {int(r) for r in a.steps["rank"].unique()}
    assert held and held[0] <= {k for r in ranks for k in selections(r)}
    assert got == beside
    # the same prediction as a replay on a fresh view (every selection made again)
    monkeypatch.setattr(whatif, "predict_staged", real)
    trace.cache = None  # the engine's cache goes with it
    assert got == record(whatif.predict([trace], a.steps, a.gaps, a.cfg))


def test_the_gaps_command_classifies_without_the_engines_selections(monkeypatch, tmp_path) -> None:
    """``traceread gaps`` drops the engine's cached selections before the rules (which read their own
    context) and its tables: the same gaps as with them kept."""
    import traceread.runner.gaps as gaps_cli  # the command's stages
    from traceread.cli import main

    held: list[set] = []
    real = gaps_cli.classify

    def spy(gaps, steps, trace, *args, **kwargs):
        view = lanes.cached_view(trace)
        held.append({k for k in view._rows if k[0] != "constant"} if view is not None else set())
        return real(gaps, steps, trace, *args, **kwargs)

    monkeypatch.setattr(gaps_cli, "classify", spy)
    out = tmp_path / "dropped.csv"
    assert main(["gaps", str(ONE), "--csv", str(out)]) == 0
    assert held == [set()]
    monkeypatch.setattr(gaps_cli, "drop_selections", lambda trace: None)
    kept = tmp_path / "kept.csv"
    assert main(["gaps", str(ONE), "--csv", str(kept)]) == 0
    assert held[1] and out.read_bytes() == kept.read_bytes()
