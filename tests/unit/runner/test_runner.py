"""The runner owns the heap and the engine's cache: the analysis' stages called on their own give no page
back (their ``between`` hooks do nothing by default), the runner gives pages back between the same
phases as before, and the traces of one analysis share one engine cache (one event view at a time)."""

from __future__ import annotations

import dataclasses
import pickle
import sys

from conftest import FIXTURES

from traceread import runner
from traceread.analysis import finish
from traceread.analysis import pipeline as pipe
from traceread.config import Thresholds
from traceread.engine.lanes import EngineCache, cached_view, event_view
from traceread.loaders import load
from traceread.runner import heap, replay

ONE = FIXTURES / "hta_nccl_a100_rank0of2.json.gz"


def _trims(monkeypatch) -> list[str]:
    """The function that asked for each trim (the caller of ``heap.trim``)."""
    callers: list[str] = []
    monkeypatch.setattr(heap, "_looked", True)
    monkeypatch.setattr(heap, "_trim", lambda pad: callers.append(sys._getframe(2).f_code.co_name) or 0)
    return callers


def test_the_stages_alone_give_nothing_back_and_the_runner_gives_back_between_them(monkeypatch) -> None:
    trace = load(ONE)
    callers = _trims(monkeypatch)
    cfg = Thresholds()
    per = [pipe.found_steps(0, trace, cfg, None, None)]
    alone = finish([trace], per, None, cfg, 10, (), None)
    assert callers == []  # no domain module trims by itself
    monkeypatch.setattr(replay, "REPLAY_BESIDE_RULES_MAX_EVENTS", 0)  # the replay after the rules: trims not held
    a = runner.analyze([trace])
    assert a.dominant_cause == alone.dominant_cause and a.steps.equals(alone.steps)
    # where the trims were before the runner owned them: after the steps, between devices, after the rules,
    # after the classified gaps and the tables, before the replay, in the replay's model build and between ranks
    assert {"find_steps", "find_gaps", "classify", "finish_one", "rules_done", "build", "_each_unit",
            "predict_staged"} <= set(callers)
    callers.clear()
    runner.load(ONE)
    assert callers == ["load"]
    callers.clear()
    load(ONE)
    assert callers == []


def test_the_traces_of_an_analysis_share_one_engine_cache_holding_one_view() -> None:
    a, b = load(ONE), load(FIXTURES / "hta_alexnet_a100.json.gz")
    assert a.cache is None and b.cache is None
    runner.analyze([a, b])
    assert isinstance(a.cache, EngineCache) and a.cache is b.cache
    held = [t for t in (a, b) if cached_view(t) is not None]
    assert len(held) == 1  # one view at a time, as the one module cache held before
    view = event_view(held[0])
    assert cached_view(held[0]) is view
    copy = pickle.loads(pickle.dumps(held[0]))  # the cache is not data: pickled empty
    assert copy.cache.view is None and copy.events.equals(held[0].events)
    assert not next(f for f in dataclasses.fields(copy) if f.name == "cache").compare  # nor compared


def test_a_traces_tables_are_made_on_threads_beside_its_steps_and_rules_and_read_as_before(monkeypatch) -> None:
    """One small input: the runner makes what reads no steps (sanity notes, kernel and compact tables) on a
    thread while the steps are found, and the collective table on one while the gaps are found and
    classified; the analysis holds the same tables, notes and unavailable lines as the stages walked alone
    (each made where it is read)."""
    import threading

    trace = load(ONE)
    cfg = Thresholds()
    alone = finish([trace], [pipe.found_steps(0, trace, cfg, None, None)], None, cfg, 10, (), None)
    made_on: dict[str, list[str]] = {"steps_free": [], "_collectives": []}

    def recording(name: str):
        fn = getattr(pipe, name)

        def recorded(*args):
            made_on[name].append(threading.current_thread().name)
            return fn(*args)
        return recorded

    for name in made_on:
        monkeypatch.setattr(pipe, name, recording(name))
    a = runner.analyze([load(ONE)])
    assert made_on == {"steps_free": ["traceread-beside"], "_collectives": ["traceread-beside"]}
    assert a.kernels.equals(alone.kernels) and a.collectives.equals(alone.collectives)
    (got,), (want,) = a.tables, alone.tables
    assert got is not None and want is not None and got.frames.keys() == want.frames.keys()
    for name, frame in want.frames.items():
        assert (frame is None and got.frames[name] is None) or frame.equals(got.frames[name]), name
    assert got.notes == want.notes and got.rows == want.rows
    assert a.unavailable == alone.unavailable and a.notes == alone.notes


def test_a_view_asked_for_by_two_threads_together_is_built_once(monkeypatch) -> None:
    """The steps and the tables beside them both ask for the trace's event view: under the runner's lock the
    second waits for the first's view instead of building one of its own."""
    import threading
    import time

    from traceread.engine import lanes

    trace = load(ONE)
    runner.share_cache([trace])
    builds: list[str] = []
    build = lanes._built_view

    def slow(t):
        builds.append(threading.current_thread().name)
        time.sleep(0.2)  # the other thread asks meanwhile
        return build(t)

    monkeypatch.setattr(lanes, "_built_view", slow)
    got: list[object] = []
    other = threading.Thread(target=lambda: got.append(event_view(trace)))
    other.start()
    mine = event_view(trace)
    other.join()
    assert len(builds) == 1 and got == [mine]


def test_early_is_given_the_analysis_before_its_whatif_and_the_whole_one() -> None:
    """One rank: ``early`` gets the analysis as found (no what-if yet) and a function returning the analysis
    ``analyze`` returns; they differ only in the what-if and its unavailable lines. A job of several inputs
    gets the whole analysis twice."""
    calls: list[tuple] = []

    def early(found, whole):
        calls.append((found, whole()))

    a = runner.analyze([load(ONE)], early=early)
    ((found, whole),) = calls
    assert found.whatif is None and whole is a and a.whatif is not None
    for f in dataclasses.fields(a):
        assert f.name in ("whatif", "unavailable") or getattr(found, f.name) is getattr(a, f.name), f.name
    calls.clear()
    b = runner.analyze([load(ONE), load(FIXTURES / "hta_alexnet_a100.json.gz")], early=early)
    ((found, whole),) = calls
    assert found is b and whole is b
