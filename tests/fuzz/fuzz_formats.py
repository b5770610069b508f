"""Per-format seeds and mutations: every format traceread detects, fuzzed through ``load``.

``format_seeds(tmp)`` gives one or more seed files per format: the tiny sample of each format
(``tracesynth.format_samples.SAMPLES``, so a new format is one entry there) and the small real
samples of ../shared/traces/formats when present. ``mutate_format`` mutates a seed by the seed's
family: SQLite databases with the nsys fuzzer's SQLite mutations, JSON with its JSON mutations,
protobuf and other binaries with byte-level ones that target protobuf's framing (lengths,
varints, field keys) as well as plain flips and cuts.
"""

from __future__ import annotations

import gzip
import random
import sqlite3
from pathlib import Path

from conftest import SHARED_TRACES
from fuzz_mutations import CONTROL_TEXTS, JSON_MUTATIONS, mutate_json

from traceread.loaders.detect import GZIP_MAGIC, SQLITE_MAGIC

BINARY_MUTATIONS = ("flip", "truncate", "splice", "zero-run", "length-huge", "length-zero", "varint-run",
                    "key-garble", "append-garbage", "duplicate-record")
# any database's tables (the nsys fuzzer's mutations know the nsys tables only)
SQLITE_MUTATIONS = ("drop-table", "nulls", "wrong-type", "int-edge", "negative", "control-text", "delete-rows",
                    "duplicate-rows", "corrupt-bytes", "truncate-file")
SQLITE_VALUES = {"nulls": [None], "wrong-type": ["text", b"\x00\xff", 1.5], "int-edge": [
    2**31, 2**53 + 1, 2**63 - 1, -(2**63), 0], "negative": [-1, -(10**12)], "control-text": CONTROL_TEXTS}
SHARED_MAX_BYTES = 400_000  # real samples small enough for a fuzz example each


def format_seeds(tmp: Path) -> dict[str, Path]:
    """name -> seed file, for every format's sample and the small shared samples."""
    from tracesynth.format_samples import SAMPLES, write_kineto_perfetto

    out: dict[str, Path] = {}
    for fmt, write in sorted(SAMPLES.items()):
        d = tmp / f"seed-{fmt}"
        d.mkdir(parents=True, exist_ok=True)
        out[fmt] = write(d)
    d = tmp / "seed-kineto-perfetto"
    d.mkdir(exist_ok=True)
    out["perfetto (kineto)"] = write_kineto_perfetto(d)
    shared = SHARED_TRACES / "formats"
    if shared.is_dir():
        for p in sorted(shared.iterdir()):
            if p.is_file() and p.suffix != ".md" and p.stat().st_size <= SHARED_MAX_BYTES:
                out[p.name] = p
    return out


def family(path: Path) -> str:
    head = path.read_bytes()[:16]
    if head.startswith(SQLITE_MAGIC):
        return "sqlite"
    if head.startswith(GZIP_MAGIC) or head.lstrip()[:1] in (b"{", b"["):
        return "json"
    return "binary"


def mutations(path: Path) -> tuple[str, ...]:
    return {"sqlite": SQLITE_MUTATIONS, "json": JSON_MUTATIONS}.get(family(path), BINARY_MUTATIONS)


def mutate_format(rnd: random.Random, seed: Path, case: Path, kind: str) -> tuple[Path, str]:
    """Write ``seed`` mutated by ``kind`` (one of ``mutations(seed)``) into folder ``case``; the file
    (named like the seed) and what was done."""
    out = case / seed.name
    fam = family(seed)
    raw = seed.read_bytes()
    if fam == "sqlite":
        out.write_bytes(raw)
        return out, mutate_any_sqlite(rnd, out, kind)
    if fam == "json":
        gz = raw.startswith(GZIP_MAGIC)
        text = (gzip.decompress(raw) if gz else raw).decode("utf-8")
        data, how = mutate_json(rnd, text, kind)
        out.write_bytes(gzip.compress(data, compresslevel=1) if gz else data)
        return out, how
    data, how = mutate_bytes(rnd, raw, kind)
    out.write_bytes(data)
    return out, how


