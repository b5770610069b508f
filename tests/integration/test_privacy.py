"""Privacy: user, host and environment values a trace carries never reach any output.

Planted in every field either format holds them in: Kineto top-level metadata, ``distributedInfo``,
process/thread name metadata and op args; nsys ``TARGET_INFO_SYSTEM_ENV``, ``PROCESSES``, thread
names, the export's metadata. Every output of every command is searched for the planted marker.
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

SECRET = "s3cr3tUSERhost"
PLANTED = PlantSpec(seed=11, ranks=1, steps=4)


def _kineto(tmp: Path) -> Path:
    [path] = write_kineto(plant(PLANTED).scenario, str(tmp / "k.pt.trace.json"))
    doc = json.loads(Path(path).read_text())
    doc.update({"hostname": SECRET, "username": SECRET, "traceName": f"/home/{SECRET}/run/trace.json",
                "environment": {"USER": SECRET, "HOSTNAME": SECRET, "PATH": f"/home/{SECRET}/bin"},
                # Kineto 2026 copies these environment variables into the top level (EnvMetadata.h)
                "PT_PROFILER_JOB_NAME": SECRET, "PT_PROFILER_JOB_VERSION": SECRET, "host_name": SECRET})
    doc.setdefault("distributedInfo", {}).update({"host_name": SECRET, "master_addr": f"{SECRET}.cluster",
                                                   "username": SECRET})
    evs = doc["traceEvents"]
    evs += [{"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": f"python ({SECRET})"}},
            {"name": "process_labels", "ph": "M", "pid": 1, "tid": 0, "args": {"labels": SECRET}},
            {"name": "thread_name", "ph": "M", "pid": 1, "tid": 100, "args": {"name": f"thread of {SECRET}"}}]
    for ev in evs[:50]:
        if ev.get("ph") == "X":
            ev.setdefault("args", {}).update({"Trace name": SECRET, "hostname": SECRET, "cwd": f"/home/{SECRET}"})
    Path(path).write_text(json.dumps(doc))
    return Path(path)


def _nsys(tmp: Path) -> Path:
    path = Path(write_nsys(plant(PLANTED).scenario, tmp / "n.sqlite"))
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE IF NOT EXISTS TARGET_INFO_SYSTEM_ENV (globalVid INTEGER, devStateName TEXT, "
                   "name TEXT, nameEnum INTEGER, value TEXT)")
        db.executemany("INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (0, 'x', ?, 0, ?)",
                       [("Hostname", SECRET), ("UserName", SECRET), ("CpuInfo", SECRET)])
        db.execute("CREATE TABLE IF NOT EXISTS PROCESSES (globalPid INTEGER, pid INTEGER, name TEXT)")
        db.execute("UPDATE PROCESSES SET name = ?", (f"/home/{SECRET}/venv/bin/python",))
        db.execute("INSERT INTO PROCESSES VALUES (1, 1, ?)", (f"/home/{SECRET}/venv/bin/python",))
        db.execute("INSERT INTO StringIds (id, value) VALUES (987654, ?)", (f"thread on {SECRET}",))
        if db.execute("SELECT name FROM sqlite_master WHERE name='ThreadNames'").fetchone():
            db.execute("UPDATE ThreadNames SET nameId = 987654")
        for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
            if db.execute("SELECT name FROM sqlite_master WHERE name=?", (table,)).fetchone():
                db.execute(f"INSERT INTO {table} (name, value) VALUES ('HostName', ?)", (SECRET,))
    return path


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_planted_user_host_env_values_reach_no_output(tmp_path, fmt, capsys) -> None:
    src = _kineto(tmp_path) if fmt == "kineto" else _nsys(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    runs = [["analyze", str(src), "-o", str(out / "r.md"), "--json", str(out / "r.json"),
             "--perfetto", str(out / "t.pftrace"), "--plot", str(out / "t.svg")],
            ["info", str(src), "--json", str(out / "i.json")],
            ["gaps", str(src), "--json", str(out / "g.json"), "--csv", str(out / "g.csv")],
            ["kernels", str(src), "--json", str(out / "k.json")]]
    printed = ""
    for argv in runs:
        assert main(argv) == 0, argv
        printed += capsys.readouterr().out
    assert SECRET not in printed
    for f in out.iterdir():
        assert SECRET.encode() not in f.read_bytes(), f.name


HOSTILE = "evil|kernel`<b>**x**</b>\n# not a heading [link](http://x) \\ end"


def test_hostile_kernel_name_round_trips(tmp_path) -> None:
    """JSON keeps the raw name; Markdown escapes it so it cannot break a table or inject markup."""
    [path] = write_kineto(plant(PLANTED).scenario, str(tmp_path / "h.pt.trace.json"))
    doc = json.loads(Path(path).read_text())
    n = 0
    for ev in doc["traceEvents"]:
        if ev.get("cat") == "kernel" and "gemm" in ev.get("name", ""):
            ev["name"] = HOSTILE
            n += 1
    assert n
    Path(path).write_text(json.dumps(doc))
    assert main(["kernels", path, "--json", str(tmp_path / "k.json")]) == 0
    names = [k["name"] for k in json.loads((tmp_path / "k.json").read_text())["kernels"]]
    assert HOSTILE in names
    assert main(["analyze", path, "-o", str(tmp_path / "r.md")]) == 0
    md = (tmp_path / "r.md").read_text()
    assert "\n# not a heading" not in md  # the newline in the name cannot start a Markdown block
    rows = [ln for ln in md.splitlines() if ln.startswith("|") and "evil" in ln]
    assert rows
    for row in rows:
        # Outside code spans nothing of the name is markup, and escaped pipes keep the table's columns.
        bare = re.sub(r"(`+)(.+?)\1", "", row)
        assert "<b>" not in bare and "**x**" not in bare
        table_head = md.splitlines()[md.splitlines().index(row) - 1]
        while not table_head.startswith("| ---"):
            table_head = md.splitlines()[md.splitlines().index(table_head) - 1]
        assert len(re.findall(r"(?<!\\)\|", row)) == table_head.count("|")


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_planted_values_reach_no_scan_or_diff_output(tmp_path, fmt, capsys) -> None:
    import pyarrow.parquet as pq

    tree = tmp_path / "tree"
    tree.mkdir()
    src = _kineto(tree) if fmt == "kineto" else _nsys(tree)
    out = tmp_path / "scan-out"
    assert main(["scan", str(tree), "--out", str(out), "--workers", "1"]) == 0
    assert main(["diff", str(src), str(src), "-o", str(tmp_path / "d.md"), "--json", str(tmp_path / "d.json")]) in (0, 1)
    assert SECRET not in capsys.readouterr().out
    files = [p for p in out.rglob("*") if p.is_file() and ".traceread-cache" not in p.parts]
    files += [tmp_path / "d.md", tmp_path / "d.json"]
    assert any(p.suffix == ".parquet" for p in files)
    for f in files:
        if f.suffix == ".parquet":  # compressed columns: read the values back
            table = pq.read_table(f)
            for col in table.column_names:
                assert not any(SECRET in str(v) for v in table.column(col).to_pylist()), (f.name, col)
        else:
            assert SECRET.encode() not in f.read_bytes(), f.name
