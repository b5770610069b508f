"""Detection by content: every format of issue 45 named from its bytes, never from its name; each
format without a reader refused naming it; a foreign Chrome JSON never read as Kineto."""

from __future__ import annotations

import gzip
import shutil

import pytest
from conftest import SHARED_TRACES, needs_shared
from tracesynth.format_samples import SAMPLES

from traceread import load
from traceread.cli import main
from traceread.errors import TraceReadError
from traceread.loaders import READERS, REFUSED, named, sniff
from traceread.loaders.detect import FORMATS, describe, detect

NOT_TRACES = {"traceread-perfetto"}  # sniff refuses it: not something to analyse


@pytest.mark.parametrize("fmt", sorted(SAMPLES))
def test_each_sample_is_detected_as_its_format(tmp_path, fmt) -> None:
    path = SAMPLES[fmt](tmp_path)
    assert detect(str(path)).format == fmt


@pytest.mark.parametrize("fmt", sorted(SAMPLES))
def test_detection_ignores_the_name(tmp_path, fmt) -> None:
    # the same bytes under a name of no format at all, and under a Kineto trace's name
    path = SAMPLES[fmt](tmp_path)
    for other in ("capture.bin", "renamed.pt.trace.json"):
        copy = tmp_path / other
        shutil.copyfile(path, copy)
        assert detect(str(copy)).format == fmt, other


@pytest.mark.parametrize("fmt", sorted(set(SAMPLES) - {"kineto"}))
def test_each_format_is_read_or_refused_naming_it(tmp_path, fmt) -> None:
    path = SAMPLES[fmt](tmp_path)
    if fmt in READERS:  # read, or refused by its reader in one line naming it (not "no reader")
        try:
            trace = load(str(path))
        except TraceReadError as exc:
            assert named(fmt, str(exc)) and "no reader" not in str(exc) and "\n" not in str(exc)
        else:
            assert trace.meta.format == fmt
        return
    with pytest.raises(TraceReadError) as err:
        load(str(path))
    msg = str(err.value)
    assert msg.startswith(str(path) + ": ")
    assert describe(fmt) in msg
    if fmt not in REFUSED and fmt not in NOT_TRACES:
        assert msg.endswith("no reader in this build")


def test_every_format_has_words() -> None:
    assert set(SAMPLES) <= set(FORMATS)
    assert all(FORMATS[f].startswith(("a ", "an ", "traceread")) for f in FORMATS)


def test_own_perfetto_output_mark_is_the_renderers_track_name() -> None:
    from traceread.loaders.detect import DIAGNOSIS_TRACK
    from traceread.render.perfetto import DIAGNOSIS_TRACK as written

    assert DIAGNOSIS_TRACK == written


def test_a_readers_refusal_always_names_the_format(tmp_path, monkeypatch) -> None:
    import traceread.loaders as L

    def refuse(path: str, progress: bool = False):
        raise TraceReadError(path, "plane 3 ends inside an event")

    monkeypatch.setitem(L.READERS, "xplane", f"{__name__}:_refuse")
    monkeypatch.setattr(__import__(__name__), "_refuse", refuse, raising=False)
    path = SAMPLES["xplane"](tmp_path)
    with pytest.raises(TraceReadError) as err:
        load(str(path))
    assert str(err.value) == f"{path}: {describe('xplane')}: plane 3 ends inside an event"


