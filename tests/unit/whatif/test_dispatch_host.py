"""The CUDA-graph plan's host side (``graphs.dispatch_host``) made ahead, beside the model's build: the same
plan and prediction as made where the plan asks for it, made once, and never left running."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import traceread
from traceread.engine.lanes import event_view
from traceread.runner import analyze
from traceread.whatif import graphs, predict_staged
from traceread.whatif import model as mdl
from traceread.whatif.fixes import Context, Fix

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
RESNET = FIXTURES / "kineto2021_resnet50_bare_list.pt.trace.json.gz"
ALEXNET = FIXTURES / "hta_alexnet_a100.json.gz"


def _on_a_thread(fn: Callable[[], Any]) -> Callable[[], Any]:
    out: list[Any] = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()

    def result() -> Any:
        t.join()
        return out[0]
    return result


@pytest.mark.parametrize("path", [RESNET, ALEXNET], ids=["resnet50", "alexnet"])
@pytest.mark.parametrize("factor", [None, 4.0])
def test_the_host_side_made_ahead_gives_the_same_dispatch_union(path: Path, factor: float | None) -> None:
    trace = traceread.load(str(path))
    a = analyze([trace])
    v = event_view(trace)
    m = mdl.build(v, 0, mdl.steps_points(a.steps, 0), a.cfg)
    fix = Fix("launch-bound", factor)
    inline = graphs.dispatch_union(m, fix, Context(v, a.gaps, a.cfg))
    made: list[int] = []

    def host() -> graphs.DispatchHost | None:
        made.append(1)
        return graphs.dispatch_host(v, 0, a.cfg)

    ctx = Context(v, a.gaps, a.cfg, ahead={graphs.DISPATCH_HOST: _on_a_thread(host)})
    ahead = graphs.dispatch_union(m, fix, ctx)
    again = graphs.dispatch_union(m, fix, ctx)  # a second plan makes it again (the piece is taken)
    assert len(inline[0]) > 0  # the fixture has dispatch to remove: the test covers something
    for got in (ahead, again):
        assert np.array_equal(got[0], inline[0]) and np.array_equal(got[1], inline[1])
    assert made == [1] and not ctx.ahead  # (taken by the first)


def test_a_piece_made_ahead_and_never_asked_for_is_waited_for_and_dropped() -> None:
    done = threading.Event()

    def slow() -> int:
        done.wait(5)
        return 1

    ctx = Context(None, None, None, ahead={"x": _on_a_thread(slow)})  # type: ignore[arg-type]
    done.set()
    ctx.settled()
    assert not ctx.ahead and "x" not in ctx.parts


@pytest.mark.parametrize("fixes", [None, [Fix("data-starved")]], ids=["every-fix", "no-graph-fix"])
def test_the_replay_hands_the_host_side_to_beside_once_per_rank_and_predicts_the_same(fixes: list[Fix] | None) -> None:
    trace = traceread.load(str(RESNET))
    a = analyze([trace])
    handed: list[Callable[[], Any]] = []

    def beside(fn: Callable[[], Any]) -> Callable[[], Any]:
        handed.append(fn)
        return _on_a_thread(fn)

    with_beside = predict_staged([trace], a.steps, lambda: (a.steps, a.gaps), a.cfg, fixes, beside=beside)
    without = predict_staged([trace], a.steps, lambda: (a.steps, a.gaps), a.cfg, fixes)
    assert with_beside == without and with_beside is not None
    assert len(handed) == (len(np.unique(a.steps["rank"])) if fixes is None else 0)
