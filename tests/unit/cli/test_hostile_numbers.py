"""Every number a user gives is finite and in range, checked once (``traceread.bounds``), and the
Python API checks its arguments as the CLI does (issue 48: numbers at their edges, the API)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd
import pytest
from tracesynth.kineto_writer import write_kineto
from tracesynth.planted import PlantSpec, plant

import traceread
from traceread import bounds
from traceread.cli import main
from traceread.errors import EXIT_USAGE
from traceread.limits import LIMITS, configure
from traceread.whatif import Fix, Scale


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("numbers")
    [path] = write_kineto(plant(PlantSpec(seed=3, ranks=1, steps=4)).scenario, str(folder / "t.pt.trace.json"))
    return path


def _one_line_usage(capsys, argv: list[str], *words: str) -> str:
    assert main(argv) == EXIT_USAGE, argv
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "internal error" not in err, err
    for w in words:
        assert w in err, (w, err)
    return err


@pytest.mark.parametrize("pct", ["nan", "inf", "-inf", "-5", "101", "1e400"])
def test_fail_on_that_could_never_fire_is_a_usage_error(trace, capsys, pct) -> None:
    # NaN compares false: `--fail-on idle:nan` passed a 100% regression
    _one_line_usage(capsys, ["analyze", trace, "--fail-on", f"one-time-cost:{pct}"], "--fail-on")


@pytest.mark.parametrize("argv", [["--max-gzip-ratio", "nan"], ["--max-gzip-ratio", "inf"],
                                  ["--max-gzip-ratio", "0.5"], ["--max-events", "-1"], ["--max-events", "0"],
                                  ["--max-json-size", "99999999999999999999T"]])
def test_limits_that_turn_a_check_off_are_usage_errors_not_blamed_on_the_file(trace, capsys, argv) -> None:
    err = _one_line_usage(capsys, [*argv, "info", trace])
    assert argv[0] in err or "size" in err
    assert "t.pt.trace.json" not in err  # the limit is at fault, not the file
    configure()
    assert LIMITS.max_gzip_ratio == 250.0


@pytest.mark.parametrize("item", ["comm-bound=1e-13", "comm-bound=nan", "comm-bound=inf", "comm-bound=0",
                                  "comm-bound=1e7"])
def test_whatif_fix_factor_outside_its_range_is_refused(trace, capsys, item) -> None:
    # 1e-13 wrapped int64 and reported a 10^13-fold slow-down as a 61% saving
    _one_line_usage(capsys, ["whatif", trace, "--fix", item], "--fix", "allowed" if "e" in item[-4:] else "")


@pytest.mark.parametrize("item", ["gemm=1e-13", "gemm=nan", "gemm=-2"])
def test_whatif_scale_factor_outside_its_range_is_refused(trace, capsys, item) -> None:
    _one_line_usage(capsys, ["whatif", trace, "--scale", item], "--scale")


def test_factor_range_is_stated_and_checked_for_the_api_too() -> None:
    assert bounds.factor("0.5", "f") == 0.5 and bounds.factor(bounds.FACTOR_MAX, "f") == bounds.FACTOR_MAX
    for bad in (bounds.FACTOR_MIN / 2, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="factor"):
            Fix("comm-bound", bad)
        with pytest.raises(ValueError, match="factor"):
            Scale("gemm", bad)


@pytest.mark.parametrize("argv", [["--seq-len", str(2**63)], ["--params", "1e400"], ["--params", "inf"],
                                  ["--global-batch", str(2**40), "--seq-len", str(2**40)],
                                  ["--tokens-per-step", "99999999999999999999"]])
def test_mfu_inputs_past_int64_are_usage_errors_not_a_json_crash(trace, capsys, tmp_path, argv) -> None:
    # accepted before, then `--json` died with exit 3
    _one_line_usage(capsys, ["analyze", trace, *argv, "--json", str(tmp_path / "r.json")])
    assert not (tmp_path / "r.json").exists()


def test_mfu_inputs_in_a_job_file_past_int64_are_refused(trace, capsys, tmp_path) -> None:
    job = tmp_path / "job.toml"
    job.write_text(f"params = 7e9\nglobal_batch = {2**63}\nseq_len = 4096\n")
    _one_line_usage(capsys, ["analyze", trace, "--job", str(job)], "job.toml")


@pytest.mark.parametrize("kwargs,kind,name", [
    ({"warmup_steps": -3}, ValueError, "warmup_steps"), ({"top_gaps": -1}, ValueError, "top_gaps"),
    ({"top_gaps": 1.5}, ValueError, "top_gaps"), ({"rank_pattern": "(x"}, ValueError, "rank_pattern"),
    ({"rank_pattern": "rank(\\d+)"}, ValueError, "rank_pattern"), ({"job": {"params": float("inf")}}, ValueError, "params"),
    ({"job": {"params": 7e9, "bogus": 1}}, ValueError, "bogus"), ({"job": 7}, TypeError, "job"),
    ({"thresholds": [1, 2]}, TypeError, "thresholds"), ({"step_range": b"x"}, TypeError, "step_range"),
])
def test_api_keywords_are_checked_as_the_cli_checks_them(trace, kwargs, kind, name) -> None:
    with pytest.raises(kind, match=name):
        traceread.analyze(trace, **kwargs)


@pytest.mark.parametrize("make", [lambda p: p.encode(), lambda p: io.StringIO(Path(p).read_text()),
                                  lambda p: pd.DataFrame({p: [1]}), lambda p: [p, p.encode()], lambda p: 42])
def test_api_refuses_objects_that_are_not_paths_naming_the_argument(trace, make) -> None:
    src = make(trace)
    with pytest.raises(TypeError, match="source") as exc:
        traceread.analyze(src)
    assert "traceEvents" not in str(exc.value)  # a file object's content never lands in the error
    with pytest.raises(TypeError, match="source"):
        traceread.load(src)


def test_api_still_takes_paths_lists_generators_and_traces(trace) -> None:
    one = traceread.load(trace)
    assert traceread.analyze(Path(trace)).verdict.cause == traceread.analyze(one).verdict.cause
    assert len(traceread.load([trace, Path(trace)])) == 2
    assert len(traceread.load(p for p in [trace])) == 1
    report = traceread.analyze(trace, job={"params": 7e9, "global-batch": 8, "seq_len": 4096}, warmup_steps=0)
    assert json.loads(report.to_json())


@pytest.mark.parametrize("pattern", ["(a+)+$", "(a|aa)*b", "(x*)*y", "(.)\\1"])
def test_user_regex_that_can_backtrack_for_ever_is_refused(trace, capsys, pattern) -> None:
    # `whatif --scale '(a+)+$'` ran over a minute on one 29-character kernel name
    _one_line_usage(capsys, ["whatif", trace, "--scale", f"{pattern}=2"], "--scale", "exponential")
    _one_line_usage(capsys, ["analyze", trace, "--step-range", pattern], "--step-range")


def test_user_regex_matching_runs_under_a_time_budget() -> None:
    import re
    import time

    rx = re.compile(r"(?:a|a?)+$".replace("(?:a|a?)+", "a*a*a*a*a*a*a*a*") + "b")  # polynomial, not refused
    bounds.user_pattern(rx.pattern, "p")
    t0 = time.monotonic()
    with pytest.raises(ValueError, match="took more than"):
        bounds.search_names(rx, ["a" * 5000], "p", budget_s=0.2)
    assert time.monotonic() - t0 < 30
    assert bounds.search_names(re.compile("gemm"), ["sgemm", "x" * 100_000 + "gemm", "conv"], "p") == [True, False, False]


@pytest.mark.parametrize("argv", [["diff", "{t}", "{t}", "--fail-on-regression", "nan"],
                                  ["scan", "{t}", "--out", "{o}", "--trace-timeout", "nan"],
                                  ["gaps", "{t}", "--top", "-1"], ["kernels", "{t}", "--top", "-1"],
                                  ["gaps", "{t}", "--warmup-steps", "-3"]])
def test_other_commands_numbers_are_checked_too(trace, capsys, tmp_path, argv) -> None:
    _one_line_usage(capsys, [a.format(t=trace, o=tmp_path / "out") for a in argv]) if argv[0] in ("diff", "scan") \
        else _click_usage(capsys, [a.format(t=trace) for a in argv])
    assert not (tmp_path / "out").exists()


def _click_usage(capsys, argv: list[str]) -> None:
    assert main(argv) == EXIT_USAGE
    assert "Invalid value" in capsys.readouterr().err