def test_own_perfetto_output_is_named_not_analysed(tmp_path, capsys) -> None:
    kineto = SAMPLES["kineto"](tmp_path)
    out = tmp_path / "diag.pftrace"
    assert main(["analyze", str(kineto), "--perfetto", str(out)]) == 0
    assert detect(str(out)).format == "traceread-perfetto"
    with pytest.raises(TraceReadError, match="traceread's own Perfetto output"):
        sniff(str(out))
    capsys.readouterr()
    assert main(["analyze", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "traceread's own Perfetto output" in err


@pytest.mark.parametrize("fmt", ["chrome-json", "rpd-json", "xplane-json"])
def test_foreign_chrome_json_is_never_a_cpu_only_kineto_trace(tmp_path, capsys, fmt) -> None:
    # the silent wrong answer: another tool's Chrome JSON diagnosed "CPU-only" with exit 0
    path = SAMPLES[fmt](tmp_path)
    rc = main(["analyze", str(path)])
    out, err = capsys.readouterr()
    assert "CPU-only" not in out
    if fmt not in READERS:
        assert rc == 2 and describe(fmt) in err


def test_gzip_json_is_detected_from_its_inflated_head(tmp_path) -> None:
    path = SAMPLES["rocprofv3-json"](tmp_path)
    gz = tmp_path / "results.json.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    assert detect(str(gz)).format == "rocprofv3-json"


def test_kineto_without_top_level_keys_stays_kineto(tmp_path) -> None:
    # a 2021 bare list: Kineto's categories are its only mark
    p = tmp_path / "bare.json"
    p.write_text('[{"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1, "dur": 2}]')
    assert detect(str(p)).format == "kineto"
    p.write_text('{"traceEvents": [{"ph": "X", "name": "k", "pid": 1, "tid": 1, "ts": 1, "dur": 2}]}')
    assert detect(str(p)).format == "kineto"  # no category at all: the Kineto reader judges it


def test_unknown_sqlite_and_binary_keep_their_messages(tmp_path) -> None:
    import sqlite3

    db = tmp_path / "cache.sqlite"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE kv (k TEXT)")
    conn.commit()
    conn.close()
    assert detect(str(db)).format == "sqlite"
    with pytest.raises(TraceReadError, match="not an Nsight Systems export"):
        load(str(db))
    blob = tmp_path / "model.bin"
    blob.write_bytes(bytes(range(256)) * 8)
    assert detect(str(blob)).format == "binary"
    with pytest.raises(TraceReadError, match="^.*: not a trace"):
        load(str(blob))


@pytest.mark.parametrize("fmt", sorted(set(SAMPLES) - {"kineto"} - NOT_TRACES))
def test_damaged_file_is_refused_naming_its_format(tmp_path, fmt) -> None:
    # cut to 60%: a damaged file of a known format is still that format, and said to be
    path = SAMPLES[fmt](tmp_path)
    data = path.read_bytes()
    cut = tmp_path / ("cut-" + path.name)
    cut.write_bytes(data[: int(len(data) * 0.6)])
    try:
        trace = load(str(cut))
    except TraceReadError as exc:
        msg = str(exc)
        assert "\n" not in msg and msg.startswith(str(cut) + ": ")
        assert named(fmt, msg), msg  # "rocprofv3", "xplane", "RPD", "Perfetto"... or the format's words
    else:  # read up to the cut (a reader's own judgement)
        assert fmt in READERS and trace.meta.format == fmt


_SHARED_FORMATS = {
    "rocmprofiledata_matmul.rpd": "rpd",
    "tracelens_jax08_conv_8xmi300x.xplane.pb": "xplane",
    "tracelens_jax08_gemm_mi300x.xplane.pb": "xplane",
    "tracelens_jax_conv_legacy_mi300x.xplane.pb": "xplane",
    "tracelens_rocprofv3_mi350x_ddp.json.gz": "rocprofv3-json",
    "xprof_tpu_v6e_inference.xplane.pb": "xplane",
}


@needs_shared
def test_shared_format_samples_are_detected() -> None:
    d = SHARED_TRACES / "formats"
    found = {p.name: detect(str(p)).format for p in d.iterdir() if p.is_file() and p.suffix != ".md"}
    for name, fmt in _SHARED_FORMATS.items():
        if name in found:
            assert found[name] == fmt, name
    unknown = {n: f for n, f in found.items() if n not in _SHARED_FORMATS}
    assert all(f not in ("kineto", "binary", "json", "sqlite", "chrome-json") for f in unknown.values()), unknown


@needs_shared
def test_shared_kineto_and_nsys_traces_keep_their_format() -> None:
    for sub, fmt in (("kineto", "kineto"), ("nsys", "nsys")):
        for p in sorted((SHARED_TRACES / sub).iterdir()):
            if p.is_file() and p.suffix != ".md":
                assert detect(str(p)).format == fmt, p.name


def test_a_folder_holds_an_xplane_run_once(tmp_path) -> None:
    from traceread.loaders import trace_files

    xplane, js = SAMPLES["xplane"](tmp_path), SAMPLES["xplane-json"](tmp_path)
    assert trace_files(tmp_path) == [str(xplane)]  # the JSON derived from it is the same run
    js.unlink()
    other = tmp_path / "elsewhere"
    other.mkdir()
    moved = SAMPLES["xplane-json"](other)
    assert trace_files(tmp_path) == [str(xplane), str(moved)]  # in another folder: a run of its own


def test_damage_past_the_first_fields_keeps_the_format(tmp_path) -> None:
    # found by scripts/fuzz_long.py (seed 77): 11 continuation bytes inside an xplane's first plane,
    # past its name, made the whole file "a binary file of no known format"
    for fmt in ("xplane", "perfetto"):
        data = SAMPLES[fmt](tmp_path).read_bytes()
        at = 40
        bad = tmp_path / f"damaged-{fmt}"
        bad.write_bytes(data[:at] + b"\xff" * 11 + data[at:])
        assert detect(str(bad)).format == fmt
