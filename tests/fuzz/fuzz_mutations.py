"""Mutations of Kineto JSON text and nsys SQLite exports (and of the ROCm formats: the JSON byte-level
mutations, mutate_rocprofv3, and the SQLite mutations on the RPD and rocpd tables).

Each ``mutate_*`` takes a seeded ``random.Random`` and a mutation kind (hypothesis draws both in the
test suite; ``scripts/fuzz_long.py`` picks them at random) and returns a description of what it
did, so a failing input says which mutation broke which base input.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import sqlite3
from pathlib import Path

from conftest import FIXTURES, SHARED_TRACES

COMMANDS = ["analyze", "gaps", "kernels", "info", "scan", "diff"]

# Small real traces (each well under 1 MB of JSON), from the clone's fixtures and ../shared when present.
_SHARED_JSON = ["hta_simple_add_tiny_a100.json.gz", "hta_compare_base.json.gz", "hta_event_sync_a100.json.gz",
                "hta_legacy_categories_rank1.json.gz", "tracelens_compile_triton_mi300x.json.gz",
                "hta_cpu_only_rank34.pt.trace.json.gz", "hta_triton_a100.json.gz"]
_FIXTURE_JSON = ["hta_uint64_arg.pt.trace.json.gz", "hta_alexnet_a100.json.gz"]
_SHARED_NSYS = ["nsysai_tiny_rtx3080_2026.sqlite"]

_WEIRD_VALUES = ['"text"', "[]", "{}", "null", "true", "-1", "0", "1e308", "-1e308", "NaN", "Infinity",
                 "-Infinity", "1180591620717411303424", "-9223372036854775809", "18446744073709551616",
                 "1.5", "0.000001", '"12"', '"\\u0000"', '"\\ud800"', "[[[[[[[[1]]]]]]]]"]
_FIELDS = ["ts", "dur", "pid", "tid", "name", "cat", "ph", "args", "id"]
_ARG_FIELDS = ["device", "stream", "correlation", "External id", "Input Dims", "grid", "block", "bytes",
               "Collective name", "In msg nelems"]


def _read_json_text(path: Path) -> str:
    raw = path.read_bytes()
    return (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode("utf-8")


def json_bases(tmp: Path) -> dict[str, str]:
    out = {p: _read_json_text(FIXTURES / p) for p in _FIXTURE_JSON}
    for p in _SHARED_JSON:
        if (SHARED_TRACES / "kineto" / p).exists():
            out[p] = _read_json_text(SHARED_TRACES / "kineto" / p)
    from tracesynth.kineto_writer import write_kineto
    from tracesynth.planted import PlantSpec, plant

    planted = plant(PlantSpec(seed=3, ranks=1, steps=3))
    for gen in ("2024", "int-us"):
        [path] = write_kineto(planted.scenario, str(tmp / f"planted-{gen}.pt.trace.json"), generation=gen)
        out[f"planted-{gen}"] = Path(path).read_text()
    return out


def nsys_bases(tmp: Path) -> dict[str, Path]:
    from tracesynth.nsys_writer import write_nsys
    from tracesynth.planted import PlantSpec, plant

    planted = plant(PlantSpec(seed=4, ranks=1, steps=3))
    out = {f"planted-{s}": Path(write_nsys(planted.scenario, tmp / f"planted-{s}.sqlite", schema=s))
           for s in ("2026", "2022")}
    for p in _SHARED_NSYS:
        if (SHARED_TRACES / "nsys" / p).exists():
            out[p] = SHARED_TRACES / "nsys" / p
    return out


def rocm_bases(tmp: Path) -> tuple[dict[str, str], dict[str, Path]]:
    """ROCm inputs written as their tools write them: (JSON texts, SQLite files)."""
    from tracesynth import rocm

    rpd, rocpd = tmp / "rocm-rpd.sqlite", tmp / "rocm-rocpd.sqlite"
    rocm.write_rpd(rpd)
    rocm.write_rocpd(rocpd)
    rocm.rpd2tracing(rpd, tmp / "rocm-rpd2tracing.json")
    texts = {"rocm-rocprofv3": json.dumps(rocm.rocprofv3_json(steps=3)),
             "rocm-rpd2tracing": (tmp / "rocm-rpd2tracing.json").read_text()}
    return texts, {"rocm-rpd": rpd, "rocm-rocpd": rocpd}


ROCPROFV3_MUTATIONS = ("v3-field", "v3-drop-key", "v3-int-edge")


def mutate_rocprofv3(rnd: random.Random, text: str, kind: str) -> tuple[bytes, str]:
    """A rocprofv3 JSON with one record field changed (a weird value, removed, an integer edge)."""
    doc = json.loads(text)
    tool = doc["rocprofiler-sdk-tool"][0]
    tables = [(name, recs) for name, recs in tool["buffer_records"].items() if recs] + \
        [("agents", tool["agents"]), ("kernel_symbols", tool["kernel_symbols"])]
    name, recs = tables[rnd.randrange(len(tables))]
    rec = recs[rnd.randrange(len(recs))]
    holder = rec
    if isinstance(rec.get("dispatch_info"), dict) and rnd.random() < 0.5:
        holder = rec["dispatch_info"]
    key = rnd.choice(sorted(holder))
    marker = "\u2603V3\u2603"
    if kind == "v3-drop-key":
        del holder[key]
        return json.dumps(doc).encode(), f"{name}: key {key} removed"
    value = rnd.choice(_INT_EDGES if kind == "v3-int-edge" else _WEIRD_VALUES)
    holder[key] = marker + value
    out = json.dumps(doc).replace(json.dumps(marker + value), value)
    return out.encode(), f"{name}: {key} = {value[:25]}"


def write_json_case(d: Path, base: str, data: bytes, gz: bool) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    stem = base.split(".")[0]
    path = d / (f"{stem}.json.gz" if gz else f"{stem}.json")
    path.write_bytes(gzip.compress(data, mtime=0) if gz else data)
    return path


def _events(text: str) -> tuple[dict | list, list]:
    doc = json.loads(text)
    evs = doc if isinstance(doc, list) else doc.setdefault("traceEvents", [])
    return doc, evs


JSON_MUTATIONS = ("flip", "truncate", "dup-delete", "wrong-type", "arg-type", "deep", "huge-string", "bad-utf8",
                  "shuffle", "splice", "control-chars", "int-edge", "long-stretch", "int-edge-all", "long-stretch-mb")
SQLITE_MUTATIONS = ("drop-table", "drop-column", "nulls", "wrong-type", "dangling-ids", "reorder",
                    "negative-duration", "corrupt-bytes", "truncate-file", "duplicate-rows", "int-edge",
                    "control-text", "int-edge-column", "rowid-layout", "wal-leftover")
# Only in scripts/fuzz_long.py (each run costs seconds or finds what other work still fixes):
# world sizes up to 10^12 and a rank past int32 in the trace's own metadata.
LONG_JSON_MUTATIONS = JSON_MUTATIONS + ("world-size",)
LONG_SQLITE_MUTATIONS = SQLITE_MUTATIONS

# Terminal escape sequences and other controls a hostile name may carry (issue 26): OSC window
# title and clipboard write, CSI, the one-byte C1 CSI, BEL, DEL, NUL, CR, NEL, a lone ESC.
CONTROL_TEXTS = ["\x1b]0;pwned\x07", "\x1b]52;c;aGk=\x07", "\x1b[31m", "\x9b31m", "\x07", "\x7f", "\x00",
                 "\r", "\x85", "\x1b", "\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\"]
# Integer edges: int32, 2^53 (float64 exactness), int64, uint64 and beyond, and past Python's
# 4,300-digit int-string limit.
INT_EDGES = [str(v) for v in (2**31 - 1, 2**31, 2**32 + 1, 2**53 + 1, 2**63 - 1, 2**63, 2**64, 2**64 + 1, 10**30,
                               -(2**31) - 1, -(2**63), -(2**63) - 1)] + ["9" * 5001]
_INT_FIELDS = ["ts", "dur", "pid", "tid", "id"]
_INT_ARG_FIELDS = ["device", "stream", "correlation", "External id", "bytes", "grid", "block", "Sequence number",
                   "In msg nelems", "Group size"]
_META_INT_FIELDS = [("distributedInfo", "world_size"), ("distributedInfo", "rank"), (None, "baseTimeNanoseconds"),
                    ("deviceProperties", "id"), ("deviceProperties", "totalGlobalMem"), ("deviceProperties", "numSms")]
WORLD_SIZES = [str(v) for v in (0, 1, 2**31 - 1, 2**31, 10**9, 10**12, 2**63 - 1, -1)]
# Integer edges (issue 26): int32, float64's exact range, int64, uint64 and past; a 5,001-digit one
# passes Python's int-string digit limit. Set in every integer field, top-level ones included.
_INT_EDGES = ["2147483647", "2147483648", "-2147483649", "9007199254740993", "9223372036854775807",
              "9223372036854775808", "-9223372036854775809", "18446744073709551616", "1" + "0" * 30, "9" * 5001]
_INT_FIELDS = ["ts", "dur", "pid", "tid", "id"]
_INT_ARGS = ["device", "stream", "correlation", "External id", "bytes", "In msg nelems", "Out msg nelems",
             "Group size", "registers per thread", "shared memory"]
_TOP_INTS = [("distributedInfo", "rank"), ("distributedInfo", "world_size"), (None, "baseTimeNanoseconds")]


def mutate_json(rnd: random.Random, text: str, kind: str) -> tuple[bytes, str]:
    """Mutation ``kind`` (one of JSON_MUTATIONS) of ``text``; returns the mutated bytes and what was done."""
    raw = text.encode("utf-8")
    if kind == "flip":
        b = bytearray(raw)
        n = rnd.randint(1, 8)
        for _ in range(n):
            i = rnd.randrange(len(b))
            b[i] = rnd.choice(b'{}[]",:0123456789-.eE \n\\\x00\xff') if rnd.random() < 0.7 else rnd.randrange(256)
        return bytes(b), f"{n} byte flips"
    if kind == "truncate":
        marks = [i for i, c in enumerate(raw) if c in b'{}[],:"0123456789']
        at = marks[rnd.randrange(len(marks))] + rnd.choice([0, 1]) if marks else rnd.randrange(len(raw))
        return raw[:at], f"truncated at byte {at} of {len(raw)} (after {raw[max(0, at - 12):at]!r})"
    if kind == "long-stretch":  # a long run with no event boundary: whitespace between events, or inside one
        events = [i for i in range(len(raw) - 1) if raw[i:i + 2] in (b"},", b"}]")]
        at = (events[rnd.randrange(len(events))] + 1) if events else len(raw) // 2
        size = rnd.choice([300_000, 3_000_000])
        filler = b" " * size if rnd.random() < 0.5 else b', {"ph": "i", "name": "' + b"s" * size + b'", "ts": 1}'
        return raw[:at] + filler + raw[at:], f"{len(filler):,} bytes without an event boundary at byte {at}"
    if kind == "splice":  # a chunk of the file repeated somewhere else (half-copied / concatenated files)
        a, b = sorted(rnd.randrange(len(raw)) for _ in range(2))
        at = rnd.randrange(len(raw))
        return raw[:at] + raw[a:b] + raw[at:], f"spliced bytes {a}:{b} at {at}"
    if kind == "long-stretch-mb":  # MiB-long runs with no event boundary: whitespace, or inside one string
        size = rnd.choice([1, 2, 4]) << 20
        marks = [i for i in range(len(raw)) if raw[i:i + 1] == b","] or [len(raw) // 2]
        at = rnd.choice(marks) + 1
        if rnd.random() < 0.5:
            return raw[:at] + b" " * size + raw[at:], f"{size >> 20} MiB of spaces at byte {at}"
        stretch = b'{"ph":"i","name":"' + b"x" * size + b'","pid":1,"tid":1,"ts":1},'
        return raw[:at] + stretch + raw[at:], f"an event with a {size >> 20} MiB name at byte {at}"
    doc, evs = _events(text)
    if not evs:
        return raw + b"garbage", "trailing garbage"
    if kind == "control-chars":
        return _control_chars(rnd, doc, evs)
    if kind in ("int-edge", "world-size"):
        return _int_edges(rnd, doc, evs, kind)
    if kind == "dup-delete":
        for _ in range(rnd.randint(1, 20)):
            i = rnd.randrange(len(evs))
            if rnd.random() < 0.5:
                evs.insert(rnd.randrange(len(evs) + 1), evs[i])
            elif len(evs) > 1:
                del evs[i]
        return json.dumps(doc).encode(), "events duplicated and deleted"
    if kind == "shuffle":
        rnd.shuffle(evs)
        return json.dumps(doc).encode(), "events shuffled (time going backwards in the file)"
    if kind in ("wrong-type", "arg-type"):
        marker = "\u2603MUT\u2603"
        done = []
        for _ in range(rnd.randint(1, 5)):
            ev = evs[rnd.randrange(len(evs))]
            if not isinstance(ev, dict):
                continue
            value = rnd.choice(_WEIRD_VALUES)
            if kind == "arg-type":
                args = ev.get("args")
                if not isinstance(args, dict):
                    ev["args"] = args = {}
                key = rnd.choice(_ARG_FIELDS)
                args[key] = marker + value
            else:
                key = rnd.choice(_FIELDS)
                ev[key] = marker + value
            done.append(f"{key}={value}")
        out = json.dumps(doc)
        # Put the raw tokens (NaN, huge ints, nested lists) in place of the quoted placeholders.
        for value in _WEIRD_VALUES:
            out = out.replace(json.dumps(marker + value), value)
        return out.encode(), "fields set to " + ", ".join(done)
    if kind == "int-edge-all":  # every integer field, top-level ones and step numbers included
        marker, done = "\u2603INT\u2603", []
        for _ in range(rnd.randint(1, 4)):
            value = rnd.choice(_INT_EDGES)
            ev = evs[rnd.randrange(len(evs))]
            where = rnd.random()
            if where < 0.15 and isinstance(doc, dict):
                outer, key = rnd.choice(_TOP_INTS)
                holder = doc.setdefault(outer, {}) if outer else doc
                if isinstance(holder, dict):
                    holder[key] = marker + value
                    done.append(f"{outer or ''}.{key}")
            elif where < 0.25 and isinstance(ev, dict):
                ev["name"] = "ProfilerStep#" + value.lstrip("-")
                done.append("ProfilerStep#")
            elif isinstance(ev, dict):
                if where < 0.6:
                    key = rnd.choice(_INT_FIELDS)
                    ev[key] = marker + value
                else:
                    args = ev.setdefault("args", {})
                    key = rnd.choice(_INT_ARGS)
                    if isinstance(args, dict):
                        args[key] = marker + value
                done.append(key)
            done[-1:] = [f"{done[-1]}={value[:25]}"] if done else []
        out = json.dumps(doc)
        for value in _INT_EDGES:
            out = out.replace(json.dumps(marker + value), value)
        return out.encode(), "integer edges: " + ", ".join(done)
    if kind == "deep":
        depth = rnd.choice([64, 1_000, 20_000])
        ev = evs[rnd.randrange(len(evs))]
        marker = "\u2603DEEP\u2603"
        if isinstance(ev, dict):
            ev.setdefault("args", {})
            if isinstance(ev["args"], dict):
                ev["args"]["nest"] = marker
        out = json.dumps(doc).replace(json.dumps(marker), "[" * depth + "]" * depth)
        return out.encode(), f"args nested {depth} deep"
    if kind == "huge-string":
        ev = evs[rnd.randrange(len(evs))]
        if isinstance(ev, dict):
            ev["name"] = "k" * rnd.choice([70_000, 3_000_000])
        return json.dumps(doc).encode(), "one name of millions of characters"
    # bad-utf8: invalid bytes inside a string value
    b = bytearray(raw)
    quotes = [i for i, c in enumerate(b) if c == ord('"')]
    at = quotes[rnd.randrange(len(quotes))] + 1 if quotes else 0
    b[at:at] = rnd.choice([b"\xff\xfe", b"\xc3", b"\xed\xa0\x80", b"\x80\x80"])
    return bytes(b), f"invalid UTF-8 inserted at byte {at}"


def _strings(obj: object, path: tuple = ()) -> list[tuple]:
    """Paths to every string value in a JSON document (dict keys and list indices)."""
    if isinstance(obj, str):
        return [path]
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else []
    return [p for k, v in items for p in _strings(v, path + (k,))]


def _set(doc: object, path: tuple, value: object) -> None:
    for k in path[:-1]:
        doc = doc[k]  # type: ignore[index]
    doc[path[-1]] = value  # type: ignore[index]


def _get(doc: object, path: tuple) -> object:
    for k in path:
        doc = doc[k]  # type: ignore[index]
    return doc


def _control_chars(rnd: random.Random, doc: dict | list, evs: list) -> tuple[bytes, str]:
    """Control characters and escape sequences in string fields: names (kernel, op, annotation, GPU),
    categories, args, metadata. Written JSON-escaped or, sometimes, raw (a writer bug the loader repairs)."""
    paths = _strings(doc)
    if not paths:
        return json.dumps(doc).encode(), "no string field"
    done = []
    marker = "\u2603CTL{}\u2603"
    raw_values = {}
    for i in range(rnd.randint(1, 12)):
        path = rnd.choice(paths)
        text = rnd.choice(CONTROL_TEXTS)
        where = rnd.choice(["prefix", "suffix", "replace"])
        old = str(_get(doc, path))
        new = text + old if where == "prefix" else old + text if where == "suffix" else text
        if rnd.random() < 0.2:  # raw in the file, not JSON-escaped
            raw_values[marker.format(i)] = new
            new = marker.format(i)
        _set(doc, path, new)
        done.append(f"{'/'.join(map(str, path[-2:]))}: {where} {text!r}")
    out = json.dumps(doc)
    for m, value in raw_values.items():
        out = out.replace(json.dumps(m)[1:-1], json.dumps(value)[1:-1].encode().decode("unicode_escape"))
    return out.encode("utf-8", "surrogatepass"), "control characters in " + "; ".join(done)


def _int_edges(rnd: random.Random, doc: dict | list, evs: list, kind: str) -> tuple[bytes, str]:
    """Integers at the edges of int32/int64/uint64 (and past them) in integer fields of events, args
    and metadata, step numbers (``ProfilerStep#N``) included; ``world-size``: the trace's rank and
    world size only."""
    marker = "\u2603INT{}\u2603"
    tokens, done = {}, []
    for i in range(rnd.randint(1, 6)):
        value = rnd.choice(WORLD_SIZES if kind == "world-size" else INT_EDGES)
        m = marker.format(i)
        tokens[json.dumps(m)] = str(value)
        where = "meta" if kind == "world-size" else rnd.choice(["event", "arg", "meta", "step"])
        if where == "meta" and isinstance(doc, dict):
            # world sizes size allocations (issue 26): only the world-size mutation sets them
            table, key = rnd.choice(_META_INT_FIELDS[:2] if kind == "world-size" else _META_INT_FIELDS[2:])
            if table is None:
                doc[key] = m
            elif table == "deviceProperties":
                for d in doc.get(table) or [{}]:
                    if isinstance(d, dict):
                        d[key] = m
            else:
                info = doc.setdefault(table, {})
                if isinstance(info, dict):
                    info[key] = m
            done.append(f"{table or ''}.{key}={str(value)[:24]}")
            continue
        ev = evs[rnd.randrange(len(evs))]
        if not isinstance(ev, dict):
            continue
        if where == "step":
            ev.update(name=f"ProfilerStep#{value}", ph="X", cat="user_annotation")
            done.append(f"step number {str(value)[:24]}")
        elif where == "arg":
            args = ev.setdefault("args", {})
            if isinstance(args, dict):
                key = rnd.choice(_INT_ARG_FIELDS)
                args[key] = m
                done.append(f"args.{key}={str(value)[:24]}")
        else:
            key = rnd.choice(_INT_FIELDS)
            ev[key] = m
            done.append(f"{key}={str(value)[:24]}")
    out = json.dumps(doc)
    for m, value in tokens.items():
        out = out.replace(m, value)
    return out.encode(), "integers at edges: " + ", ".join(done)


def _tables(db: sqlite3.Connection) -> list[str]:
    return [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]


def _columns(db: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in db.execute(f'PRAGMA table_info("{table}")')]


_KEY_TABLES = ["CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_MEMCPY",
               "CUPTI_ACTIVITY_KIND_MEMSET", "NVTX_EVENTS", "StringIds", "TARGET_INFO_GPU",
               "TARGET_INFO_CUDA_DEVICE", "TARGET_INFO_SESSION_START_TIME", "ThreadNames", "ProcessStreams",
               "ENUM_NSYS_EVENT_TYPE", "META_DATA_EXPORT", "CUDA_GPU_MEMORY_USAGE_EVENTS"]


def _key_tables(db: sqlite3.Connection) -> list[str]:
    """The tables worth mutating: nsys' key tables, and every ROCm one (RPD's, rocpd's UUID-suffixed)."""
    have = _tables(db)
    return [t for t in _KEY_TABLES if t in have] + sorted(t for t in have if t.startswith("rocpd_"))


def _drop_column(db: sqlite3.Connection, table: str, col: str) -> None:
    keep = [c for c in _columns(db, table) if c != col]
    cols = ", ".join(f'"{c}"' for c in keep)
    db.execute(f'CREATE TABLE "_m" AS SELECT {cols} FROM "{table}"')
    db.execute(f'DROP TABLE "{table}"')
    db.execute(f'ALTER TABLE "_m" RENAME TO "{table}"')


def _connect(path: Path, rnd: random.Random) -> sqlite3.Connection:
    """A connection whose SQL ``random()`` draws from ``rnd``: the rows a mutation picks follow the example's
    seed, so a failing example fails on every run (SQLite's own random() made one fail one run in many)."""
    db = sqlite3.connect(path)
    db.create_function("random", 0, lambda: rnd.getrandbits(62))  # non-negative: abs() of it cannot overflow
    return db


def mutate_sqlite(rnd: random.Random, path: Path, kind: str) -> str:
    """Mutate the export at ``path`` (a copy) in place by ``kind`` (one of SQLITE_MUTATIONS); returns what was done."""
    if kind in ("corrupt-bytes", "truncate-file"):
        b = bytearray(path.read_bytes())
        if kind == "truncate-file":
            at = rnd.randrange(len(b))
            path.write_bytes(bytes(b[:at]))
            return f"file truncated at byte {at}"
        for _ in range(rnd.randint(1, 50)):
            b[rnd.randrange(len(b))] = rnd.randrange(256)
        path.write_bytes(bytes(b))
        return "random bytes overwritten"
    db = _connect(path, rnd)
    try:
        tables = _key_tables(db)
        table = tables[rnd.randrange(len(tables))]
        cols = _columns(db, table)
        col = cols[rnd.randrange(len(cols))]
        if kind == "drop-table":
            db.execute(f'DROP TABLE "{table}"')
            what = f"table {table} dropped"
        elif kind == "drop-column":
            _drop_column(db, table, col)
            what = f"column {table}.{col} dropped"
        elif kind == "nulls":
            db.execute(f'UPDATE "{table}" SET "{col}" = NULL WHERE abs(random()) % 3 = 0')
            what = f"{table}.{col} NULL in a third of the rows"
        elif kind == "wrong-type":
            value = rnd.choice(["'text'", "1.5", "x'00ff'", "9223372036854775807", "-9223372036854775808", "-1"])
            db.execute(f'UPDATE "{table}" SET "{col}" = {value} WHERE abs(random()) % 2 = 0')
            what = f"{table}.{col} set to {value} in half the rows"
        elif kind == "dangling-ids":
            k = "CUPTI_ACTIVITY_KIND_KERNEL" if "CUPTI_ACTIVITY_KIND_KERNEL" in tables else table
            kc = [c for c in _columns(db, k) if c in ("shortName", "demangledName", "mangledName", "nameId",
                                                       "textId", "correlationId")] or [col]
            c = rnd.choice(kc)
            db.execute(f'UPDATE "{k}" SET "{c}" = 987654321 WHERE abs(random()) % 2 = 0')
            what = f"{k}.{c} points nowhere in half the rows"
        elif kind == "reorder":
            db.execute(f'CREATE TABLE "_m" AS SELECT * FROM "{table}" ORDER BY random()')
            db.execute(f'DROP TABLE "{table}"')
            db.execute(f'ALTER TABLE "_m" RENAME TO "{table}"')
            what = f"rows of {table} in random order"
        elif kind == "int-edge":
            ints = [c for c in cols if db.execute(f'SELECT count(*) FROM "{table}" WHERE typeof("{c}") = '
                                                  "'integer'").fetchone()[0]] or [col]
            c = rnd.choice(ints)
            value = rnd.choice(["2147483647", "2147483648", "4294967297", "9007199254740993",
                                "9223372036854775807", "-9223372036854775808", "18446744073709551616.0",
                                "1e30"])
            db.execute(f'UPDATE "{table}" SET "{c}" = {value} WHERE abs(random()) % 2 = 0')
            what = f"{table}.{c} set to {value} in half the rows"
        elif kind == "control-text":
            texts = [c for c in cols if db.execute(f'SELECT count(*) FROM "{table}" WHERE typeof("{c}") = '
                                                   "'text'").fetchone()[0]]
            k, c = (table, rnd.choice(texts)) if texts else ("StringIds", "value")
            if rnd.random() < 0.3:  # bytes that are not UTF-8 (and an escape), stored as text
                db.execute(f'UPDATE "{k}" SET "{c}" = CAST(X\'c3ff1b5d303b7807\' AS TEXT) || "{c}" '
                           "WHERE abs(random()) % 2 = 0")
                what = f"{k}.{c} starts with invalid UTF-8 and an escape in half the rows"
            else:
                text = rnd.choice(CONTROL_TEXTS)
                db.execute(f'UPDATE "{k}" SET "{c}" = "{c}" || ? WHERE abs(random()) % 2 = 0', (text,))
                what = f"{k}.{c} ends with {text!r} in half the rows"
        elif kind == "negative-duration":
            k = "CUPTI_ACTIVITY_KIND_KERNEL" if "CUPTI_ACTIVITY_KIND_KERNEL" in tables else table
            if {"start", "end"} <= set(_columns(db, k)):
                db.execute(f'UPDATE "{k}" SET "end" = "start" - 1000 WHERE abs(random()) % 4 = 0')
            what = f"end before start in a quarter of {k}"
        elif kind == "int-edge-column":  # the table's first column, a third of the rows
            value = rnd.choice(["2147483648", "-2147483649", "9007199254740993", "9223372036854775807",
                                "-9223372036854775808", "18446744073709551616", "1e30"])
            db.execute(f'UPDATE "{table}" SET "{col}" = {value} WHERE abs(random()) % 3 = 0')
            what = f"{table}.{col} set to {value} in a third of the rows"
        elif kind == "rowid-layout":
            if rnd.random() < 0.5:
                big = rnd.choice([2**31, 2**53, 2**62, 2**63 - 1])
                db.execute(f'UPDATE "{table}" SET rowid = {big} WHERE rowid = (SELECT MAX(rowid) FROM "{table}")')
                what = f"last rowid of {table} set to {big}"
            else:
                db.execute(f'ALTER TABLE "{table}" ADD COLUMN rowid INTEGER')
                db.execute(f'UPDATE "{table}" SET rowid = 1')
                what = f"{table} has a column named rowid holding duplicates"
        elif kind == "wal-leftover":
            db.commit()
            db.close()
            return _wal_leftover(rnd, path)
        else:  # duplicate-rows
            db.execute(f'INSERT INTO "{table}" SELECT * FROM "{table}" WHERE abs(random()) % 5 = 0')
            what = f"a fifth of {table}'s rows duplicated"
        db.commit()
    except sqlite3.Error as exc:  # a mutation sqlite itself refuses (a unique key): keep the copy as is
        what = f"{kind} refused by sqlite ({exc})"
    finally:
        db.close()
    return what


def _wal_leftover(rnd: random.Random, path: Path) -> str:
    """The export with a -wal beside it and no -shm (a writer that crashed), some rows only in the -wal."""
    import shutil

    work = path.with_name("_wal_work.sqlite")
    shutil.copyfile(path, work)
    db = _connect(work, rnd)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA wal_autocheckpoint=0")
        tables = _key_tables(db)
        table = tables[rnd.randrange(len(tables))]
        db.execute(f'INSERT INTO "{table}" SELECT * FROM "{table}" WHERE abs(random()) % 4 = 0')
        db.commit()
        shutil.copyfile(work, path)
        shutil.copyfile(str(work) + "-wal", str(path) + "-wal")  # copied while open: the -wal is kept
        what = f"a -wal beside the export with rows of {table}, no -shm"
    except sqlite3.Error as exc:
        what = f"wal-leftover refused by sqlite ({exc})"
    finally:
        db.close()
    for sfx in ("", "-wal", "-shm"):
        if os.path.exists(str(work) + sfx):
            os.remove(str(work) + sfx)
    return what
