"""MFU inputs (Workload): flags, the TOML file, and the inconsistent combinations that must be refused."""

from __future__ import annotations

import json

import click
import pytest
from click.testing import CliRunner

from traceread.cli.options import workload_options
from traceread.errors import UsageError
from traceread.metrics.workload import Workload, parse_count, read_workload_file


@pytest.mark.parametrize(("text", "value"), [("7e9", 7e9), ("7B", 7e9), ("1.3m", 1.3e6), ("4096", 4096.0),
                                             (70e9, 70e9), ("0.5T", 5e11)])
def test_counts(text, value) -> None:
    assert parse_count(text, "--params") == pytest.approx(value)


@pytest.mark.parametrize("text", ["seven", "-1", "0", "7X"])
def test_bad_counts(text) -> None:
    with pytest.raises(UsageError):
        parse_count(text, "--params")


def test_token_routes_agree_or_are_refused() -> None:
    assert Workload(global_batch=512, seq_len=2048).tokens()[0] == 512 * 2048
    assert Workload(micro_batch=4, grad_accum=8, dp=16, seq_len=2048).tokens()[0] == 512 * 2048
    assert Workload(tokens_per_step=2**20, global_batch=512, seq_len=2048).tokens()[0] == 2**20
    with pytest.raises(UsageError, match="disagree"):
        Workload(tokens_per_step=2**20, global_batch=256, seq_len=2048)
    with pytest.raises(UsageError, match="global-batch"):
        Workload(global_batch=256, micro_batch=4, grad_accum=8, dp=16, seq_len=2048)
    with pytest.raises(UsageError, match="go together"):
        Workload(micro_batch=4, seq_len=2048)
    with pytest.raises(UsageError, match="seq-len"):
        Workload(global_batch=512)


@pytest.mark.parametrize("kw", [
    {"params": 7e9, "flops_per_token": 4.2e10},
    {"recompute": "full", "recompute_factor": 1.2},
    {"recompute": "none", "recompute_factor": 1.2},
    {"recompute_factor": 0.8},
    {"mode": "inference", "recompute": "full"},
    {"attention_flops": True, "layers": 32},
    {"dp": 16, "gpus": 8, "micro_batch": 1, "grad_accum": 1, "seq_len": 1},
    {"dtype": "int8"},
    {"mode": "serve"},
])
def test_inconsistent_combinations(kw) -> None:
    with pytest.raises(UsageError):
        Workload(**kw)


def test_flops_per_token_by_mode() -> None:
    assert Workload(params=1e9).flops_per_token_model()[0] == 6e9
    assert Workload(params=1e9, mode="inference").flops_per_token_model()[0] == 2e9
    assert Workload(flops_per_token=5e9).flops_per_token_model()[0] == 5e9
    assert Workload(recompute_factor=1.25).recompute_multiplier()[0] == 1.25  # implies selective


def test_toml_file(tmp_path) -> None:
    p = tmp_path / "job.toml"
    p.write_text('[job]\nparams = "7B"\nglobal-batch = 512\nseq_len = 2048\ndtype = "BF16"\nrecompute = "full"\n')
    vals = read_workload_file(str(p))
    assert vals == {"params": 7e9, "global_batch": 512, "seq_len": 2048, "dtype": "bf16", "recompute": "full"}
    top = tmp_path / "top.toml"
    top.write_text("params = 1e9\nunknown_key = 3\n")
    with pytest.raises(UsageError, match="unknown job key"):
        read_workload_file(str(top))


@click.command()
@workload_options
def _cmd(workload: Workload | None) -> None:
    click.echo("none" if workload is None else json.dumps(workload.to_dict()))


def test_click_decorator_merges_file_and_flags(tmp_path) -> None:
    p = tmp_path / "job.toml"
    p.write_text('params = 7e9\nglobal_batch = 512\nseq_len = 2048\ndtype = "bf16"\n')
    runner = CliRunner()
    out = runner.invoke(_cmd, [])
    assert out.exit_code == 0 and out.output.strip() == "none"
    out = runner.invoke(_cmd, ["--job", str(p), "--params", "13B", "--gpus", "64"])
    assert out.exit_code == 0, out.output
    d = json.loads(out.output)
    assert d["params"] == 13e9 and d["global_batch"] == 512 and d["gpus"] == 64 and d["mode"] == "train"
    out = runner.invoke(_cmd, ["--params", "7e9", "--recompute", "selective"])
    assert isinstance(out.exception, UsageError)
