"""``traceread info``: the table, the JSON (same content), exit codes, and nothing written beside inputs."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

from conftest import FIXTURES

from traceread.cli import main
from traceread.loaders.kineto import load_kineto

README_EXAMPLE = FIXTURES / "kineto2021_resnet50_bare_list.pt.trace.json.gz"
MODERN = FIXTURES / "hta_nccl_a100_rank0of2.json.gz"


def test_table_names_what_the_trace_holds(capsys) -> None:
    assert main(["info", str(MODERN)]) == 0
    out = capsys.readouterr().out
    for text in ("kineto 2024+", "NVIDIA A100-PG509-200 (108 SMs", "7 more listed, unused",
                 "0 (distributedInfo); world size 2 (distributedInfo)", "time base", "epoch",
                 "gpu_comm 21", "profiler steps  3 (#4..#6)"):
        assert text in out, text


def test_json_has_the_same_content_and_matches_the_frame(capsys) -> None:
    assert main(["info", "--json", "-", str(README_EXAMPLE), str(MODERN)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [t["path"] for t in data["traces"]] == [str(README_EXAMPLE), str(MODERN)]
    for t, path in zip(data["traces"], (README_EXAMPLE, MODERN), strict=True):
        ev = load_kineto(str(path)).events
        assert t["events"] == len(ev) == sum(t["events_per_lane"].values())
        assert t["events_per_raw_category"] == {str(k): int(v) for k, v in
                                                ev["raw_category"].value_counts().items() if v}
    legacy = data["traces"][0]
    assert legacy["generation"].startswith("kineto 2020-21, bare event list")
    assert legacy["profiler_steps"] == 6 and legacy["ranks"][0]["rank_source"] == "default"


def test_json_to_a_file_keeps_the_table_on_stdout(tmp_path: Path, capsys) -> None:
    out_path = tmp_path / "info.json"
    assert main(["info", "--json", str(out_path), str(MODERN)]) == 0
    assert "== " in capsys.readouterr().out
    assert json.loads(out_path.read_text())["traces"][0]["ranks"][0]["world_size"] == 2


def test_truncated_trace_warns_and_exits_zero(tmp_path: Path, capsys) -> None:
    text = gzip.decompress(MODERN.read_bytes())
    path = tmp_path / "crash.pt.trace.json.tmp"
    path.write_bytes(text[: len(text) // 2])
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "file truncated" in out and "ends inside the event array" in out


def test_bad_input_exits_two_with_one_line_and_writes_nothing(tmp_path: Path, capsys) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    bad = folder / "broken.json.gz"
    bad.write_bytes(b"\x1f\x8b\x08\x00not deflate at all")
    before = sorted(os.listdir(folder))
    assert main(["info", "--json", str(tmp_path / "o.json"), str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(bad) in err and "bad gzip data" in err
    assert sorted(os.listdir(folder)) == before
    assert not (tmp_path / "o.json").exists()


def test_privacy_no_host_or_user_names(tmp_path: Path, capsys) -> None:
    doc = {
        "schemaVersion": 1, "host_name": "secret-host-42", "username": "alice-secret",
        "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 8, "hostname": "secret-host-42",
                            "pg_config": [{"pg_name": "0", "pg_size": 8, "host": "secret-host-42"}]},
        "traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 5, "dur": 2},
                        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python3"}}],
        "traceName": "/home/alice-secret/run/trace.json",
    }
    path = tmp_path / "rank3.json"
    path.write_text(json.dumps(doc))
    assert main(["info", "--json", "-", str(path)]) == 0
    out = capsys.readouterr().out
    assert "secret" not in out
    assert json.loads(out)["traces"][0]["ranks"][0]["rank"] == 3
    trace = load_kineto(str(path))
    assert "secret" not in repr(trace.meta)


def test_info_says_which_decoder_loaded_the_file(capsys, monkeypatch) -> None:
    from traceread.loaders.kineto import scan

    monkeypatch.setenv(scan.DISABLE_ENV, "1")
    assert main(["info", "--json", "-", str(MODERN)]) == 0
    off = json.loads(capsys.readouterr().out)["traces"][0]["loaded_by"]
    assert off["scanner_chunks"] == 0 and off["msgspec_bytes"] > 0
    assert main(["info", str(MODERN)]) == 0
    assert "loaded by       msgspec (" in capsys.readouterr().out
    monkeypatch.delenv(scan.DISABLE_ENV)
    assert main(["info", "--json", "-", str(MODERN)]) == 0
    on = json.loads(capsys.readouterr().out)["traces"][0]["loaded_by"]
    if scan.BUILT:
        assert on["scanner_share"] == 1.0 and on["installation"] == "compiled scanner"
    else:
        assert on["scanner_chunks"] == 0 and "not built" in on["installation"]
