"""The smaller findings of issue 48, each as a class: a byte order mark, traceEvents of another type
or given twice, a second timestamp in one event, permuted correlation ids, bidi controls, and
library warnings on standard error. Decoding checks run with and without the compiled scanner."""

from __future__ import annotations

import gzip
import json
import random
import warnings
from pathlib import Path

import pytest
from conftest import FIXTURES
from tracesynth.kineto_writer import write_kineto
from tracesynth.planted import PlantSpec, plant

import traceread
from traceread.cli import main
from traceread.errors import EXIT_USAGE, TraceReadError
from traceread.printable import printable
from traceread.render.notes import text as words

SOURCE = FIXTURES / "hta_alexnet_a100.json.gz"


@pytest.fixture(params=["scanner", "python"])
def decoder(request, monkeypatch) -> str:
    monkeypatch.setenv("TRACEREAD_NO_SCANNER", "" if request.param == "scanner" else "1")
    return request.param


def _doc() -> dict:
    return json.loads(gzip.decompress(SOURCE.read_bytes()))


def test_a_utf8_byte_order_mark_before_the_json_is_read(tmp_path, decoder) -> None:
    plain = json.dumps(_doc()).encode()
    want = len(traceread.load(_write(tmp_path / "plain.json", plain)).events)
    for name, data in (("bom.json", b"\xef\xbb\xbf" + plain), ("bom.json.gz", gzip.compress(b"\xef\xbb\xbf" + plain)),
                       ("bom-space.json", b"\xef\xbb\xbf \n" + plain)):
        assert len(traceread.load(_write(tmp_path / name, data)).events) == want, name


@pytest.mark.parametrize("value,kind", [('"hello"', "a string"), ("null", "null"), ("{}", "an object"),
                                        ("3", "a number")])
def test_trace_events_of_another_type_is_named_not_called_truncation(tmp_path, decoder, value, kind) -> None:
    path = _write(tmp_path / "t.json", f'{{"schemaVersion": 1, "traceEvents": {value}, "deviceProperties": []}}'.encode())
    with pytest.raises(TraceReadError, match=f"traceEvents is {kind}"):
        traceread.load(path)


def test_trace_events_given_twice_is_refused_naming_the_key(tmp_path, decoder) -> None:
    body = json.dumps(_doc())
    for name, text in (("empty-first.json", '{"traceEvents": [], ' + body[1:]),
                       ("empty-last.json", body[:-1] + ', "traceEvents": []}')):
        # the first read 0 events; a JSON parser keeps the last: which one holds the events is not sure
        with pytest.raises(TraceReadError, match="traceEvents appears twice"):
            traceread.load(_write(tmp_path / name, text.encode()))
    # a non-array first value and the events last: the last is read, as a JSON parser does
    events = len(traceread.load(_write(tmp_path / "ok.json", body.encode())).events)
    twice = '{"traceEvents": "x", ' + body[1:]
    assert len(traceread.load(_write(tmp_path / "last.json", twice.encode())).events) == events


def test_a_second_timestamp_in_one_event_keeps_the_epoch(tmp_path, decoder) -> None:
    body = json.dumps(_doc())
    at = body.index('"ts": ', body.index('"ph": "X"'))
    comma = body.index(",", at)
    trace = traceread.load(_write(tmp_path / "ts2.json", (body[:comma] + ', "ts": 1' + body[comma:]).encode()))
    assert trace.meta.time_base == "epoch", trace.meta.warnings
    assert any("start before 2001" in w for w in map(words, trace.meta.warnings))


def test_permuted_correlation_ids_that_collapse_steps_get_a_note(tmp_path) -> None:
    [path] = write_kineto(plant(PlantSpec(seed=3, ranks=1, steps=4)).scenario, str(tmp_path / "t.pt.trace.json"))
    doc = json.loads(Path(path).read_text())
    kernels = [ev for ev in doc["traceEvents"] if ev.get("cat") == "kernel"]
    ids = [ev["args"]["correlation"] for ev in kernels]
    random.Random(1).shuffle(ids)
    for ev, c in zip(kernels, ids, strict=True):
        ev["args"]["correlation"] = c
    Path(path).write_text(json.dumps(doc))
    report = traceread.analyze(path)
    assert (report.steps["end_ns"] <= report.steps["start_ns"]).any()  # the collapse this notes
    said = [words(n) for n in report.notes]  # notes are data; the reports word them
    assert any("0 ns long" in n and "correlation" in n for n in said), said
    intact = traceread.analyze(write_kineto(plant(PlantSpec(seed=3, ranks=1, steps=4)).scenario,
                                            str(tmp_path / "u.pt.trace.json"))[0])
    assert not any("0 ns long" in n for n in map(words, intact.notes))


BIDI = "\u202e\u2066\u2067\u2068\u2069\u202a\u202b\u202c\u202d\u200e\u200f\u061c"


def test_bidi_controls_are_shown_escaped() -> None:
    text = printable("gemm" + BIDI + "kernel")
    assert not any(c in text for c in BIDI)
    assert "\\u202e" in text and "\\u061c" in text


def test_bidi_controls_reach_no_text_or_markdown_output(tmp_path, capsys) -> None:
    [path] = write_kineto(plant(PlantSpec(seed=3, ranks=1, steps=4)).scenario, str(tmp_path / "t.pt.trace.json"))
    doc = json.loads(Path(path).read_text())
    for ev in doc["traceEvents"]:
        if ev.get("cat") in ("kernel", "cpu_op", "user_annotation"):
            ev["name"] = "evil\u202eexe.gpj" + ev["name"]
    Path(path).write_text(json.dumps(doc))
    md, csv = tmp_path / "r.md", tmp_path / "g.csv"
    for argv in (["analyze", path, "-o", str(md)], ["analyze", path], ["kernels", path], ["gaps", path, "--csv", str(csv)],
                 ["gaps", path]):
        assert main(argv) == 0
    outputs = capsys.readouterr().out + md.read_text() + csv.read_text()
    assert "\\u202e" in outputs and not any(c in outputs for c in BIDI)


def test_matplotlib_warnings_stay_off_standard_error(tmp_path, capsys) -> None:
    [path] = write_kineto(plant(PlantSpec(seed=3, ranks=1, steps=4)).scenario, str(tmp_path / "t.pt.trace.json"))
    doc = json.loads(Path(path).read_text())
    for ev in doc["traceEvents"]:
        if ev.get("cat") in ("kernel", "cpu_op", "user_annotation"):
            ev["name"] = "\u4e2d\u2603\U0001f600" * 10 + ev["name"]  # glyphs no bundled font has
    Path(path).write_text(json.dumps(doc))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert main(["analyze", path, "--plot", str(tmp_path / "t.png"), "-o", str(tmp_path / "r.md")]) == 0
    assert not [w for w in seen if "matplotlib" in w.filename or "Glyph" in str(w.message)]
    assert capsys.readouterr().err == ""


def test_max_events_below_one_is_a_usage_error_not_the_files(capsys) -> None:
    assert main(["--max-events", "-1", "info", str(SOURCE)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "--max-events" in err and SOURCE.name not in err


def _write(path: Path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)
