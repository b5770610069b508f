"""The small wordings of the reports, each as a class: counts with their plural, savings that are
never negative, Markdown escapes kept off the terminal, Perfetto tracks of negative tids, scan's best fix."""

from __future__ import annotations

import pandas as pd
import pytest

from traceread import schema
from traceread.render.fmt import NO_GAIN, plural, saving
from traceread.render.names import md_text, terminal_text
from traceread.render.perfetto import host_track_name
from traceread.scan.whatifcols import MIN_BEST_NS, best_text


@pytest.mark.parametrize(("n", "want"), [(0, "0 steps"), (1, "1 step"), (2, "2 steps"), (1234, "1,234 steps")])
def test_a_count_takes_the_plural_it_needs(n: int, want: str) -> None:
    assert plural(n, "step") == want


def test_a_count_with_an_irregular_plural() -> None:
    assert plural(1, "launch", "launches") == "1 launch"
    assert plural(3, "launch", "launches") == "3 launches"


@pytest.mark.parametrize("ns", [-155_000, -1, 0, 499])
def test_a_saving_of_nothing_or_less_reads_none(ns: int) -> None:
    assert saving(ns, -0.01) == NO_GAIN
    assert not saving(ns).startswith("-")


def test_a_saving_shows_its_amount_and_share() -> None:
    assert saving(107_811_000, 0.509) == "107.811 ms (50.9%)"
    assert saving(500) == "0.001 ms"
    # two decimals (the diff's tables): under 5 us rounds to nothing
    assert saving(4_999, decimals=2) == NO_GAIN
    assert saving(4_130_000, decimals=2) == "4.13 ms"
    assert saving(None) == "-"


def test_terminal_text_drops_markdown_escapes_but_keeps_table_pipes() -> None:
    name = "kineto2021_resnet50 *x* [a] #1 ~ a\\b <T> & c|d"
    md = md_text(name)
    assert "\\_" in md  # the Markdown file keeps its escapes
    plain = terminal_text(md)
    assert plain == name.replace("|", "\\|")  # a pipe would split the table's cell
    assert "\\_" not in terminal_text("| " + md + " |")


def test_terminal_text_of_an_entity_written_literally() -> None:
    assert terminal_text(md_text("&lt;")) == "&lt;"


def test_a_negative_tid_track_says_what_it_holds() -> None:
    notes = pd.Series([schema.LANE_CPU_ANNOTATION] * 2)
    assert host_track_name(-3, notes) == "host annotations (unknown tid: recorded as -3)"
    ops = pd.Series([schema.LANE_CPU_THREAD, schema.LANE_CPU_ANNOTATION])
    assert host_track_name(-549452224, ops).startswith("host thread (unknown tid")
    assert host_track_name(1234, ops) == "CPU thread 1234"


@pytest.mark.parametrize(("best", "ns", "want"), [
    ("memory-bound", 0, "none"), ("memory-bound", MIN_BEST_NS - 1, "none"), (None, 0, "none"),
    ("data-starved", 1_234_000_000, "data-starved 1.234")])
def test_scan_best_fix_below_the_shown_precision_is_none(best, ns, want) -> None:
    assert best_text({"whatif": {"best_fix": best, "best_recoverable_ns": ns}}) == want
    assert best_text({"whatif": None}) == ""
