"""``traceread analyze`` end to end on generated traces: outputs, exit codes, gates, failures, several ranks."""

from __future__ import annotations

import os

import jsonschema
import orjson
import pytest
from _frames import table_rows
from conftest import needs_shared
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace as PfTrace
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TrackEvent
from tracesynth.nsys_writer import write_nsys
from tracesynth.planted import PlantSpec, plant

from traceread.cli import main
from traceread.render import jsonout
from traceread.render.notes import text as words  # notes are data; the reports word them
from traceread.vocabulary import GAP_CLASSES, part_col

ONLY_DATA = {"data-starved": 1.0, "launch-bound": 0.0, "comm-bound": 0.0, "pipeline-bubble": 0.0,
             "sync-stall": 0.0, "unattributed": 0.0}


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """A 2-rank nsys export whose only planted cause is a starving data loader."""
    d = tmp_path_factory.mktemp("planted")
    p = plant(PlantSpec(seed=3, ranks=2, steps=6, weights=ONLY_DATA))
    path = str(d / "starved.sqlite")
    write_nsys(p.scenario, path)
    return path, p


def test_all_outputs_and_planted_cause(planted, tmp_path, capsys) -> None:
    path, _ = planted
    md, js, png, pf = (tmp_path / n for n in ("r.md", "r.json", "t.png", "t.pftrace"))
    rc = main(["analyze", path, "-o", str(md), "--json", str(js), "--plot", str(png), "--perfetto", str(pf)])
    assert rc == 0
    assert capsys.readouterr().out == ""  # the report went to -o, not stdout
    umask = os.umask(0)
    os.umask(umask)
    assert md.stat().st_mode & 0o777 == 0o666 & ~umask  # written atomically, usual permissions
    text = md.read_text()
    assert "## Verdict\n\nData-starved:" in text
    doc = orjson.loads(js.read_bytes())
    jsonschema.validate(doc, jsonout.schema())
    assert doc["dominant_cause"] == "data-starved"
    assert {(s["rank"], s["device"]) for s in table_rows(doc["steps"])} == {(0, 0), (1, 1)}
    assert len(doc["attribution"]) == 2
    for st in table_rows(doc["steps"]):  # every step's idle is split into classes exactly
        assert sum(st[part_col(c)] for c in GAP_CLASSES) == st["idle_ns"]
        assert st["busy_ns"] + st["idle_ns"] == st["end_ns"] - st["start_ns"]
    for a in doc["attribution"]:
        assert sum(p["ns"] for p in a["parts"].values()) == a["step_ns"]
    # per-rank comparison table: one row per rank/GPU
    assert "| rank 0 / GPU 0 |" in text and "| rank 1 / GPU 1 |" in text
    assert png.read_bytes().startswith(b"\x89PNG")
    trace = PfTrace()
    trace.ParseFromString(pf.read_bytes())
    tracks = {p.track_descriptor.uuid: p.track_descriptor.name for p in trace.packet if p.HasField("track_descriptor")}
    diag = {u for u, n in tracks.items() if n.startswith("traceread diagnosis")}
    assert len(diag) == 2  # one per device
    classes = [p.track_event.name for p in trace.packet if p.HasField("track_event")
               and p.track_event.type == TrackEvent.TYPE_SLICE_BEGIN and p.track_event.track_uuid in diag]
    assert "data-starved" in classes and set(classes) <= set(jsonout.GAP_CLASSES)


def test_fail_on_gate(planted, capsys) -> None:
    path, _ = planted
    assert main(["analyze", path, "--json", "-", "--fail-on", "data-starved:10"]) == 1
    doc = orjson.loads(capsys.readouterr().out)  # --json - replaces the Markdown on stdout
    share = sum(a["parts"]["data-starved"]["ns"] for a in doc["attribution"]) / sum(
        a["step_ns"] for a in doc["attribution"])
    assert share >= 0.10
    assert main(["analyze", path, "--fail-on", f"data-starved:{100 * share + 1:.1f}",
                 "--fail-on", "comm-bound:50"]) == 0


@pytest.mark.parametrize("args", [["--fail-on", "slow:10"], ["--fail-on", "data-starved"],
                                  ["--set", "no_such_threshold=1"], ["--top-gaps", "-1"]])
def test_usage_errors_exit_2(planted, args, capsys) -> None:
    assert main(["analyze", planted[0], *args]) == 2


def test_unreadable_input_still_reports_the_others(planted, tmp_path, capsys) -> None:
    bad = tmp_path / "broken.json"
    bad.write_text("this is not a trace")
    md = tmp_path / "r.md"
    rc = main(["analyze", planted[0], str(bad), "-o", str(md)])
    assert rc == 2
    text = md.read_text()
    assert "Data-starved:" in text
    assert "**Not analysed**: `broken.json`" in text
    assert "broken.json" in capsys.readouterr().err


