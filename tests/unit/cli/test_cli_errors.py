"""Exit codes a CI job can tell apart: usage/unreadable (2), a gate (1), an internal error (3)."""

from __future__ import annotations

import gzip

import pytest
from conftest import FIXTURES, SHARED, needs_shared

from traceread import cli as cli_mod
from traceread.cli import main
from traceread.errors import EXIT_INTERNAL, EXIT_USAGE

FIXTURE = str(FIXTURES / "hta_alexnet_a100.json.gz")


def test_output_into_missing_folder_is_one_line_usage_error(tmp_path, capsys) -> None:
    target = tmp_path / "no" / "such" / "report.md"
    for args in (["analyze", FIXTURE, "-o", str(target)], ["info", FIXTURE, "--json", str(target)]):
        assert main(args) == EXIT_USAGE
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and str(target) in err and "does not exist" in err
    assert not (tmp_path / "no").exists()


def test_output_onto_a_folder_is_usage_error(tmp_path, capsys) -> None:
    assert main(["analyze", FIXTURE, "--json", str(tmp_path)]) == EXIT_USAGE
    assert "is a folder" in capsys.readouterr().err


def _boom(*_a, **_k):
    raise ValueError("planted bug")


def test_internal_error_has_its_own_code_and_one_line(monkeypatch, capsys) -> None:
    monkeypatch.setattr("traceread.cli.info.load", _boom)
    rc = main(["info", FIXTURE])
    err = capsys.readouterr().err.strip()
    assert rc == EXIT_INTERNAL
    assert err.count("\n") == 0 and "internal error: ValueError: planted bug" in err and "Traceback" not in err


def test_debug_shows_the_traceback(monkeypatch, capsys) -> None:
    monkeypatch.setattr("traceread.cli.info.load", _boom)
    assert main(["--debug", "info", FIXTURE]) == EXIT_INTERNAL
    assert "Traceback" in capsys.readouterr().err
    cli_mod._debug["on"] = False


def test_kernels_on_shapes_owning_no_kernel(tmp_path) -> None:
    # An aten::mm with recorded shapes whose External id matches no kernel (as in the hta_sampled
    # traces): the roofline is empty, not an IndexError.
    trace = ('{"traceEvents":['
             '{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":0,"dur":50,'
             '"args":{"External id":5,"Input Dims":[[64,128],[128,256]],"Input type":["float","float"]}},'
             '{"ph":"X","cat":"kernel","name":"gemm_kernel","pid":0,"tid":7,"ts":100,"dur":20,'
             '"args":{"device":0,"stream":7,"correlation":9,"External id":9}}]}')
    p = tmp_path / "t.json.gz"
    p.write_bytes(gzip.compress(trace.encode()))
    assert main(["kernels", str(p)]) == 0


@needs_shared
@pytest.mark.parametrize("name", ["hta_sampled_rank0of128", "hta_sampled_rank1of128", "hta_no_device_properties",
                                  "tracelens_vllm_graph_capture_rocm"])
def test_kernels_on_real_traces_that_crashed(name, capsys) -> None:
    assert main(["kernels", str(SHARED / f"traces/kineto/{name}.json.gz")]) == 0
    assert "roofline" in capsys.readouterr().out.lower()
