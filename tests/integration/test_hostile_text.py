"""No output carries a raw control character from a trace (issue 26: terminal escape injection).

GPU names, kernel names, op names and annotations carrying OSC (``ESC ] 0;title BEL``, the ``ESC ] 52``
clipboard write), CSI, a one-byte C1 CSI (0x9b), NEL (0x85), DEL, CR and NUL go through every
command, both formats. Text on standard output and Markdown (stdout or file) show them escaped
(``\\x1b``); JSON keeps them JSON-escaped (``\\u001b``, C1 and DEL included) and reads back as the
trace spelled them.
"""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest
from tracesynth.kineto_writer import write_kineto
from tracesynth.nsys_writer import write_nsys
from tracesynth.planted import PlantSpec, plant

from traceread.cli import main
from traceread.printable import printable, printable_json

EVIL = "A\x1b]0;pwned\x07B\x1b]52;c;aGk=\x07C\x1b[31mD\x9b31mE\x85F\x7fG\rH\x00I\x1b\\J"
# Any C0 control other than newline and tab, DEL, any C1 control.
RAW_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
PLANTED = PlantSpec(seed=11, ranks=1, steps=4)


def _kineto(folder: Path) -> Path:
    [path] = write_kineto(plant(PLANTED).scenario, str(folder / "k.pt.trace.json"))
    doc = json.loads(Path(path).read_text())
    for d in doc.get("deviceProperties", []):
        d["name"] = "GPU" + EVIL
    for ev in doc["traceEvents"]:
        if ev.get("cat") in ("kernel", "user_annotation", "cpu_op", "gpu_user_annotation"):
            ev["name"] = ev["name"] + EVIL
    Path(path).write_text(json.dumps(doc))
    return Path(path)


def _nsys(folder: Path) -> Path:
    path = Path(write_nsys(plant(PLANTED).scenario, folder / "n.sqlite"))
    with sqlite3.connect(path) as db:
        db.execute("UPDATE StringIds SET value = value || ?", (EVIL,))
        db.execute("UPDATE TARGET_INFO_GPU SET name = ?", ("GPU" + EVIL,))
        db.execute("UPDATE NVTX_EVENTS SET text = text || ? WHERE text IS NOT NULL", (EVIL,))
    return path


def _check_text(name: str, data: bytes) -> None:
    text = data.decode("utf-8")
    if name.endswith(".json"):
        assert not RAW_CONTROL.search(text.replace("\n", "").replace("\t", "")), name
        json.loads(text)  # escaped, still JSON
    else:
        found = RAW_CONTROL.search(text)
        assert not found, (name, text[max(found.start() - 80, 0):found.end() + 20])


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_control_characters_reach_no_output(tmp_path, fmt, capsys) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    src = str(_kineto(tree) if fmt == "kineto" else _nsys(tree))
    out = tmp_path / "out"
    out.mkdir()
    runs = [["analyze", src], ["analyze", src, "-o", str(out / "r.md"), "--json", str(out / "r.json"),
                               "--perfetto", str(out / "t.pftrace"), "--plot", str(out / "t.svg")],
            ["analyze", src, "--json", "-"], ["info", src], ["info", src, "--json", "-"],
            ["gaps", src, "--json", str(out / "g.json"), "--csv", str(out / "g.csv")], ["gaps", src],
            ["kernels", src], ["kernels", src, "--json", "-"],
            ["diff", src, src, "-o", str(out / "d.md"), "--json", str(out / "d.json")], ["diff", src, src],
            ["scan", str(tree), "--out", str(out / "scan"), "--workers", "1"]]
    for argv in runs:
        assert main(argv) in (0, 1), argv
        printed = capsys.readouterr()
        _check_text("stdout.json" if argv[-1] == "-" else "stdout", printed.out.encode())
        _check_text("stderr", printed.err.encode())
    files = [p for p in out.rglob("*") if p.is_file() and ".traceread-cache" not in p.parts
             and p.suffix in (".md", ".json", ".csv", ".svg")]
    assert {p.suffix for p in files} == {".md", ".json", ".csv", ".svg"}
    for f in files:
        _check_text(f.name, f.read_bytes())
    # JSON keeps the name exactly as the trace spells it (escaped only in the encoding).
    report = json.loads((out / "r.json").read_text())
    assert any(d["name"] == "GPU" + EVIL for t in report["traces"] for d in t["devices"])
    md = (out / "r.md").read_text()
    assert "\\\\x1b\\]0;pwned\\\\x07" in md or "\\x1b]0;pwned\\x07" in md  # shown, escaped


def test_printable_escapes_every_control_and_keeps_layout() -> None:
    controls = "".join(map(chr, [*range(0x20), 0x7F, *range(0x80, 0xA0)]))
    shown = printable(controls)
    assert not RAW_CONTROL.search(shown) and "\n" not in shown and "\t" not in shown
    assert shown.startswith("\\x00\\x01") and "\\x1b" in shown and "\\x9b" in shown and "\\x7f" in shown
    assert printable("a\tb\nc\x1b", layout=True) == "a\tb\nc\\x1b"
    assert printable("plain ü → 日本") == "plain ü → 日本"
    assert printable(printable(controls)) == printable(controls)  # escaping twice changes nothing more


def test_printable_json_escapes_c1_and_del_only_inside_strings() -> None:
    import orjson

    doc = {"name": "x\x1b\x9b\x85\x7fü€", "n": 1}
    data = printable_json(orjson.dumps(doc))
    assert not re.search(rb"\x7f|\xc2[\x80-\x9f]", data)
    assert json.loads(data) == doc


def test_nsys_export_metadata_free_text_reaches_no_report(tmp_path, capsys) -> None:
    """Only the version numbers of META_DATA_EXPORT are shown, and only when they read as versions."""
    secret = "/home/s3cr3tUSER/run"
    path = Path(write_nsys(plant(PLANTED).scenario, tmp_path / "m.sqlite"))
    with sqlite3.connect(path) as db:
        db.execute("UPDATE META_DATA_EXPORT SET value = ? WHERE name = 'EXPORT_PRODUCT_VERSION'",
                   (f"2024.5 {secret}\x1b]0;x\x07",))
        db.execute("UPDATE META_DATA_EXPORT SET value = ? WHERE name = 'EXPORT_SCHEMA_VERSION'", ("3.11.1-beta",))
    assert main(["info", str(path), "--json", str(tmp_path / "i.json")]) == 0
    assert main(["analyze", str(path), "-o", str(tmp_path / "r.md"), "--json", str(tmp_path / "r.json")]) == 0
    printed = capsys.readouterr().out
    assert secret not in printed and "nsys unrecognized (export schema 3.11.1-beta)" in printed
    for name in ("i.json", "r.md", "r.json"):
        text = (tmp_path / name).read_text()
        assert secret not in text and "unrecognized" in text, name
