"""Usage and environment errors are exit 2 with one line naming the problem, never exit 3 (issue 26).

Each case was an internal error (exit 3) found by an independent attack: an unreadable input, a
threshold outside what the analysis can take, a broken ``[kernel_patterns]`` table, a job file that
is not UTF-8, an unsupported picture format.
"""

from __future__ import annotations

import builtins
import dataclasses
import math

import pytest
from conftest import FIXTURES

from traceread import kernel_classes
from traceread.cli import main
from traceread.config import Thresholds, allowed_range
from traceread.errors import EXIT_USAGE, UsageError

FIXTURE = str(FIXTURES / "hta_alexnet_a100.json.gz")


def _one_line_usage(argv: list[str], capsys, *needles: str) -> str:
    rc = main(argv)
    err = capsys.readouterr().err.strip()
    kernel_classes.clear_user_patterns()
    assert rc == EXIT_USAGE, (argv, err)
    assert err.count("\n") == 0 and "internal error" not in err, err
    for needle in needles:
        assert needle in err, (needle, err)
    return err


@pytest.mark.parametrize("command", [["analyze", FIXTURE], ["diff", FIXTURE, FIXTURE], ["gaps", FIXTURE],
                                     ["kernels", FIXTURE]])
@pytest.mark.parametrize("setting, range_text", [
    ("clock_jump_min_ns=inf", "[0, 2^63-1]"), ("clock_jump_min_ns=nan", "[0, 2^63-1]"),
    ("clock_jump_min_ns=1.5", "[0, 2^63-1]"), ("clock_jump_min_ns=99999999999999999999", "[0, 2^63-1]"),
    ("diff_bootstrap_samples=-5", "[1, 1000000]"), ("diff_confidence=2", "(0, 1)"),
    ("diff_confidence=0", "(0, 1)"), ("healthy_max_idle=-0.1", "[0, 1]"), ("bubble_max_cv=inf", "[0, inf)"),
])
def test_threshold_out_of_range_names_key_and_range(command, setting, range_text, capsys) -> None:
    key = setting.split("=")[0]
    _one_line_usage(command + ["--set", setting], capsys, f"threshold {key}", range_text)


@pytest.mark.parametrize("name", [f.name for f in dataclasses.fields(Thresholds)])
def test_every_threshold_has_a_range_holding_its_default(name) -> None:
    f = next(f for f in dataclasses.fields(Thresholds) if f.name == name)
    lo, hi, lo_open, hi_open = allowed_range(name, type(f.default), f.metadata["unit"])
    assert lo < f.default < hi or (f.default == lo and not lo_open) or (f.default == hi and not hi_open)
    assert Thresholds().with_overrides({name: str(f.default)}) == Thresholds()
    with pytest.raises(UsageError, match=name):
        Thresholds().with_overrides({name: "nan"})
    with pytest.raises(UsageError, match=name):
        Thresholds().with_overrides({name: -math.inf})


def test_config_thresholds_of_the_wrong_type(tmp_path, capsys) -> None:
    for body in ("[thresholds]\ndiff_confidence = [1]\n", "[thresholds]\ndiff_alpha = true\n", "thresholds = 5\n"):
        conf = tmp_path / "c.toml"
        conf.write_text(body)
        _one_line_usage(["analyze", FIXTURE, "--config", str(conf)], capsys, str(conf) if body[0] == "t" else "diff_")


@pytest.mark.parametrize("command", ["analyze", "kernels", "diff", "scan"])
@pytest.mark.parametrize("body, needle", [('[kernel_patterns]\ngemm = "([a"\n', "bad regex"),
                                          ('[kernel_patterns]\nnosuch = "abc"\n', "'nosuch'"),
                                          ("[kernel_patterns]\ngemm = 5\n", "'gemm'"),
                                          ('kernel_patterns = "x"\n', "[kernel_patterns] must be a table")])
def test_bad_kernel_patterns_are_usage_errors(command, body, needle, tmp_path, capsys) -> None:
    conf = tmp_path / "c.toml"
    conf.write_text(body)
    argv = {"analyze": ["analyze", FIXTURE], "kernels": ["kernels", FIXTURE], "diff": ["diff", FIXTURE, FIXTURE],
            "scan": ["scan", str(FIXTURES), "--out", str(tmp_path / "out")]}[command]
    _one_line_usage(argv + ["--config", str(conf)], capsys, str(conf), needle)


@pytest.mark.parametrize("option", ["--job", "--config"])
def test_non_utf8_toml_is_a_usage_error(option, tmp_path, capsys) -> None:
    bad = tmp_path / "job.toml"
    bad.write_bytes(b'gpus = "\xff\xfe"\n')
    for argv in (["analyze", FIXTURE], ["diff", FIXTURE, FIXTURE]):
        _one_line_usage(argv + [option, str(bad)], capsys, str(bad), "not UTF-8")


@pytest.mark.parametrize("name", ["x.gif", "x.tiff", "x.webp", "x.bmp"])
def test_unsupported_plot_format_lists_the_accepted_ones(name, tmp_path, capsys) -> None:
    target = tmp_path / name
    _one_line_usage(["analyze", FIXTURE, "-o", str(tmp_path / "r.md"), "--plot", str(target)], capsys,
                    str(target), ".png, .svg, .pdf, .jpg, .jpeg")
    assert not target.exists() and not (tmp_path / "r.md").exists()  # refused before any analysis


@pytest.mark.parametrize("name, magic", [("p.png", b"\x89PNG"), ("p.svg", b"<?xml"), ("p.pdf", b"%PDF"),
                                         ("p.jpg", b"\xff\xd8\xff"), ("p.JPEG", b"\xff\xd8\xff")])
def test_supported_plot_formats_are_written(name, magic, tmp_path) -> None:
    assert main(["analyze", FIXTURE, "-o", str(tmp_path / "r.md"), "--plot", str(tmp_path / name)]) == 0
    assert (tmp_path / name).read_bytes().startswith(magic)


def _unreadable(path: str):
    real_open = builtins.open

    def fake_open(file, *args, **kwargs):
        if str(file) == path:
            raise PermissionError(13, "Permission denied", path)
        return real_open(file, *args, **kwargs)
    return fake_open


def test_unreadable_input_is_a_usage_error(tmp_path, monkeypatch, capsys) -> None:
    """Tests run as root, where chmod 000 still reads: the refusal is simulated at open()."""
    src = tmp_path / "t.json.gz"
    src.write_bytes(open(FIXTURE, "rb").read())
    monkeypatch.setattr(builtins, "open", _unreadable(str(src)))
    for argv in (["analyze", str(src)], ["info", str(src)], ["kernels", str(src)], ["gaps", str(src)],
                 ["diff", str(src), FIXTURE]):
        _one_line_usage(argv, capsys, str(src), "Permission denied")


def test_input_unreadable_after_sniffing_is_a_usage_error(tmp_path, monkeypatch, capsys) -> None:
    src = tmp_path / "t.json.gz"
    src.write_bytes(open(FIXTURE, "rb").read())
    monkeypatch.setattr("traceread.loaders.sniff", lambda path: "kineto")
    monkeypatch.setattr(builtins, "open", _unreadable(str(src)))
    _one_line_usage(["analyze", str(src)], capsys, str(src), "cannot read")


def test_a_folder_given_as_a_trace_is_a_usage_error(tmp_path, capsys) -> None:
    _one_line_usage(["analyze", str(tmp_path)], capsys, str(tmp_path), "directory")
