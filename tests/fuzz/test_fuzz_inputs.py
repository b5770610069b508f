"""Fuzzing: mutated real and generated traces through every command, in a watched subprocess.

Every mutated input must give a result (exit 0) or one line naming the file with exit 2; never an
internal error, a traceback, a crash or a hang, and the input file must be unchanged afterwards.
The example budget is bounded for CI (``TRACEREAD_FUZZ_EXAMPLES``, default 40 per test);
``scripts/fuzz_long.py`` runs the same mutations for as long as asked.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3

import pytest
from fuzz_harness import Worker, check_case
from fuzz_mutations import (
    COMMANDS,
    JSON_MUTATIONS,
    ROCPROFV3_MUTATIONS,
    SQLITE_MUTATIONS,
    json_bases,
    mutate_json,
    mutate_rocprofv3,
    mutate_sqlite,
    nsys_bases,
    rocm_bases,
    write_json_case,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from traceread.loaders.kineto import scan

SCANNER_BUILT = scan.BUILT
EXAMPLES = int(os.environ.get("TRACEREAD_FUZZ_EXAMPLES", "40"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                       HealthCheck.data_too_large])


@pytest.fixture(scope="module")
def worker():
    w = Worker()
    yield w
    w.close()


@pytest.fixture(scope="module")
def bases(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz-bases")
    return Bases({"json": json_bases(d), "nsys": nsys_bases(d)})


class Bases(dict):
    """The base inputs; a short repr, so a failing example does not print megabytes of JSON."""

    def __repr__(self) -> str:
        return f"<{len(self['json'])} JSON and {len(self['nsys'])} SQLite base inputs>"


def _check(worker: Worker, path: str, command: str, out_dir, base: str | None = None) -> None:
    why = check_case(worker, path, command, str(out_dir), base)
    assert why is None, why


@FUZZ
@given(data=st.data())
def test_mutated_kineto_json(worker, bases, tmp_path_factory, data) -> None:
    base_name = data.draw(st.sampled_from(sorted(bases["json"])), label="base")
    text = bases["json"][base_name]
    kind = data.draw(st.sampled_from(JSON_MUTATIONS), label="mutation")
    rnd = random.Random(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    mutated, how = mutate_json(rnd, text, kind)
    d = tmp_path_factory.mktemp("case")
    path = write_json_case(d / "in", base_name, mutated, gz=data.draw(st.booleans(), label="gzip"))
    base = write_json_case(d, "base-" + base_name, text.encode("utf-8"), gz=False)
    command = data.draw(st.sampled_from(COMMANDS), label="command")
    note = f"{base_name}: {how}"
    try:
        _check(worker, str(path), command, d, str(base))
        if SCANNER_BUILT:  # the compiled scanner must give the msgspec fallback's frame on every input
            why = worker.compare_decoders(str(path))
            assert why is None, why
    except AssertionError as exc:
        raise AssertionError(f"{note}\n{exc}") from None


@FUZZ
@given(data=st.data())
def test_mutated_nsys_sqlite(worker, bases, tmp_path_factory, data) -> None:
    base_name = data.draw(st.sampled_from(sorted(bases["nsys"])), label="base")
    base_path = bases["nsys"][base_name]
    d = tmp_path_factory.mktemp("case")
    (d / "in").mkdir()
    path = d / "in" / f"{base_name}.sqlite"
    path.write_bytes(base_path.read_bytes())
    kind = data.draw(st.sampled_from(SQLITE_MUTATIONS), label="mutation")
    how = mutate_sqlite(random.Random(data.draw(st.integers(0, 2**32 - 1), label="seed")), path, kind)
    command = data.draw(st.sampled_from(COMMANDS), label="command")
    try:
        _check(worker, str(path), command, d, str(base_path))
    except AssertionError as exc:
        raise AssertionError(f"{base_name}: {how}\n{exc}") from None


@pytest.fixture(scope="module")
def rocm(tmp_path_factory):
    return RocmBases(rocm_bases(tmp_path_factory.mktemp("rocm-bases")))


class RocmBases(tuple):
    """(JSON texts, SQLite files); a short repr, as Bases."""

    def __repr__(self) -> str:
        return f"<{len(self[0])} ROCm JSON and {len(self[1])} ROCm SQLite base inputs>"


@FUZZ
@given(data=st.data())
def test_mutated_rocm_json(worker, rocm, tmp_path_factory, data) -> None:
    """rocprofv3 and rpd2tracing JSON: the JSON mutations, and rocprofv3 record fields changed."""
    texts, _ = rocm
    base_name = data.draw(st.sampled_from(sorted(texts)), label="base")
    text = texts[base_name]
    kinds = JSON_MUTATIONS + (ROCPROFV3_MUTATIONS if base_name == "rocm-rocprofv3" else ())
    kind = data.draw(st.sampled_from(kinds), label="mutation")
    rnd = random.Random(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    mutated, how = mutate_rocprofv3(rnd, text, kind) if kind in ROCPROFV3_MUTATIONS else mutate_json(rnd, text, kind)
    d = tmp_path_factory.mktemp("case")
    path = write_json_case(d / "in", base_name, mutated, gz=data.draw(st.booleans(), label="gzip"))
    base = write_json_case(d, "base-" + base_name, text.encode("utf-8"), gz=False)
    command = data.draw(st.sampled_from(COMMANDS), label="command")
    try:
        _check(worker, str(path), command, d, str(base))
    except AssertionError as exc:
        raise AssertionError(f"{base_name}: {how}\n{exc}") from None


@FUZZ
@given(data=st.data())
def test_mutated_rocm_sqlite(worker, rocm, tmp_path_factory, data) -> None:
    """RPD and rocpd databases under the SQLite mutations (their own tables)."""
    _, dbs = rocm
    base_name = data.draw(st.sampled_from(sorted(dbs)), label="base")
    d = tmp_path_factory.mktemp("case")
    (d / "in").mkdir()
    path = d / "in" / f"{base_name}.sqlite"
    path.write_bytes(dbs[base_name].read_bytes())
    kind = data.draw(st.sampled_from(SQLITE_MUTATIONS), label="mutation")
    how = mutate_sqlite(random.Random(data.draw(st.integers(0, 2**32 - 1), label="seed")), path, kind)
    command = data.draw(st.sampled_from(COMMANDS), label="command")
    try:
        _check(worker, str(path), command, d, str(dbs[base_name]))
    except AssertionError as exc:
        raise AssertionError(f"{base_name}: {how}\n{exc}") from None


@pytest.mark.parametrize("depth", [1_000, 100_000])
def test_deep_nesting_in_args(worker, tmp_path, depth) -> None:
    # The report's own case: 100,000 nested lists in args gave a RecursionError traceback.
    text = '{"traceEvents":[{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1,"dur":2,"args":' + \
        "[" * depth + "]" * depth + "}]}"
    path = tmp_path / "deep.json"
    path.write_text(text)
    for command in ("analyze", "info"):
        _check(worker, str(path), command, tmp_path)


def test_nsys_kernel_table_without_end_column(worker, bases, tmp_path) -> None:
    # The report's own case: no `end` column gave sqlite3.OperationalError with a traceback.
    name, base = sorted(bases["nsys"].items())[0]
    path = tmp_path / "noend.sqlite"
    path.write_bytes(base.read_bytes())
    with sqlite3.connect(path) as db:
        db.execute('ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN "end"')
    for command in COMMANDS:
        _check(worker, str(path), command, tmp_path)


@pytest.mark.parametrize("command", COMMANDS)
def test_regression_damaged_sqlite_schema(worker, tmp_path, command) -> None:
    # Found by scripts/fuzz_long.py (seed 20261201): random bytes over a generated export left table
    # names that are not UTF-8; SQLite's error text quoting them raised UnicodeDecodeError in scan.
    import gzip
    from pathlib import Path

    (tmp_path / "in").mkdir()
    path = tmp_path / "in" / "damaged.sqlite"
    src = Path(__file__).parent / "regressions" / "damaged_schema_names.sqlite.gz"
    path.write_bytes(gzip.decompress(src.read_bytes()))
    _check(worker, str(path), command, tmp_path)


# Issue 26's classes as fixed cases (the hypothesis draws above sample them too; fuzz_long runs many).
def _planted_json(bases) -> tuple[str, str]:
    name = "planted-2024"
    return name, bases["json"][name]


@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_control_characters_in_string_fields(worker, bases, tmp_path, fmt) -> None:
    """Escape sequences in names, categories, args and metadata: no command shows them raw."""
    if fmt == "kineto":
        name, text = _planted_json(bases)
        data, how = mutate_json(random.Random(7), text, "control-chars")
        path = write_json_case(tmp_path / "in", name, data, gz=False)
    else:
        name = "planted-2026"
        (tmp_path / "in").mkdir()
        path = tmp_path / "in" / "c.sqlite"
        path.write_bytes(bases["nsys"][name].read_bytes())
        how = mutate_sqlite(random.Random(7), path, "control-text")
        with sqlite3.connect(path) as db:  # and every kernel name and GPU name
            db.execute("UPDATE StringIds SET value = value || ?", ("\x1b]0;pwned\x07\x9b31m",))
            db.execute("UPDATE TARGET_INFO_GPU SET name = name || ?", ("\x1b]52;c;aGk=\x07",))
    for command in COMMANDS:
        why = check_case(worker, str(path), command, str(tmp_path), str(path))
        assert why is None, f"{how}\n{why}"


@pytest.mark.parametrize("value", ["9007199254740993", "9223372036854775807", "18446744073709551616",
                                   "-9223372036854775809", "9" * 5001])
def test_integer_edges_in_event_fields(worker, bases, tmp_path, value) -> None:
    """2^53+1, int64 max, 2^64, below int64 and a 5,001-digit number in ts, dur, ids and args."""
    name, text = _planted_json(bases)
    doc = json.loads(text)
    evs = [e for e in doc["traceEvents"] if isinstance(e, dict) and e.get("ph") == "X"]
    marker = '"\u2603EDGE\u2603"'
    for ev, key in zip(evs[::7], ["ts", "dur", "pid", "tid"] * 3, strict=False):
        ev[key] = json.loads(marker)
    for ev in evs[3::11][:4]:
        ev.setdefault("args", {}).update({"device": json.loads(marker), "correlation": json.loads(marker)})
    path = write_json_case(tmp_path / "in", name, json.dumps(doc).replace(marker, value).encode(), gz=False)
    for command in ("analyze", "info", "kernels"):
        _check(worker, str(path), command, tmp_path)


def test_long_stretch_without_an_event_boundary(worker, bases, tmp_path) -> None:
    name, text = _planted_json(bases)
    at = text.index("[") + 1
    path = write_json_case(tmp_path / "in", name, (text[:at] + " " * (4 << 20) + text[at:]).encode(), gz=True)
    for command in ("analyze", "info"):
        _check(worker, str(path), command, tmp_path)


@pytest.mark.parametrize("command", COMMANDS)
def test_regression_zero_median_step(worker, tmp_path, command) -> None:
    # Found by scripts/fuzz_long.py (seed 2612, case 2287): integer edges (ts 2^63, dur 2^31) left steps
    # of 0 ns; diff asserted a non-zero median step (exit 3). Now: a result, no relative change.
    from pathlib import Path

    (tmp_path / "in").mkdir()
    path = tmp_path / "in" / "planted-int-us.json.gz"
    path.write_bytes((Path(__file__).parent / "regressions" / "zero_median_step_int_edges.json.gz").read_bytes())
    _check(worker, str(path), command, tmp_path)
