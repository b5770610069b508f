"""The what-if replay runs on the runner's thread beside the rules (runner.replay.Replay): same results,
its failures still listed, in the same place, errors that are not a table's failure still raised, a
failure of the rules neither hangs nor leaves the replay running, and the analysis handed out is plain data."""

from __future__ import annotations

import threading

import pytest
from conftest import FIXTURES

import traceread.whatif as whatif
from traceread.loaders import load
from traceread.render.whatif import record
from traceread.runner import analyze

ONE = FIXTURES / "hta_nccl_a100_rank0of2.json.gz"


def _fails(*args, **kwargs):
    raise RuntimeError("replay broke")


def test_the_replay_runs_on_its_own_thread_and_gives_the_same_prediction(monkeypatch):
    trace = load(ONE)
    threads: list[str] = []
    real = whatif.predict_staged

    def spy(*args, **kwargs):
        threads.append(threading.current_thread().name)
        return real(*args, **kwargs)

    plain = analyze([trace])
    expected = record(whatif.predict([trace], plain.steps, plain.gaps, plain.cfg))
    monkeypatch.setattr(whatif, "predict_staged", spy)
    a = analyze([trace])
    assert record(a.whatif) == expected
    assert threads == ["traceread-whatif"]


def test_a_failed_replay_is_listed_as_unavailable_last(monkeypatch):
    trace = load(ONE)
    before = analyze([trace]).unavailable
    monkeypatch.setattr(whatif, "predict_staged", _fails)
    a = analyze([trace])
    assert a.whatif is None
    assert a.unavailable == before + ("what-if replay: failed (RuntimeError: replay broke)",)


def test_in_a_job_the_replay_failure_comes_before_the_job_sections_lines(monkeypatch):
    pair = [load(FIXTURES / "hta_nccl_a100_rank0of2.json.gz"), load(FIXTURES / "hta_nccl_a100_rank0of2.json.gz")]
    monkeypatch.setattr(whatif, "predict_staged", _fails)
    a = analyze(pair)
    assert a.job is not None  # the job path: the section waits for the replay
    assert a.whatif is None
    lines = [u for u in a.unavailable if u.startswith("what-if replay")]
    assert lines == ["what-if replay: failed (RuntimeError: replay broke)"]


def test_an_error_that_is_no_tables_failure_is_raised_where_the_replay_is_read(monkeypatch):
    # a broken install (pipeline.guarded lets ImportError through) is raised, not listed
    def broken(*args, **kwargs):
        raise ImportError("no module named traceread.whatif.model")

    trace = load(ONE)
    monkeypatch.setattr(whatif, "predict_staged", broken)
    with pytest.raises(ImportError, match="traceread.whatif.model"):
        analyze([trace])
    assert not [t for t in threading.enumerate() if t.name == "traceread-whatif"]


def test_the_analysis_handed_out_is_plain_data_with_its_replays_result(monkeypatch):
    """A replay still running when the stages are done is waited for: the analysis holds its result and no
    thread, pickles as it is and reads like any frozen dataclass."""
    import dataclasses
    import pickle
    import time

    import traceread.analysis as analysis

    trace = load(ONE)
    real = whatif.predict_staged

    def slow(*args, **kwargs):
        time.sleep(0.3)  # still running when pickled
        return real(*args, **kwargs)

    monkeypatch.setattr(whatif, "predict_staged", slow)
    a = analyze([trace])
    assert not [t for t in threading.enumerate() if t.name == "traceread-whatif"]
    assert "__getattribute__" not in vars(analysis.Analysis)
    assert {f.name for f in dataclasses.fields(a)} == set(vars(a))  # nothing but its fields
    assert a.whatif is not None
    copy = pickle.loads(pickle.dumps(a))
    assert copy.whatif is not None
    assert record(copy.whatif) == record(a.whatif)
    assert copy.unavailable == a.unavailable


