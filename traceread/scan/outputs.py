"""Every output of a scan except the per-trace reports, written as the results arrive.

* ``jobs/<job>.md/.json``: every grouping key of :mod:`traceread.ranks` holds the file's directory,
  so once every candidate file of a directory has an outcome (analysed, reused, failed, not a
  trace) that directory's jobs are final: they are built and written then, and the directory's
  table rows are appended (:class:`~traceread.scan.tables.TableWriter`).
* ``index.json``/``index.md``/``failures.md``: rewritten at most every :data:`INDEX_REFRESH_S`
  while results arrive, and less often on a big scan (at most :data:`INDEX_SHARE` of its time)
  (``scan.complete`` false, traces of unfinished directories without a job), and once more at the end.
* The parquet tables are renamed into place at the end (a parquet file cannot be read
  half-written); when the set of analysed traces and their result keys is the one the last scan
  wrote, nothing is rebuilt (a re-scan of an unchanged tree then reads no rows at all).

After a directory's jobs are built and its table rows written, each of its traces is kept as an
:class:`IndexRow` (its index row encoded, a few hundred bytes, and its sort key) and each job as its
index row: the parent's memory grows by the index rows, not by per-trace objects (outcomes, row
dicts, job reports), and the index files are written row by row from them, never as one document
of every trace. The parent holds the rank identities and summaries of unfinished directories only,
and never a frame. A directory
whose traces (versions, result keys, job input files) are those of the last scan keeps its job
files as they are (the cache has their documents): a re-scan of an unchanged tree builds no job.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from traceread.atomic import atomic_open
from traceread.scan.cache import Cache
from traceread.scan.cachecodec import Damaged
from traceread.scan.discover import Discovery
from traceread.scan.jobinputs import JobInputsFinder
from traceread.scan.work import Outcome, Settings
from traceread.trace import shown_path

INDEX_REFRESH_S = 1.0  # index.json/md and failures.md are rewritten at most this often during a scan (0: always)
# ... and at most this share of the scan's time: a rewrite is O(all rows so far), so at a fixed period a
# big scan's rewrites would grow quadratically (each rewrite longer, as often)
INDEX_SHARE = 0.01
TABLE_NAMES = ("gaps", "steps", "traces")
_EMPTY_TRACES = b'\n  "traces": []'  # where dumps puts the (empty) traces of the index document


def tables_key(done: list[Outcome] | list[Any], keys: dict[str, str]) -> str:
    """What the parquet tables depend on: the analysed trace versions (ids carry the content hash)
    and their result keys (settings, code, job inputs). Job names follow from these (grouping is
    per directory and deterministic)."""
    doc = sorted((o.trace_id, keys[o.rel]) for o in done)
    return hashlib.blake2b(json.dumps(doc).encode(), digest_size=16).hexdigest()


def stamped_counts(out: str, cache: Cache, key: str) -> dict[str, int] | None:
    """The row counts of the tables in ``out`` if the last scan wrote them for ``key``, else None."""
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        with open(os.path.join(cache.dir, "tables.json"), encoding="utf-8") as fh:
            old = json.load(fh)
        if old["key"] == key and all(os.path.exists(os.path.join(out, f"{n}.parquet")) for n in TABLE_NAMES):
            return old["counts"]
    return None


@dataclass(frozen=True)
class IndexRow:
    """A finished trace as the parent keeps it (see the module doc)."""

    rel: str
    trace_id: str
    order: tuple  # index.worst_first's key
    data: bytes  # its index.json row (jobs.trace_index_row), MessagePack

    status = "ok"

    def row(self) -> dict[str, Any]:
        from traceread.scan.cachecodec import decode

        return decode(self.data, dict[str, Any])


def _index_row(o: Outcome | IndexRow, job: str) -> dict[str, Any]:
    from traceread.scan.index import dominant_lost_ns
    from traceread.scan.jobs import trace_index_row

    r = o.row() if isinstance(o, IndexRow) else trace_index_row(o, job)
    r["dominant_lost_ns"] = dominant_lost_ns(r)
    return r


def _order(r: dict[str, Any]) -> tuple:
    return (-r["dominant_lost_ns"], -sum(r["lost_ns"].values()), r["trace_id"])


class ScanOutputs:
    """Collects outcomes (``add``) and writes jobs, tables and the index as they become final."""

    def __init__(self, *, out: str, roots: list[str], found: Discovery, settings: Settings, cache: Cache,
                 finder: JobInputsFinder, failures: list[dict[str, Any]], pending_rels: list[str],
                 keys: dict[str, str], write_tables: bool, t0: float,
                 reanalyse: Callable[[Outcome], Outcome] | None = None) -> None:
        """``reanalyse``: analyses the file of a cached outcome again, when its cached parts (rank
        identities and summaries, table rows) do not read back: a damaged or planted cache is a miss."""
        self.reanalyse = reanalyse
        self.out, self.roots, self.found, self.settings, self.keys = out, roots, found, settings, keys
        self.cache, self.finder, self.t0 = cache, finder, t0
        self.failures = failures
        self.done: dict[str, Outcome | IndexRow] = {}  # rel -> analysed trace (an IndexRow once final)
        self.jobs: list[dict[str, Any]] = []  # each job's index row (jobs.job_row); jobs/<file>.json: the report
        self.job_of: dict[str, str] = {}
        self.pending = Counter(os.path.dirname(r) for r in pending_rels)
        self.waiting: dict[str, list[Outcome]] = {}  # directory -> its analysed traces, until it is final
        self.finished_dirs: list[str] = []  # in the order their jobs were written (tests watch this)
        self.last_index = time.monotonic()
        self.index_cost = 0.0  # seconds the last index rewrite took
        self.tables = None
        if write_tables:
            from traceread.scan.tables import TableWriter

            self.tables = TableWriter(out)

    def add(self, o: Outcome) -> None:
        """One candidate's final outcome (ok, reused, failed, not-trace)."""
        d = os.path.dirname(o.rel)
        if o.status in ("ok", "reused"):
            self.done[o.rel] = o
            self.waiting.setdefault(d, []).append(o)
        else:
            self.failures.append({"path": o.rel, "problem": o.problem,
                                  "kind": "not-trace" if o.status == "not-trace" else "failed"})
        self.pending[d] -= 1
        if self.pending[d] <= 0:
            del self.pending[d]
            self._finish_directory(d)
        if time.monotonic() - self.last_index >= self._index_wait():
            self.write_index(partial=True)

    def _index_wait(self) -> float:
        return max(INDEX_REFRESH_S, self.index_cost / INDEX_SHARE) if INDEX_REFRESH_S > 0 else 0.0

    def _finish_directory(self, d: str) -> None:
        members = sorted(self.waiting.pop(d, []), key=lambda o: o.trace_id)
        if members:
            key = hashlib.blake2b(json.dumps([(o.trace_id, self.keys[o.rel], self.finder.sources.get(o.rel))
                                              for o in members]).encode(), digest_size=16).hexdigest()
            cached = self.cache.job_docs(d, key)
            if cached is not None:  # the same traces as last time: their jobs are on disk as they were
                jobs, job_of = cached
            else:
                from traceread.scan.jobs import build_directory_jobs, write_jobs

                members = [m for m in (self._readable(o, self.cache.load_ranks)[0] for o in members) if m]
                jobs, job_of, md = build_directory_jobs(members, self.settings, self.finder)
                write_jobs(self.out, jobs, md)
                self.cache.store_job_docs(d, key, jobs, job_of)
            from traceread.scan.jobs import job_row

            self.jobs += [job_row(j) for j in jobs]
            self.job_of.update(job_of)
            if self.tables is not None:
                for o in members:
                    r, rows = self._readable(o, lambda o: self.cache.table_rows(o.trace_id))
                    if r is not None and r.trace_id in job_of:
                        self.tables.add(r.trace_id, job_of[r.trace_id], r.row, rows)
            from traceread.scan.cachecodec import encode

            for m in members:  # grouped and written: only the index row is needed from here on
                now = self.done.get(m.rel)  # the outcome now (analysed again if its parts were damaged), if any
                if isinstance(now, Outcome):
                    row = _index_row(now, self.job_of.get(now.trace_id, ""))
                    self.done[now.rel] = IndexRow(rel=now.rel, trace_id=now.trace_id, order=_order(row),
                                                  data=encode(row))
        self.finished_dirs.append(d)

    def _readable(self, o: Outcome, read: Callable[[Outcome], Any]) -> tuple[Outcome | None, Any]:
        """``o`` and ``read(o)`` (its cached parts); when they are damaged, the outcome of its file analysed
        again and its parts (None when that failed: it is listed as a failure instead)."""
        try:
            return o, read(o)
        except Damaged:
            if self.reanalyse is None:
                raise
        new = self.reanalyse(o)
        if new.status != "ok":
            del self.done[o.rel]
            self.failures.append({"path": new.rel, "problem": new.problem,
                                  "kind": "not-trace" if new.status == "not-trace" else "failed"})
            return None, None
        self.done[o.rel] = new
        return new, read(new)

    def write_index(self, partial: bool, counts: dict[str, int] | None = None) -> dict[str, Any]:
        """index.json, index.md and failures.md, the traces written row by row (worst first); returns the
        index document without its traces (they are in the file)."""
        t0 = time.monotonic()
        from traceread.render.json_text import dumps
        from traceread.scan.index import failures_markdown, index_doc, index_markdown

        scan = {"roots": [shown_path(os.path.basename(os.path.abspath(r).rstrip(os.sep)) or r) for r in self.roots],
                "complete": not partial, "files_found": len(self.found.candidates), "traces_ok": len(self.done),
                "skipped": dict(self.found.skipped), "seconds": round(time.monotonic() - self.t0, 3),
                "settings_key": self.settings.key(), "tables": counts or {}}
        doc = index_doc(jobs=[dict(j) for j in self.jobs], traces=[],
                        failures=sorted(self.failures, key=lambda f: f["path"]), scan=scan)
        waiting = {o.rel: _index_row(o, self.job_of.get(o.trace_id, "")) for o in self.done.values()
                   if not isinstance(o, IndexRow)}
        order = sorted(self.done.values(), key=lambda o: o.order if isinstance(o, IndexRow) else _order(waiting[o.rel]))

        def rows() -> Iterator[dict[str, Any]]:  # one decoded row at a time
            for o in order:
                yield waiting[o.rel] if o.rel in waiting else _index_row(o, "")

        head, tail = dumps(doc).split(_EMPTY_TRACES, 1)
        with atomic_open(os.path.join(self.out, "index.json"), "wb") as fh:
            fh.write(head + _EMPTY_TRACES[:-1])
            for i, r in enumerate(rows()):  # as dumps indents it inside the document
                fh.write((b",\n    " if i else b"\n    ") + dumps(r).replace(b"\n", b"\n    "))
            fh.write((b"\n  ]" if order else b"]") + tail + b"\n")
        with atomic_open(os.path.join(self.out, "index.md"), "w") as fh:
            fh.write(index_markdown(doc, rows()))
        with atomic_open(os.path.join(self.out, "failures.md"), "w") as fh:
            fh.write(failures_markdown(doc))
        self.last_index = time.monotonic()
        self.index_cost = self.last_index - t0
        return doc

    def finish(self) -> tuple[dict[str, Any], dict[str, int]]:
        """After the last outcome: the tables into place (or the unchanged ones kept), the final index."""
        for d in list(self.pending):  # cannot happen unless an outcome went missing: never lose the rest
            del self.pending[d]
            self._finish_directory(d)
        key = tables_key(list(self.done.values()), self.keys)
        if self.tables is not None:
            counts = self.tables.commit()
            self.tables = None
            with atomic_open(os.path.join(self.cache.dir, "tables.json"), "w") as fh:
                json.dump({"key": key, "counts": counts}, fh)
        else:
            counts = stamped_counts(self.out, self.cache, key) or {}
        self.jobs.sort(key=lambda j: j["job"])
        return self.write_index(partial=False, counts=counts), counts

    def abort(self) -> None:
        if self.tables is not None:
            self.tables.abort()
            self.tables = None
