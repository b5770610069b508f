"""Input limits: a gzip bomb, an over-size JSON and a memory cap end in one-line exit-2 errors."""

from __future__ import annotations

import gzip
import subprocess
import sys

import pytest
from conftest import FIXTURES

from traceread.cli import main
from traceread.errors import EXIT_USAGE, UsageError
from traceread.limits import LIMITS, Limits, parse_size


@pytest.fixture(autouse=True)
def _restore_limits():
    saved = Limits(**vars(LIMITS))
    yield
    for k, v in vars(saved).items():
        setattr(LIMITS, k, v)


def _bomb(tmp_path, mb: int):
    path = tmp_path / "bomb.json.gz"
    path.write_bytes(gzip.compress(b'{"traceEvents":[' + b" " * (mb << 20) + b"]}", 9, mtime=0))
    return path


def test_parse_size() -> None:
    assert parse_size("64G") == 64 << 30 and parse_size("512M") == 512 << 20 and parse_size("1000") == 1000
    assert parse_size("1.5k") == 1536 and parse_size("2GiB") == 2 << 30
    with pytest.raises(UsageError):
        parse_size("lots")


def test_gzip_bomb_is_refused_by_ratio(tmp_path, capsys) -> None:
    LIMITS.gzip_ratio_after_bytes = 1 << 20
    path = _bomb(tmp_path, 24)
    assert main(["info", str(path)]) == EXIT_USAGE
    err = capsys.readouterr().err.strip()
    assert "bomb.json.gz" in err and "gzip bomb" in err and err.count("\n") == 0


def test_ratio_limit_can_be_raised(tmp_path) -> None:
    LIMITS.gzip_ratio_after_bytes = 1 << 20
    path = _bomb(tmp_path, 24)
    assert main(["--max-gzip-ratio", "100000", "info", str(path)]) == 0


def test_max_json_size(tmp_path, capsys) -> None:
    path = _bomb(tmp_path, 8)
    assert main(["--max-json-size", "4M", "info", str(path)]) == EXIT_USAGE
    assert "more than" in capsys.readouterr().err
    assert main(["--max-json-size", "64M", "--max-gzip-ratio", "1e9", "info", str(path)]) == 0


def test_real_traces_pass_the_default_limits() -> None:
    for p in FIXTURES.glob("*.gz"):
        assert main(["info", str(p)]) == 0


def test_memory_cap_gives_a_message_not_an_oom_kill() -> None:
    # In a subprocess: the cap (RLIMIT_AS) applies to the whole process.
    code = ("import sys; from traceread.cli import main; "
            f"sys.exit(main(['--max-memory', '150M', 'analyze', {str(FIXTURES / 'kineto2021_resnet50_bare_list.pt.trace.json.gz')!r}]))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == EXIT_USAGE, r.stderr
    assert "memory" in r.stderr and r.stderr.strip().count("\n") == 0 and "Traceback" not in r.stderr
    assert "kineto2021_resnet50_bare_list.pt.trace.json.gz: out of memory while" in r.stderr  # names the file


def test_default_event_cap_follows_what_analyze_uses(monkeypatch) -> None:
    """The default was memory / 100 B while analyze peaks near 680 B per event (measured): a trace
    could be killed by the kernel long before the cap."""
    import os

    from traceread import limits

    monkeypatch.setattr(os, "sysconf", lambda name: {"SC_PHYS_PAGES": 4 << 20, "SC_PAGE_SIZE": 4096}[name])  # 16 GiB
    assert limits.ANALYZE_BYTES_PER_EVENT >= 650
    assert limits.default_max_events() == (16 << 30) // limits.ANALYZE_BYTES_PER_EVENT


def test_max_json_size_is_reported_in_its_own_unit(tmp_path, capsys) -> None:
    from traceread.limits import format_size

    assert [format_size(n) for n in (512 << 20, 64 << 30, 3 << 29, 1000)] == ["512 MiB", "64 GiB", "1.5 GiB",
                                                                            "1000 bytes"]
    path = _bomb(tmp_path, 8)
    assert main(["--max-json-size", "1M", "--max-gzip-ratio", "1e9", "info", str(path)]) == EXIT_USAGE
    assert "decompresses to more than 1 MiB of JSON" in capsys.readouterr().err


@pytest.mark.parametrize("decoder", ["", "1"], ids=["scanner", "msgspec"])
def test_event_cap_kineto(decoder, monkeypatch, capsys) -> None:
    monkeypatch.setenv("TRACEREAD_NO_SCANNER", decoder)
    path = str(FIXTURES / "kineto2021_resnet50_bare_list.pt.trace.json.gz")  # 63,167 events
    assert main(["--max-events", "10000", "info", path]) == EXIT_USAGE
    err = capsys.readouterr().err.strip()
    assert "more than 10,000 events" in err and "kineto2021_resnet50" in err and err.count("\n") == 0
    assert main(["--max-events", "100000", "info", path]) == 0


def test_event_cap_nsys_before_allocating(tmp_path, capsys) -> None:
    from tracesynth.nsys_writer import write_nsys
    from tracesynth.planted import PlantSpec, plant

    path = write_nsys(plant(PlantSpec(seed=1, ranks=1, steps=3)).scenario, tmp_path / "n.sqlite")
    assert main(["--max-events", "100", "info", str(path)]) == EXIT_USAGE
    assert "more than 100 events" in capsys.readouterr().err
    assert main(["info", str(path)]) == 0
