"""``traceread scan`` finds every format by content: a file of a format with a reader is analysed, one
without is a failure naming the format (never "other files" or "not traces"), and an xplane's run
is counted once when its derived trace-viewer JSON sits beside it."""

from __future__ import annotations

import json
import shutil
from importlib import resources

import jsonschema
import pytest
from tracesynth.format_samples import SAMPLES, write_kineto_perfetto

from traceread.cli import main
from traceread.loaders import READERS, named
from traceread.loaders.detect import describe

XPLANE_RUN = ("xplane", "xplane-json")  # written together into one run folder
NOT_TRACES = {"traceread-perfetto"}


@pytest.fixture(scope="module")
def scanned(tmp_path_factory):
    root = tmp_path_factory.mktemp("formats") / "runs"
    (root / "plugins" / "profile" / "2026_01_01").mkdir(parents=True)
    (root / "other").mkdir()
    written = {}
    for fmt, write in SAMPLES.items():
        d = root / "plugins" / "profile" / "2026_01_01" if fmt in XPLANE_RUN else root / "other"
        written[fmt] = write(d).relative_to(root).as_posix()
    # a Perfetto trace under a name that says nothing: found by its content
    shutil.copyfile(write_kineto_perfetto(root / "other"), root / "other" / "capture.bin")
    (root / "other" / "kineto.pftrace").unlink()
    (root / "other" / "notes.txt").write_text("nothing to see\n")
    (root / "broken").mkdir()  # damaged files of each SQLite format: failures naming the format
    for fmt in ("rpd", "rocpd", "rocprof-v1"):
        data = (root / written[fmt]).read_bytes()
        (root / "broken" / f"cut-{fmt}.db").write_bytes(data[: len(data) * 6 // 10])
    out = tmp_path_factory.mktemp("out") / "scan"
    rc = main(["scan", str(root), "--out", str(out), "--workers", "1"])
    doc = json.loads((out / "index.json").read_text())
    return rc, doc, written


def test_index_is_valid(scanned) -> None:
    rc, doc, _ = scanned
    assert rc == 0
    schema = json.loads(resources.files("traceread").joinpath("data/index.schema.json").read_text("utf-8"))
    jsonschema.validate(doc, schema)


def test_every_format_is_found_and_named(scanned) -> None:
    _, doc, written = scanned
    traces = {t["path"]: t for t in doc["traces"]}
    failed = {f["path"]: f["problem"] for f in doc["failures"]}
    not_traces = {f["path"]: f["problem"] for f in doc["not_traces"]}
    for fmt, rel in written.items():
        if fmt == "xplane-json":
            continue  # the same run as the xplane: counted once (below)
        if fmt in NOT_TRACES:
            assert describe(fmt) in not_traces[rel]
        elif fmt in READERS or fmt == "kineto":
            assert rel in traces or (rel in failed and "no reader" not in failed[rel]), (fmt, failed.get(rel))
        else:
            assert rel in failed and describe(fmt) in failed[rel], (fmt, failed.get(rel), not_traces.get(rel))
    assert "other/capture.bin" in traces and traces["other/capture.bin"]["format"] == "perfetto"
    assert doc["scan"]["skipped"].get("other files") == 1  # notes.txt


def test_xplane_run_counted_once_preferring_the_xplane(scanned) -> None:
    _, doc, written = scanned
    listed = {t["path"] for t in doc["traces"]} | {f["path"] for f in doc["failures"] + doc["not_traces"]}
    assert written["xplane"] in listed
    assert written["xplane-json"] not in listed
    assert sum(n for reason, n in doc["scan"]["skipped"].items() if ".xplane.pb" in reason) == 1


def test_trace_viewer_json_alone_is_a_run_of_its_own(tmp_path) -> None:
    (tmp_path / "run").mkdir()
    SAMPLES["xplane-json"](tmp_path / "run")
    out = tmp_path / "out"
    main(["scan", str(tmp_path / "run"), "--out", str(out), "--workers", "1"])
    doc = json.loads((out / "index.json").read_text())
    listed = [t["path"] for t in doc["traces"]] + [f["path"] for f in doc["failures"]]
    assert listed == ["host0.trace.json.gz"]


def test_damaged_databases_are_failures_naming_their_format(scanned) -> None:
    _, doc, _ = scanned
    failed = {f["path"]: f["problem"] for f in doc["failures"]}
    for fmt in ("rpd", "rocpd", "rocprof-v1"):
        assert named(fmt, failed[f"broken/cut-{fmt}.db"]), failed
