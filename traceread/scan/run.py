"""``scan(options) -> ScanResult``: discovery, cache, workers, and every output, in that order.

Per-trace reports are written (atomically) as each result arrives, and the cache records it at
once, so an interrupted scan keeps everything finished. Jobs, the parquet tables, the index and
failures.md need every trace and are written at the end (the index is also refreshed during a
long scan). Nothing under the scanned roots is ever written.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from traceread.atomic import atomic_open
from traceread.errors import UsageError
from traceread.scan.cache import Cache, result_key
from traceread.scan.discover import Candidate, Discovery, discover
from traceread.scan.jobinputs import JobInputsFinder
from traceread.scan.progress import ScanProgress
from traceread.scan.work import Outcome, Settings, Task

INDEX_REFRESH_S = 10.0  # a long scan rewrites index.json/md this often with the traces done so far


@dataclass
class ScanOptions:
    roots: list[str]
    out: str
    settings: Settings = field(default_factory=Settings)
    workers: int = 1
    trace_timeout_s: float = 1800.0
    max_rss: int = 4 << 30
    dask: str | None = None  # tcp://host:port, a scheduler file, or "local"
    jobs: JobInputsFinder | None = None
    allow_out_inside: bool = False
    use_cache: bool = True
    progress: bool = True


@dataclass
class ScanResult:
    index: dict[str, Any]
    jobs: list[dict[str, Any]]  # the job reports as written to jobs/<job>.json
    analysed: int  # traces with a report (fresh or reused)
    reused: int  # of those, taken from the cache without analysing
    failures: list[dict[str, Any]]  # kind "failed" / "not-trace"
    seconds: float


def check_out(roots: list[str], out: str, allow_inside: bool) -> None:
    """Refuse an output directory inside a scanned tree (its reports would be scanned next time)."""
    real_out = os.path.realpath(out)
    for r in roots:
        real = os.path.realpath(r)
        if not os.path.exists(r):
            raise UsageError(f"{r}: no such file or directory")
        if os.path.isdir(real) and (real_out == real or real_out.startswith(real.rstrip(os.sep) + os.sep)) \
                and not allow_inside:
            raise UsageError(f"--out {out} lies inside the scanned tree {r}; choose another directory or pass "
                             "--allow-out-inside (it is then skipped while scanning)")


def scan(opt: ScanOptions) -> ScanResult:
    t0 = time.monotonic()
    check_out(opt.roots, opt.out, opt.allow_out_inside)
    found = discover(opt.roots, exclude=[opt.out])
    os.makedirs(os.path.join(opt.out, "traces"), exist_ok=True)
    os.makedirs(os.path.join(opt.out, "jobs"), exist_ok=True)
    cache = Cache(opt.out, reuse=opt.use_cache)
    finder = opt.jobs or JobInputsFinder()
    settings_key = opt.settings.key()
    done: list[Outcome] = []
    failures = [{"path": p.rel, "problem": p.problem, "kind": p.kind} for p in found.problems]
    tasks, keys = [], {}
    for c in found.candidates:
        try:
            job = finder.for_file(c)
        except UsageError as exc:
            failures.append({"path": c.rel, "problem": str(exc), "kind": "failed"})
            continue
        keys[c.rel] = key = result_key(settings_key, job)
        hit = cache.lookup(c, key)
        if hit is not None:
            _record(cache.load(hit), failures, done)
            continue
        tasks.append(Task(path=c.path, rel=c.rel, kind=c.kind, size=c.size, mtime_ns=c.mtime_ns, inode=c.inode,
                          job=job, reuse=cache.hashes(c, key)))
    by_rel = {c.rel: c for c in found.candidates}
    reused = len(done)
    bar = ScanProgress(total=len(found.candidates), done=len(done) + sum(f["path"] in by_rel for f in failures),
                       failed=sum(f["kind"] == "failed" for f in failures), enabled=opt.progress)
    last_index = time.monotonic()
    try:
        for o in _outcomes(opt, tasks):
            c = by_rel[o.rel]
            if o.status == "reused":  # touched but unchanged: the worker matched the content hash
                o = _refreshed(cache, c, o)
                reused += 1
            elif o.status == "ok":
                _write_trace_files(opt.out, o)
            if _cacheable(o):
                cache.store(c, keys[c.rel], o)
            _record(o, failures, done)
            bar.update(done=1, failed=o.status == "failed")
            if time.monotonic() - last_index > INDEX_REFRESH_S:
                _write_index(opt, found, done, failures, [], {}, time.monotonic() - t0, partial=True)
                last_index = time.monotonic()
    finally:
        bar.close()
    from traceread.scan.jobs import build_jobs, write_jobs

    jobs, job_of, job_md = build_jobs(done, opt.settings, finder)
    write_jobs(opt.out, jobs, job_md)
    counts = _tables(opt.out, cache, [(o.trace_id, job_of.get(o.trace_id, ""), o.row)
                                      for o in sorted(done, key=lambda o: o.trace_id)],
                     sorted(keys[o.rel] for o in done))
    index = _write_index(opt, found, done, failures, jobs, job_of, time.monotonic() - t0, counts=counts)
    cache.compact(set(by_rel))
    cache.close()
    _prune(opt.out, {o.trace_id for o in done}, {j["file"] for j in jobs})
    return ScanResult(index=index, jobs=jobs, analysed=len(done), reused=reused, failures=failures,
                      seconds=time.monotonic() - t0)


def _tables(out: str, cache: Cache, traces: list[tuple[str, str, dict[str, Any]]],
            result_keys: list[str]) -> dict[str, int]:
    """The parquet tables, rebuilt only when the set of reports or their jobs changed since the last
    scan (a re-scan of an unchanged tree then reads no report)."""
    from traceread.scan.tables import write_tables

    doc = [[(t, j) for t, j, _ in traces], result_keys]  # ids carry the content; keys the settings
    key = hashlib.blake2b(json.dumps(doc).encode(), digest_size=16).hexdigest()
    stamp = os.path.join(cache.dir, "tables.json")
    names = [os.path.join(out, f"{n}.parquet") for n in ("gaps", "steps", "traces")]
    with contextlib.suppress(OSError, ValueError, KeyError):
        with open(stamp, encoding="utf-8") as fh:
            old = json.load(fh)
        if old["key"] == key and all(os.path.exists(n) for n in names):
            return old["counts"]
    counts = write_tables(out, traces)
    with atomic_open(stamp, "w") as fh:
        json.dump({"key": key, "counts": counts}, fh)
    return counts


def _outcomes(opt: ScanOptions, tasks: list[Task]) -> Iterator[Outcome]:
    if not tasks:
        return iter(())
    if opt.dask:
        from traceread.scan.dask_run import run_on_dask

        return run_on_dask(opt.dask, tasks, opt.settings, workers=opt.workers, max_rss=opt.max_rss)
    from traceread.scan.pool import WorkerPool

    return WorkerPool(opt.workers, opt.settings, opt.trace_timeout_s, opt.max_rss).run(tasks)


def _cacheable(o: Outcome) -> bool:
    """Results that would come out the same next time: not time/memory kills, not a file in flux."""
    return o.status in ("ok", "not-trace") or (o.status == "failed" and bool(o.content_hash)
                                               and not o.problem.startswith("changed while being read"))


def _refreshed(cache: Cache, c: Candidate, o: Outcome) -> Outcome:
    e = cache.entries[c.rel]
    return cache.load(e)


def _record(o: Outcome, failures: list[dict[str, Any]], done: list[Outcome]) -> None:
    if o.status in ("ok", "reused"):
        done.append(o)
    else:
        failures.append({"path": o.rel, "problem": o.problem, "kind": "not-trace" if o.status == "not-trace"
                         else "failed"})


def _write_trace_files(out: str, o: Outcome) -> None:
    assert o.md is not None and o.json is not None
    base = os.path.join(out, "traces", o.trace_id)
    with atomic_open(base + ".json", "wb") as fh:
        fh.write(o.json)
    with atomic_open(base + ".md", "wb") as fh:
        fh.write(o.md)
    o.md = o.json = None  # written: the parent keeps only the small row


def _write_index(opt: ScanOptions, found: Discovery, done: list[Outcome], failures: list[dict[str, Any]],
                 jobs: list[dict[str, Any]], job_of: dict[str, str], seconds: float, partial: bool = False,
                 counts: dict[str, int] | None = None) -> dict[str, Any]:
    from traceread.scan.index import failures_markdown, index_doc, index_markdown
    from traceread.scan.jobs import job_row, trace_index_row

    traces = [trace_index_row(o, job_of.get(o.trace_id, "")) for o in done]
    doc = index_doc(jobs=[job_row(j) for j in jobs], traces=traces, failures=sorted(failures, key=lambda f: f["path"]),
                    scan={"roots": [os.path.basename(os.path.abspath(r).rstrip(os.sep)) or r for r in opt.roots],
                          "complete": not partial, "files_found": len(found.candidates),
                          "traces_ok": len(done), "skipped": dict(found.skipped), "seconds": round(seconds, 3),
                          "settings_key": opt.settings.key(), "tables": counts or {}})
    from traceread.cli.output import dumps

    with atomic_open(os.path.join(opt.out, "index.json"), "wb") as fh:
        fh.write(dumps(doc) + b"\n")
    with atomic_open(os.path.join(opt.out, "index.md"), "w") as fh:
        fh.write(index_markdown(doc))
    with atomic_open(os.path.join(opt.out, "failures.md"), "w") as fh:
        fh.write(failures_markdown(doc))
    return doc


def _prune(out: str, trace_ids: set[str], job_files: set[str]) -> None:
    """Remove reports of files no longer in the tree (or of their older contents)."""
    for sub, keep in (("traces", trace_ids), ("jobs", job_files)):
        d = os.path.join(out, sub)
        for name in os.listdir(d):
            stem = name.rsplit(".", 1)[0]
            if name.endswith((".md", ".json")) and stem not in keep:
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(d, name))
