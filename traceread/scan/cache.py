"""The scan's result cache: re-scanning an unchanged tree reuses every result without reading it.

Kept in ``OUTDIR/.traceread-cache/``: ``log.jsonl`` gets one line per finished file as it
completes (so an interrupted scan continues where it stopped; the last line for a path wins) and is
compacted at the end; ``<trace id>.pkl`` holds that file's small results (index row, rank
identities and summaries) and ``<trace id>.rows.pkl`` its gap and step rows for the parquet tables
(read only when the tables are rebuilt). An entry is reused when the file's path, size, mtime and inode and the
result key (traceread's code, thresholds and config, the file's job inputs) are unchanged; when only
the stat facts changed, the worker hashes the content and reuses the entry if the hash matches.
Timeouts, memory kills and files that changed while being read are never cached: they are retried.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pickle
from typing import Any

from traceread.atomic import atomic_open
from traceread.scan.discover import Candidate
from traceread.scan.work import Outcome

DIRNAME = ".traceread-cache"
LOG = "log.jsonl"
FORMAT = 2  # bump when the entry layout changes: older caches are ignored


def result_key(settings_key: str, job: dict[str, Any] | None) -> str:
    doc = json.dumps({"settings": settings_key, "job": job, "format": FORMAT}, sort_keys=True, default=str)
    return hashlib.blake2b(doc.encode(), digest_size=12).hexdigest()


class Cache:
    def __init__(self, outdir: str, reuse: bool = True) -> None:
        """``reuse=False`` (``--no-cache``): analyse everything again, but still record the results."""
        self.dir = os.path.join(outdir, DIRNAME)
        self.entries: dict[str, dict[str, Any]] = {}  # rel -> last entry
        os.makedirs(self.dir, exist_ok=True)
        if reuse:
            self._read()
        else:  # start a new log: earlier entries must not come back on the next run
            open(os.path.join(self.dir, LOG), "w").close()
        self._log = open(os.path.join(self.dir, LOG), "a", encoding="utf-8")  # noqa: SIM115

    def _read(self) -> None:
        try:
            with open(os.path.join(self.dir, LOG), encoding="utf-8") as fh:
                for line in fh:
                    try:
                        e = json.loads(line)
                    except ValueError:  # a line cut by an interrupted write
                        continue
                    if isinstance(e, dict) and e.get("format") == FORMAT and "rel" in e:
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
        if e["status"] != "ok":
            return True
        base = os.path.dirname(self.dir)
        return all(os.path.exists(p) for p in (self.blob_path(e["trace_id"]), self.rows_path(e["trace_id"]),
                                                os.path.join(base, "traces", e["trace_id"] + ".json"),
                                                os.path.join(base, "traces", e["trace_id"] + ".md")))

    def blob_path(self, trace_id: str) -> str:
        return os.path.join(self.dir, trace_id + ".pkl")

    def rows_path(self, trace_id: str) -> str:
        return os.path.join(self.dir, trace_id + ".rows.pkl")

    def table_rows(self, trace_id: str) -> dict[str, dict[str, list]]:
        """The gap and step columns of a stored trace (``tables.report_columns``)."""
        with open(self.rows_path(trace_id), "rb") as fh:
            return pickle.load(fh)

    def load(self, e: dict[str, Any]) -> Outcome:
        """The cached outcome of entry ``e`` (report bytes stay on disk)."""
        out = Outcome(rel=e["rel"], path="", status=e["status"], problem=e.get("problem", ""),
                      content_hash=e.get("hash", ""), trace_id=e.get("trace_id", ""))
        if e["status"] == "ok":
            with open(self.blob_path(e["trace_id"]), "rb") as fh:
                out.row, out.identities, out.summaries = pickle.load(fh)
        return out

    def store(self, c: Candidate, key: str, o: Outcome) -> None:
        """Record a finished result (its report files are already written). Its table rows, when it
        brings them, are written to disk and dropped from the outcome (read back by :meth:`table_rows`)."""
        if o.status == "ok":
            with atomic_open(self.blob_path(o.trace_id), "wb") as fh:
                pickle.dump((o.row, o.identities, o.summaries), fh, protocol=pickle.HIGHEST_PROTOCOL)
            if o.tables is not None:
                with atomic_open(self.rows_path(o.trace_id), "wb") as fh:
                    pickle.dump(o.tables, fh, protocol=pickle.HIGHEST_PROTOCOL)
                o.tables = None
        e = {"format": FORMAT, "rel": c.rel, "size": c.size, "mtime_ns": c.mtime_ns, "inode": c.inode, "key": key,
             "hash": o.content_hash, "trace_id": o.trace_id, "status": o.status, "problem": o.problem}
        self.entries[c.rel] = e
        assert self._log is not None
        self._log.write(json.dumps(e) + "\n")
        self._log.flush()

    def compact(self, keep: set[str]) -> None:
        """Rewrite the log with one entry per path still in the tree; drop blobs nobody uses."""
        assert self._log is not None
        self._log.close()
        self.entries = {r: e for r, e in self.entries.items() if r in keep}
        with atomic_open(os.path.join(self.dir, LOG), "w") as fh:
            for e in self.entries.values():
                fh.write(json.dumps(e) + "\n")
        used = {e["trace_id"] + x for e in self.entries.values() if e["status"] == "ok" for x in (".pkl", ".rows.pkl")}
        for name in os.listdir(self.dir):
            if name.endswith(".pkl") and name not in used:
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(self.dir, name))
        self._log = open(os.path.join(self.dir, LOG), "a", encoding="utf-8")  # noqa: SIM115

    def close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None