def mutate_bytes(rnd: random.Random, data: bytes, kind: str) -> tuple[bytes, str]:
    """Byte-level mutation ``kind`` of a protobuf (or any binary) file."""
    b = bytearray(data)
    n = len(b)
    at = rnd.randrange(max(n, 1))
    if kind == "flip":
        k = rnd.randint(1, 16)
        for _ in range(k):
            i = rnd.randrange(n)
            b[i] = rnd.randrange(256)
        return bytes(b), f"flip {k} random bytes"
    if kind == "truncate":
        return bytes(b[:at]), f"truncate at {at} of {n}"
    if kind == "splice":
        size = rnd.randint(1, max(1, n // 4))
        src = rnd.randrange(max(1, n - size))
        return bytes(b[:at] + b[src:src + size] + b[at:]), f"splice {size} bytes from {src} at {at}"
    if kind == "zero-run":
        size = rnd.randint(1, 4096)
        b[at:at + size] = bytes(len(b[at:at + size]))
        return bytes(b), f"zero {size} bytes at {at}"
    if kind in ("length-huge", "length-zero"):
        # the byte after a length-delimited key (wire type 2) is a length: make it huge or zero
        keys = [i for i in range(n - 1) if b[i] & 7 == 2 and b[i] >> 3 > 0]
        i = rnd.choice(keys) if keys else at
        repl = b"\xff\xff\xff\xff\x0f" if kind == "length-huge" else b"\x00"
        return bytes(b[:i + 1] + repl + b[i + 2:]), f"{kind} after byte {i}"
    if kind == "varint-run":  # an unterminated varint (eleven continuation bytes)
        return bytes(b[:at] + b"\xff" * 11 + b[at:]), f"11 continuation bytes at {at}"
    if kind == "key-garble":  # wire types 3/4/6/7 (groups, invalid) where a key is read
        b[at] = (b[at] & ~7) | rnd.choice((3, 4, 6, 7))
        return bytes(b), f"wire type garbled at {at}"
    if kind == "append-garbage":
        tail = bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 64)))
        return bytes(b) + tail, f"{len(tail)} random bytes appended"
    if kind == "duplicate-record":  # the whole file twice: packets and planes repeated
        return bytes(b) * 2, "file repeated"
    raise ValueError(kind)


def mutate_any_sqlite(rnd: random.Random, path: Path, kind: str) -> str:
    """Mutate the database at ``path`` in place by ``kind`` (one of SQLITE_MUTATIONS), on a table and
    column drawn from the database's own schema."""
    if kind in ("corrupt-bytes", "truncate-file"):
        data, how = mutate_bytes(rnd, path.read_bytes(), "flip" if kind == "corrupt-bytes" else "truncate")
        path.write_bytes(data)
        return how
    db = sqlite3.connect(path)
    try:
        tables = sorted(r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table' "
                                                 "AND name NOT LIKE 'sqlite_%'"))
        if not tables:
            return "no table to mutate"
        table = rnd.choice(tables)
        cols = [r[1] for r in db.execute(f'PRAGMA table_info("{table}")')]
        col = rnd.choice(cols)
        if kind == "drop-table":
            db.execute(f'DROP TABLE "{table}"')
            what = f"table {table} dropped"
        elif kind == "delete-rows":
            db.execute(f'DELETE FROM "{table}" WHERE rowid % 2 = 0')
            what = f"every other row of {table} deleted"
        elif kind == "duplicate-rows":
            db.execute(f'INSERT INTO "{table}" SELECT * FROM "{table}"')
            what = f"rows of {table} duplicated"
        else:
            value = rnd.choice(SQLITE_VALUES[kind])
            db.execute(f'UPDATE "{table}" SET "{col}" = ? WHERE rowid % 2 = 1', (value,))
            what = f"{table}.{col} set to {value!r} on every other row"
        db.commit()
        return what
    except sqlite3.Error as exc:
        return f"{kind} refused by sqlite ({exc})"
    finally:
        db.close()