def test_only_unreadable_inputs_exit_2(tmp_path, capsys) -> None:
    assert main(["analyze", str(tmp_path / "missing.json")]) == 2
    assert "missing.json: no such file" in capsys.readouterr().err


def test_mfu_flags_fill_the_scoreboard(planted, tmp_path, capsys) -> None:
    rc = main(["analyze", planted[0], "--json", "-", "--params", "1e9", "--tokens-per-step", "65536",
               "--dtype", "bf16", "--gpus", "2"])
    assert rc == 0
    doc = orjson.loads(capsys.readouterr().out)
    jsonschema.validate(doc, jsonout.schema())
    m = doc["mfu"]
    assert m is not None and m["mfu"] > 0
    # MFU = 6 N tokens / (step time x GPUs x peak): recompute from the reported inputs
    peak = m["inputs"]["peak_tflops"]["value"] * 1e12
    gpus = m["inputs"]["num_gpus"]["value"]
    assert m["mfu"] == pytest.approx(6 * 1e9 * 65536 / (m["step_time_ns"] / 1e9 * gpus * peak), rel=1e-9)


def test_without_mfu_inputs_says_which_flags(planted, capsys) -> None:
    assert main(["analyze", planted[0]]) == 0
    out = capsys.readouterr().out
    assert "MFU not computed" in out and "--params" in out


def test_several_rank_files_of_one_job(tmp_path, capsys) -> None:
    from tracesynth.kineto_writer import write_kineto

    p = plant(PlantSpec(seed=5, ranks=2, steps=5, weights=ONLY_DATA))
    files = write_kineto(p.scenario, str(tmp_path / "job.rank{rank}.pt.trace.json"))
    assert len(files) == 2
    md, js = tmp_path / "r.md", tmp_path / "r.json"
    assert main(["analyze", *files, "-o", str(md), "--json", str(js), "--perfetto", str(tmp_path / "t.pftrace"),
                 "--perfetto-steps", "all"]) == 0
    doc = orjson.loads(js.read_bytes())
    jsonschema.validate(doc, jsonout.schema())
    assert [t["ranks"] for t in doc["traces"]] == [[0], [1]]
    assert doc["dominant_cause"] == "data-starved"  # the only planted cause, judged over both files
    assert sorted({(s["trace"], s["rank"]) for s in table_rows(doc["steps"])}) == [(0, 0), (1, 1)]
    text = md.read_text()
    assert text.split("## Verdict")[0].count("| `job.rank") == 2  # both inputs in the header
    assert "| rank 0 / GPU 0 |" in text and "| rank 1 / GPU 1 |" in text  # per-rank comparison rows
    assert "### rank 1 / GPU 1" in text  # per-rank step sections
    trace = PfTrace()
    trace.ParseFromString((tmp_path / "t.pftrace").read_bytes())
    step_slices = [p.track_event.name for p in trace.packet if p.HasField("track_event")
                   and p.track_event.type == TrackEvent.TYPE_SLICE_BEGIN and p.track_event.name.startswith("step ")]
    assert len(step_slices) == len(table_rows(doc["steps"]))  # --perfetto-steps all: every step of every rank


def test_same_rank_in_two_files_stays_apart(planted, tmp_path) -> None:
    import shutil

    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    shutil.copyfile(planted[0], a)
    shutil.copyfile(planted[0], b)
    md = tmp_path / "r.md"
    assert main(["analyze", str(a), str(b), "-o", str(md)]) == 0
    text = md.read_text()
    assert "| a.sqlite: rank 0 / GPU 0 |" in text and "| b.sqlite: rank 0 / GPU 0 |" in text


def test_failing_piece_degrades_and_a_missing_module_is_an_error(planted, monkeypatch) -> None:
    import sys

    import traceread.metrics.kernels as kernels
    from traceread import load
    from traceread.render.markdown import to_markdown
    from traceread.runner import analyze

    trace = load(planted[0])

    def broken(_trace):
        raise RuntimeError("boom")

    monkeypatch.setattr(kernels, "kernel_table", broken)
    a = analyze([trace])
    assert a.dominant_cause == "data-starved"  # the rest of the pipeline still ran
    assert "kernel table: failed (RuntimeError: boom)" in a.unavailable
    text = to_markdown(a)
    assert "Not computed: kernel table: failed (RuntimeError: boom)" in text
    assert "### Top kernels" not in text
    # A module of traceread that cannot be imported is a broken install, never a dropped table.
    monkeypatch.setitem(sys.modules, "traceread.metrics.collectives", None)
    with pytest.raises(ImportError):
        analyze([trace])


def test_a_module_of_the_project_that_does_not_import_is_an_error(planted, monkeypatch) -> None:
    """A broken install fails loudly; it never drops a table as "not installed"."""
    import sys

    from traceread import load
    from traceread.runner import analyze

    trace = load(planted[0])
    monkeypatch.setitem(sys.modules, "traceread.metrics.collectives", None)  # import fails
    with pytest.raises(ImportError):
        analyze([trace])


