"""The scan's result cache: re-scanning an unchanged tree reuses every result without reading it.

Kept in ``OUTDIR/.traceread-cache/``: ``log.jsonl`` gets one line per finished file as it
completes (so an interrupted scan continues where it stopped; the last line for a path wins) and is
compacted at the end; ``<trace id>.row.msgpack`` holds that file's index row, ``<trace id>.ranks.msgpack``
its rank identities and summaries (read only when its directory's jobs are rebuilt) and
``<trace id>.rows.msgpack`` its gap and step rows (read only when the parquet tables are rebuilt).
``jobs.msgpack`` keeps each directory's job documents with the key they were built for (its traces'
versions and result keys, their job input files), so an unchanged directory's jobs are not
rebuilt. An entry is reused when the file's path, size, mtime and inode and the
result key (traceread's code, thresholds and config, the file's job inputs) are unchanged; when only
the stat facts changed, the worker hashes the content and reuses the entry if the hash matches.
Timeouts, memory kills, files that changed while being read and failures of the environment (the
output folder full or not writable) are never cached: they are retried.

The parts are data, never code (:mod:`traceread.scan.cachecodec`: MessagePack and Arrow IPC, checked
as they are read): a part that is damaged, cut or planted is a miss and its file is analysed again.
Pickles of older versions are never read, only removed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import zlib
from typing import IO, Any

from traceread.atomic import atomic_open
from traceread.scan import cachecodec
from traceread.scan.blobs import BLOBS, DIRNAME, SUFFIX, blob_path, write_blob
from traceread.scan.cachecodec import SAFE_STEM, Damaged
from traceread.scan.discover import Candidate
from traceread.scan.work import Outcome

LOG = "log.jsonl"
JOBS = "jobs.msgpack"
FORMAT = 4  # bump when the entry layout changes: older caches are ignored (4: no more pickles)
_STATUSES = ("ok", "not-trace", "failed")


def _map_header(n: int) -> bytes:
    """The MessagePack header of a map of ``n`` entries."""
    if n < 16:
        return bytes([0x80 | n])
    return b"\xde" + n.to_bytes(2, "big") if n < 1 << 16 else b"\xdf" + n.to_bytes(4, "big")


def result_key(settings_key: str, job: dict[str, Any] | None) -> str:
    doc = json.dumps({"settings": settings_key, "job": job, "format": FORMAT}, sort_keys=True, default=str)
    return hashlib.blake2b(doc.encode(), digest_size=12).hexdigest()


def _valid_entry(e: Any) -> bool:
    """A log line of this format with every field of its type (a planted or damaged line is skipped)."""
    if not isinstance(e, dict) or e.get("format") != FORMAT:
        return False
    types = {"rel": str, "size": int, "mtime_ns": int, "inode": int, "key": str, "hash": str, "trace_id": str,
             "status": str, "problem": str}
    if not all(isinstance(e.get(k), t) and not isinstance(e.get(k), bool) for k, t in types.items()):
        return False
    return e["status"] in _STATUSES and (e["status"] != "ok" or SAFE_STEM.fullmatch(e["trace_id"]) is not None)


class Cache:
    def __init__(self, outdir: str, reuse: bool = True) -> None:
        """``reuse=False`` (``--no-cache``): analyse everything again, but still record the results."""
        self.dir = os.path.join(outdir, DIRNAME)
        self.entries: dict[str, dict[str, Any]] = {}  # rel -> last entry
        self.reuse = reuse
        # directory -> (key, job docs, trace id -> job), read lazily; or, stored by this run, that encoded and compressed
        self.jobs: dict[str, tuple | bytes] | None = None
        self.jobs_changed = False
        self._rows: dict[str, dict[str, Any]] = {}  # rel -> its index row, read and checked by _complete
        os.makedirs(self.dir, exist_ok=True)
        if reuse:
            self._read()
        else:  # start a new log: earlier entries must not come back on the next run
            open(os.path.join(self.dir, LOG), "w").close()
        self._log: IO[str] | None = open(os.path.join(self.dir, LOG), "a", encoding="utf-8")  # noqa: SIM115

    def _read(self) -> None:
        try:
            with open(os.path.join(self.dir, LOG), encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    try:
                        e = json.loads(line)
                    except ValueError:  # a line cut by an interrupted write
                        continue
                    if _valid_entry(e):
                        self.entries[e["rel"]] = e
        except FileNotFoundError:
            pass

    def lookup(self, c: Candidate, key: str) -> dict[str, Any] | None:
        """The entry to reuse without reading the file, or None."""
        e = self.entries.get(c.rel)
        if e and e["key"] == key and (e["size"], e["mtime_ns"], e["inode"]) == (c.size, c.mtime_ns, c.inode) \
                and self._complete(e):
            return e
        return None

    def hashes(self, c: Candidate, key: str) -> tuple[str, ...]:
        """Content hashes a worker may match to reuse the entry of a touched file."""
        e = self.entries.get(c.rel)
        return (e["hash"],) if e and e["key"] == key and e.get("hash") and self._complete(e) else ()

    def _complete(self, e: dict[str, Any]) -> bool:
        """Every part of an ok entry is on disk, and its index row reads back (kept for :meth:`load`)."""
        if e["status"] != "ok":
            return True
        base = os.path.dirname(self.dir)
        if not all(os.path.exists(p) for p in [self.blob_path(e["trace_id"], part) for part in BLOBS]
                   + [os.path.join(base, "traces", e["trace_id"] + x) for x in (".json", ".md")]):
            return False
        if e["rel"] not in self._rows:
            try:
                self._rows[e["rel"]] = cachecodec.decode_row(self._read_blob(e["trace_id"], "row"))
            except Damaged:
                return False
        return True

    def blob_path(self, trace_id: str, part: str = "row") -> str:
        return blob_path(os.path.dirname(self.dir), trace_id, part)

    def _read_blob(self, trace_id: str, part: str) -> bytes:
        try:
            with open(self.blob_path(trace_id, part), "rb") as fh:
                return fh.read()
        except OSError as exc:
            raise Damaged(f"{part}: {exc.strerror or exc}") from None

    def _write_blob(self, trace_id: str, part: str, value: Any) -> None:
        write_blob(os.path.dirname(self.dir), trace_id, part, value)

    def table_rows(self, trace_id: str) -> dict[str, Any]:
        """The gap and step rows of a stored trace (``tables.report_tables``); :class:`Damaged` when they
        do not read back (the caller has the file analysed again)."""
        return cachecodec.decode_tables(self._read_blob(trace_id, "rows"))

    def load(self, e: dict[str, Any]) -> Outcome:
        """The cached outcome of entry ``e`` with its index row; report bytes stay on disk, and the rank
        identities and summaries are read only if its directory's jobs are rebuilt (:meth:`load_ranks`)."""
        out = Outcome(rel=e["rel"], path="", status=e["status"], problem=e.get("problem", ""),
                      content_hash=e.get("hash", ""), trace_id=e.get("trace_id", ""), identities=None, summaries=None)
        if e["status"] == "ok":  # read and checked by lookup / hashes (_complete)
            out.row = self._rows.pop(e["rel"]) if e["rel"] in self._rows else \
                cachecodec.decode_row(self._read_blob(e["trace_id"], "row"))
        return out

    def load_ranks(self, o: Outcome) -> None:
        """The rank identities and summaries of a cached outcome; :class:`Damaged` when they do not read back."""
        if o.identities is None or o.summaries is None:
            o.identities, o.summaries = cachecodec.decode_ranks(self._read_blob(o.trace_id, "ranks"))

    def store(self, c: Candidate, key: str, o: Outcome) -> None:
        """Record a finished result (its report files are already written). Its table rows, when it
        brings them, are written to disk and dropped from the outcome (read back by :meth:`table_rows`);
        an outcome whose worker wrote its parts (``written``) brings neither those nor its ranks."""
        if o.status == "ok":
            self._write_blob(o.trace_id, "row", o.row)
            if o.identities is not None and o.summaries is not None:
                self._write_blob(o.trace_id, "ranks", (o.identities, o.summaries))
            if o.tables is not None:
                self._write_blob(o.trace_id, "rows", o.tables)
                o.tables = None
        e = {"format": FORMAT, "rel": c.rel, "size": c.size, "mtime_ns": c.mtime_ns, "inode": c.inode, "key": key,
             "hash": o.content_hash, "trace_id": o.trace_id, "status": o.status, "problem": o.problem}
        self.entries[c.rel] = e
        assert self._log is not None
        self._log.write(json.dumps(e) + "\n")
        self._log.flush()

    def job_docs(self, directory: str, key: str) -> tuple[list[dict[str, Any]], dict[str, str]] | None:
        """The job documents and trace -> job map of ``directory`` from the last scan, if built for
        ``key`` (its traces' versions, result keys and job input files) and still on disk."""
        e = self._jobs().get(directory)
        if not isinstance(e, tuple) or e[0] != key:  # None, or stored (encoded) by this run
            return None
        jobs_dir = os.path.join(os.path.dirname(self.dir), "jobs")
        if not all(os.path.exists(os.path.join(jobs_dir, j["file"] + x)) for j in e[1] for x in (".json", ".md")):
            return None
        return e[1], e[2]

    def store_job_docs(self, directory: str, key: str, docs: list[dict[str, Any]], job_of: dict[str, str]) -> None:
        """Kept encoded and compressed until :meth:`compact` writes them: a job report is far larger as
        Python objects, and a big scan's parent would hold every one of them."""
        packed = zlib.compress(cachecodec.encode((key, docs, job_of)), 1)
        self._jobs()[directory] = packed
        self.jobs_changed = True

    def _jobs(self) -> dict[str, tuple | bytes]:
        if self.jobs is None:
            self.jobs = {}
            if self.reuse:
                with contextlib.suppress(OSError, Damaged):
                    with open(os.path.join(self.dir, JOBS), "rb") as fh:
                        self.jobs = dict(cachecodec.decode_jobs(fh.read(), FORMAT))
        return self.jobs

    def compact(self, keep: set[str]) -> None:
        """Rewrite the log with one entry per path still in the tree; drop blobs nobody uses."""
        assert self._log is not None
        self._log.close()
        self.entries = {r: e for r, e in self.entries.items() if r in keep}
        with atomic_open(os.path.join(self.dir, LOG), "w") as fh:
            for e in self.entries.values():
                fh.write(json.dumps(e) + "\n")
        used = {f"{e['trace_id']}.{part}{SUFFIX}" for e in self.entries.values() if e["status"] == "ok" for part in BLOBS}
        used.add(JOBS)
        dirs = {os.path.dirname(r) for r in keep}
        if self.jobs is not None and (self.jobs_changed or set(self.jobs) - dirs):
            # {"format": FORMAT, "dirs": {directory: entry}} written entry by entry (an entry stored by this
            # run is unpacked only as it is written): never the whole document in memory at once
            kept = [d for d in self.jobs if d in dirs]
            with atomic_open(os.path.join(self.dir, JOBS), "wb") as fh:
                fh.write(_map_header(2) + cachecodec.encode("format") + cachecodec.encode(FORMAT)
                         + cachecodec.encode("dirs") + _map_header(len(kept)))
                for d in kept:
                    entry = self.jobs[d]
                    fh.write(cachecodec.encode(d) + (zlib.decompress(entry) if isinstance(entry, bytes)
                                                     else cachecodec.encode(entry)))
            self.jobs_changed = False
        for name in os.listdir(self.dir):
            if name.endswith((SUFFIX, ".pkl")) and name not in used:  # .pkl: an older version's, never read
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(self.dir, name))
        self._log = open(os.path.join(self.dir, LOG), "a", encoding="utf-8")  # noqa: SIM115

    def close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None
