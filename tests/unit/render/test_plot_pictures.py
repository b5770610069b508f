"""The timeline pictures as a user reads them: every rank of a job drawn with the straggler marked,
labels that never overlap, busy and idle never drawn in the same place, formats by extension."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from tracesynth.kineto_writer import write_kineto
from tracesynth.model import HostRange
from tracesynth.stragglers import MAIN, StragglerSpec, make_job, write_job

from traceread.cli import main
from traceread.loaders import load
from traceread.render import plot, plot_job, plotbits
from traceread.runner import analyze

# One xdist worker runs this module's tests (tests/conftest.py ONE_WORKER_MODULES): its module-scoped ``job8`` is made once.

STRAGGLER = 5
FIXTURE = str(Path(__file__).resolve().parents[3] / "fixtures" / "hta_alexnet_a100.json.gz")


@pytest.fixture(scope="module")
def job8(tmp_path_factory):
    d = tmp_path_factory.mktemp("job8")
    job = make_job(StragglerSpec(ranks=8, straggler=STRAGGLER, steps=6))
    paths = write_job(job, str(d))
    return job, paths, analyze([load(p) for p in paths])


def _row_labels(ax) -> list[tuple[str, str]]:
    return [(t.get_text(), t.get_color()) for t in ax.get_yticklabels()]


def test_job_picture_has_every_rank_and_marks_the_straggler(job8) -> None:
    job, _, a = job8
    assert job.truth["straggler"] == STRAGGLER
    fig = plot_job.figure(a, plot_job.select_units(a, None))
    panels = [ax for ax in fig.axes if ax.get_yticklabels()]
    assert len(panels) == 2  # the median and the worst step
    for ax in panels:
        labels = _row_labels(ax)
        ranks = [t for t, _ in labels if t.startswith("rank ")]
        assert [int(t.split()[1]) for t in ranks] == list(range(8))  # every rank, in order, once
        marked = [t for t, c in labels if "STRAGGLER" in t]
        assert len(marked) == 1 and marked[0].startswith(f"rank {STRAGGLER} ")
        assert all(c == plotbits.STRAGGLER_COLOR for t, c in labels if "STRAGGLER" in t)
        assert all(c != plotbits.STRAGGLER_COLOR for t, c in labels if "STRAGGLER" not in t)


def test_cli_draws_the_job_and_a_chosen_rank(job8, tmp_path, capsys) -> None:
    _, paths, _ = job8
    png = tmp_path / "job.png"
    assert main(["analyze", *paths, "-o", str(tmp_path / "r.md"), "--plot", str(png)]) == 0
    assert png.read_bytes().startswith(b"\x89PNG")
    two = tmp_path / "two.svg"
    assert main(["analyze", *paths, "-o", str(tmp_path / "r.md"), "--plot", str(two), "--ranks", "2,5"]) == 0
    text = two.read_text()
    assert "rank 2 / GPU 0" in text and "rank 5 / GPU 0" in text and "rank 3 / GPU 0" not in text
    capsys.readouterr()
    assert main(["analyze", *paths, "-o", str(tmp_path / "r.md"), "--plot", str(tmp_path / "n.png"),
                 "--ranks", "9"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--ranks" in err[0] and "0-7" in err[0]


@pytest.mark.parametrize("ranks", ["x", "3-1", "1,,2"])
def test_bad_rank_lists_are_refused_before_any_analysis(ranks, tmp_path, capsys) -> None:
    out = tmp_path / "p.png"
    assert main(["analyze", FIXTURE, "-o", str(tmp_path / "r.md"), "--plot", str(out),
                 "--ranks", ranks]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert not out.exists() and not (tmp_path / "r.md").exists()


def _nested_trace(tmp_path) -> str:
    """One rank whose steps hold three nested annotations of long names, wide enough to be labelled."""
    job = make_job(StragglerSpec(ranks=1, straggler=None, steps=4, offsets_ns=(0,)))
    sc = job.scenarios[0]
    rk = sc.ranks[0]
    steps = sorted((h.start_ns, h.end_ns) for h in rk.host_ranges if h.name.startswith("ProfilerStep#"))
    extra = []
    for s, e in steps:
        d = e - s
        extra += [HostRange(MAIN, "forward_pass_of_the_whole_transformer_model", s + d // 20, s + d * 9 // 10),
                  HostRange(MAIN, "decoder_layer_block_number_seven_with_attention", s + d // 10, s + d * 8 // 10),
                  HostRange(MAIN, "scaled_dot_product_attention_flash_kernel_wrapper", s + d // 8, s + d * 6 // 10)]
    sc = dataclasses.replace(sc, ranks=[dataclasses.replace(rk, host_ranges=rk.host_ranges + extra)])
    return write_kineto(sc, str(tmp_path / "nested.json"))[0]


def test_labels_never_overlap_and_stay_inside_their_bars(tmp_path) -> None:
    a = analyze([load(_nested_trace(tmp_path))])
    fig = plot._rank_figure(a, None)
    renderer = fig.canvas.get_renderer()
    checked = 0
    for ax in fig.axes:
        boxes = [t.get_window_extent(renderer) for t in ax.texts if t.get_text()]
        for i, b in enumerate(boxes):
            for c in boxes[i + 1:]:
                assert not b.overlaps(c) or abs(b.y0 - c.y0) > 1, "two labels drawn over each other"
        names = [t.get_text() for t in ax.texts]
        # nested annotations: one row per depth, each with its own name
        for prefix in ("forward_pass", "decoder_layer", "scaled_dot"):
            assert any(n.startswith(prefix) for n in names)
        checked += len(boxes)
    assert checked >= 2


def test_fitted_labels_on_one_row_are_elided_and_disjoint() -> None:
    starts, widths = np.array([0.0, 1.0, 1.5, 9.0]), np.array([10.0, 6.0, 2.0, 0.05])
    names = ["outer_" * 40, "middle_" * 20, "inner", "tiny"]
    got = plotbits.fitted_labels(starts, widths, names, window_ms=10.0)
    half = [(len(t) + 1) * plotbits.CHAR_PX / (plotbits.AXES_PX / 10.0) / 2 for _, t in got]
    spans = sorted((x - h, x + h) for (x, _), h in zip(got, half, strict=True))
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))  # no two labels overlap
    assert got[0][1].startswith("outer_") and len(got[0][1]) < len(names[0])  # elided to its bar
    texts = [t for _, t in got]
    assert "tiny" not in texts  # no room: dropped
    assert not any(t.startswith("middle") for t in texts)  # it would overlap the outer label: dropped


def test_busy_bars_and_idle_shading_never_share_a_column(job8) -> None:
    _, _, a = job8
    s = a.steps.iloc[3]
    lo, hi = int(s["start_ns"]), int(s["end_ns"])
    e = plotbits.edges(lo, hi)
    from traceread.render import timeline

    gaps = timeline.gaps_in(a, int(s["trace"]), int(s["rank"]), int(s["device"]), lo, hi)
    ev = timeline.events_in(a, int(s["trace"]), int(s["rank"]), int(s["device"]), lo, hi, ("gpu_compute",))
    idle, _ = plotbits.idle_columns(gaps, e)
    busy = plotbits.busy_columns(ev, e, idle)
    assert idle.any() and busy.any() and not (idle & busy).any()
    # every column with no compute at all is shaded when a gap covers it: idle is not hidden either
    cov = plotbits.coverage(ev["start_ns"].to_numpy(), ev["end_ns"].to_numpy(), e)
    gap_cov = plotbits.coverage(gaps["start_ns"].to_numpy(), gaps["end_ns"].to_numpy(), e)
    assert np.all(idle[(cov == 0) & (gap_cov == np.diff(e))])


@pytest.mark.parametrize("name, magic", [("p.jpg", b"\xff\xd8\xff"), ("p.jpeg", b"\xff\xd8\xff")])
def test_jpeg_is_a_jpeg(name, magic, tmp_path) -> None:
    from PIL import Image

    out = tmp_path / name
    assert main(["analyze", FIXTURE, "-o", str(tmp_path / "r.md"), "--plot", str(out)]) == 0
    assert out.read_bytes().startswith(magic)
    with Image.open(out) as im:
        assert im.format == "JPEG" and im.size[0] >= 900


def test_unknown_picture_extension_is_one_usage_line(tmp_path, capsys) -> None:
    out = tmp_path / "x.foo"
    assert main(["analyze", FIXTURE, "-o", str(tmp_path / "r.md"), "--plot", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "x.foo" in err[0] and ".jpg" in err[0]
    assert not out.exists()