def test_real_fixture_end_to_end(tmp_path) -> None:
    """The shipped ResNet-50 trace: JSON valid, Perfetto diagnosis slices = the gaps of the drawn steps."""
    from conftest import FIXTURES

    src = FIXTURES / "kineto2021_resnet50_bare_list.pt.trace.json.gz"
    js, pf = tmp_path / "r.json", tmp_path / "t.pftrace"
    assert main(["analyze", str(src), "-o", str(tmp_path / "r.md"), "--json", str(js), "--perfetto", str(pf)]) == 0
    doc = orjson.loads(js.read_bytes())
    jsonschema.validate(doc, jsonout.schema())
    trace = PfTrace()
    trace.ParseFromString(pf.read_bytes())
    tracks = {p.track_descriptor.uuid: p.track_descriptor.name for p in trace.packet if p.HasField("track_descriptor")}
    begins = [p.track_event for p in trace.packet
              if p.HasField("track_event") and p.track_event.type == TrackEvent.TYPE_SLICE_BEGIN]
    drawn = {int(e.name.split()[1]) for e in begins if tracks[e.track_uuid].endswith("steps")}
    assert 1 <= len(drawn) <= 2  # the median and the worst step
    want = sorted(g["class"] for g in table_rows(doc["gaps"]) if g["step"] in drawn)
    got = sorted(e.name for e in begins if tracks[e.track_uuid].startswith("traceread diagnosis"))
    assert got == want
    kernels = sum(1 for e in begins if " stream " in tracks[e.track_uuid])
    assert kernels > 1000  # the GPU lanes of two ResNet-50 steps


@needs_shared
@pytest.mark.parametrize("name", ["hta_mtia_inference.json.gz", "hta_cpu_only_rank34.pt.trace.json.gz"])
def test_user_and_host_names_never_reach_outputs(name, tmp_path) -> None:
    """These files carry username/host_name keys (values replaced by 'redacted' in ../shared)."""
    from conftest import SHARED_TRACES

    src = SHARED_TRACES / "kineto" / name
    outs = [tmp_path / n for n in ("r.md", "r.json", "t.pftrace", "t.svg")]
    rc = main(["analyze", str(src), "-o", str(outs[0]), "--json", str(outs[1]), "--perfetto", str(outs[2]),
               "--perfetto-steps", "all", "--plot", str(outs[3])])
    assert rc == 0
    for out in outs:
        assert b"redacted" not in out.read_bytes(), out.name


def test_config_file_and_set_override_thresholds(planted, tmp_path, capsys) -> None:
    conf = tmp_path / "traceread.toml"
    conf.write_text("[thresholds]\nhealthy_max_idle = 0.2\nbubble_min_steps = 6\n")
    assert main(["analyze", planted[0], "--config", str(conf), "--set", "bubble_min_steps=5"]) == 0
    out = capsys.readouterr().out
    # the method notes name the overridden ones; the table of every threshold is --verbose's
    assert "except: `bubble_min_steps=5`, `healthy_max_idle=0.2`." in out or \
        "except: `healthy_max_idle=0.2`, `bubble_min_steps=5`." in out
    assert "| `healthy_max_idle` |" not in out
    assert main(["analyze", planted[0], "--config", str(conf), "--set", "bubble_min_steps=5", "--verbose"]) == 0
    out = capsys.readouterr().out
    assert "| `healthy_max_idle` | 0.2 (default 0.1) |" in out
    assert "| `bubble_min_steps` | 5 (default 4) |" in out  # --set wins over the file


def test_nsys_rep_is_refused_with_exit_2(tmp_path, capsys) -> None:
    rep = tmp_path / "run.nsys-rep"
    rep.write_bytes(b"\x00" * 64)
    assert main(["analyze", str(rep)]) == 2
    assert "run.nsys-rep" in capsys.readouterr().err


def test_a_run_folder_with_a_config_file_is_analysed_with_a_note(tmp_path, capsys) -> None:
    """A run folder holds a config.json and a metrics JSON beside its trace: the trace is analysed (exit 0),
    each non-trace JSON is named once in a note, on standard error and in the Python API's report."""
    import shutil
    import warnings

    from conftest import FIXTURES

    import traceread

    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(FIXTURES / "hta_alexnet_a100.json.gz", run)
    (run / "config.json").write_text('{"lr": 0.1, "batch": 32, "layers": [64, 128]}\n')
    (run / "metrics.json").write_text('{"loss": [2.3, 1.9], "step": [1, 2]}\n')
    out = tmp_path / "r.md"
    assert main(["analyze", str(run), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    report = out.read_text()
    for name in ("config.json", "metrics.json"):
        assert err.count(name) == 1 and f"{name}: left out of this analysis: not a trace" in report
    assert "## Verdict" in report
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        result = traceread.analyze(str(run))
    assert sum("config.json" in n for n in map(words, result.notes)) == 1
    assert main(["analyze", str(run / "config.json")]) == 2  # named on its own, it is still refused
    assert "not a trace" in capsys.readouterr().err