def test_the_replay_models_while_the_rules_classify_and_predicts_the_same_as_after_them(monkeypatch):
    """One trace's replay builds its first rank's model before the rules are done (the rules here wait for
    that build); with the replay started only after the rules (REPLAY_BESIDE_RULES_MAX_EVENTS 0, as for a
    big trace) and with predict() on the finished analysis, the prediction is the same."""
    import traceread.analysis.pipeline as pipe
    import traceread.runner.replay as replay
    from traceread.whatif import model as mdl

    trace = load(ONE)
    late_cfg = replay.REPLAY_BESIDE_RULES_MAX_EVENTS
    monkeypatch.setattr(replay, "REPLAY_BESIDE_RULES_MAX_EVENTS", 0)
    late = analyze([trace])
    late_whatif = record(late.whatif)
    monkeypatch.setattr(replay, "REPLAY_BESIDE_RULES_MAX_EVENTS", late_cfg)

    built = threading.Event()
    real_build, real_finish = mdl.build, pipe.finish_one

    def build(*args, **kwargs):
        out = real_build(*args, **kwargs)
        built.set()
        return out

    def finish(*args, **kwargs):
        assert built.wait(timeout=120), "the replay did not build its model beside the rules"
        return real_finish(*args, **kwargs)

    monkeypatch.setattr(mdl, "build", build)
    monkeypatch.setattr(pipe, "finish_one", finish)
    early = analyze([trace])
    assert record(early.whatif) == late_whatif
    assert late_whatif == record(whatif.predict([trace], late.steps, late.gaps, late.cfg))
    assert early.unavailable == late.unavailable


def test_a_failure_of_the_rules_is_raised_and_stops_the_replay(monkeypatch):
    import traceread.analysis.pipeline as pipe

    def broken(*args, **kwargs):
        raise RuntimeError("rules broke")

    trace = load(ONE)
    monkeypatch.setattr(pipe, "finish_one", broken)
    with pytest.raises(RuntimeError, match="rules broke"):
        analyze([trace])
    assert not [t for t in threading.enumerate() if t.name == "traceread-whatif"]


def test_the_fixes_that_read_no_gap_are_replayed_before_the_rules_are_done(monkeypatch):
    """predict_staged plans (and replays) the launch, communication and memory-bound fixes before it asks
    for the classified gaps, on the core the rules leave idle; the fixes that read gaps only after; the
    prediction is predict()'s."""
    from traceread.whatif import fixes as fx

    trace = load(ONE)
    a = analyze([trace])
    assert a.whatif is not None  # waits for the analysis' own replay (its plans are not counted below)
    planned: list[str] = []
    real_plan = fx.plan

    def plan(m, fix, ctx):
        planned.append(getattr(fix, "cause", type(fix).__name__))  # the interval's HostSlowdown has no cause
        return real_plan(m, fix, ctx)

    asked: list[list[str]] = []

    def classified():
        asked.append(list(planned))
        return a.steps, a.gaps

    monkeypatch.setattr(fx, "plan", plan)
    staged = whatif.predict_staged([trace], a.steps, classified, a.cfg)
    before = set(asked[0])
    # (CommFree: each rank's own steps for the job, which come with the comm-bound fix and read no gap)
    assert before == {c for c in fx.FIX_CAUSES if not fx.reads_gaps(fx.Fix(c))} | {"CommFree"}
    assert before == {"launch-bound", "comm-bound", "memory-bound", "CommFree"}
    # the gap-reading fixes after, and the data fix's interval (it reads the host-input gaps)
    assert set(planned) - before == set(fx.GAP_CLASSES_READ) | {"HostSlowdown"}
    assert record(staged) == record(whatif.predict([trace], a.steps, a.gaps, a.cfg))


@pytest.mark.parametrize("beside", [True, False])
def test_a_replay_beside_the_rules_gets_the_classified_gaps_before_the_attribution(monkeypatch, beside):
    """One input's replay beside the rules is given its steps and gaps as soon as the gaps are classified
    (pipeline.finish_one), so its fixes are planned beside the attribution and tables; a replay after the
    rules (REPLAY_BESIDE_RULES_MAX_EVENTS 0) is given them once those are done. Once given, a second call
    changes nothing; the prediction is the same."""
    import traceread.analysis.pipeline as pipe
    import traceread.runner.replay as replay

    trace = load(ONE)
    if not beside:
        monkeypatch.setattr(replay, "REPLAY_BESIDE_RULES_MAX_EVENTS", 0)
    order: list[str] = []
    real_classified, real_attribution = replay.Replay.classified, pipe._attribution

    def classified(self, steps, gaps):
        order.append("classified")
        return real_classified(self, steps, gaps)

    def attribution(*args, **kwargs):
        order.append("attribution")
        return real_attribution(*args, **kwargs)

    monkeypatch.setattr(replay.Replay, "classified", classified)
    monkeypatch.setattr(pipe, "_attribution", attribution)
    a = analyze([trace])
    if beside:
        assert order == ["classified", "attribution", "classified"]  # the second (the analysis' own) does nothing
    else:
        assert order == ["attribution", "classified"]
    assert record(a.whatif) == record(whatif.predict([trace], a.steps, a.gaps, a.cfg))
