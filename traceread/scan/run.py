"""``scan(options) -> ScanResult``: discovery, cache, workers, and every output, in that order.

Per-trace reports are written (atomically) as each result arrives, and the cache records it at
once, so an interrupted scan keeps everything finished. Jobs, the table rows, the index and
failures.md follow as they become final (:mod:`traceread.scan.outputs`). Nothing under the scanned
roots is ever written.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from traceread.errors import OutputError, UsageError
from traceread.scan.cache import DIRNAME, Cache, result_key
from traceread.scan.discover import Candidate, discover
from traceread.scan.jobinputs import JobInputsFinder
from traceread.scan.outputs import ScanOutputs, stamped_counts, tables_key
from traceread.scan.owner import OutLock, check_out, record, start_manifest
from traceread.scan.owner import prune as prune_recorded
from traceread.scan.progress import ScanProgress
from traceread.scan.tables import remove_stale_tables
from traceread.scan.work import Outcome, Settings, Task, write_report_files


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
    jobs: list[dict[str, Any]]  # each job's index.json row (jobs/<file>.json holds its whole report)
    analysed: int  # traces with a report (fresh or reused)
    reused: int  # of those, taken from the cache without analysing
    failures: list[dict[str, Any]]  # kind "failed" / "not-trace"
    seconds: float


def scan(opt: ScanOptions) -> ScanResult:
    """Scan; an OSError here is the output folder's (workers read the inputs, their problems are outcomes;
    discovery lists unreadable ones): one line, exit 2 (read-only, not writable, a file, disk full)."""
    try:
        return _scan(opt)
    except BrokenPipeError:
        raise
    except OSError as exc:
        where = os.fsdecode(exc.filename) if isinstance(exc.filename, (str, bytes)) else opt.out
        raise OutputError(where, exc.strerror or str(exc)) from None


def _scan(opt: ScanOptions) -> ScanResult:
    check_out(opt.roots, opt.out, opt.allow_out_inside)
    os.makedirs(opt.out, exist_ok=True)
    lock = OutLock(opt.out)  # one scan at a time into a folder: a second is refused, never interleaved
    try:
        return _locked_scan(opt)
    finally:
        lock.release()


def _locked_scan(opt: ScanOptions) -> ScanResult:
    t0, started = time.monotonic(), time.time()
    found = discover(opt.roots, exclude=[opt.out])
    start_manifest(opt.out)  # from here on the folder is a scan's; only what the manifest names is pruned
    os.makedirs(os.path.join(opt.out, "traces"), exist_ok=True)
    os.makedirs(os.path.join(opt.out, "jobs"), exist_ok=True)
    remove_stale_tables(opt.out)  # of a scan killed while writing them
    cache = Cache(opt.out, reuse=opt.use_cache)
    finder = opt.jobs or JobInputsFinder()
    settings_key = opt.settings.key()
    failures = [{"path": p.rel, "problem": p.problem, "kind": p.kind} for p in found.problems]
    tasks, keys, known = [], {}, []
    for c in found.candidates:
        try:
            job = finder.for_file(c)
        except UsageError as exc:
            known.append(Outcome(rel=c.rel, path=c.path, status="failed", problem=str(exc)))
            continue
        keys[c.rel] = key = result_key(settings_key, job)
        hit = cache.lookup(c, key)
        if hit is not None:
            known.append(cache.load(hit))
            continue
        tasks.append(Task(path=c.path, rel=c.rel, kind=c.kind, size=c.size, mtime_ns=c.mtime_ns, inode=c.inode,
                          job=job, reuse=cache.hashes(c, key)))
    by_rel = {c.rel: c for c in found.candidates}
    tasks.sort(key=lambda t: -t.size)  # largest first: no big file left for the end while other workers idle
    # nothing to analyse and the same traces as the last scan: its parquet tables stand as they are
    unchanged = not tasks and stamped_counts(opt.out, cache, tables_key(
        [o for o in known if o.status == "ok"], keys)) is not None
    outputs = ScanOutputs(out=opt.out, roots=opt.roots, found=found, settings=opt.settings, cache=cache,
                          finder=finder, failures=failures, pending_rels=list(by_rel), keys=keys, write_tables=not unchanged,
                          t0=t0, reanalyse=lambda o: _reanalyse(opt, cache, finder, by_rel[o.rel], keys[o.rel]))
    reused = sum(o.status == "ok" for o in known)
    bar = ScanProgress(total=len(found.candidates), done=len(known), failed=sum(o.status == "failed" for o in known),
                       enabled=opt.progress)
    # reports of earlier scans reused: recorded too (a folder an older version wrote has no manifest yet)
    record(opt.out, [f"traces/{o.trace_id}{x}" for o in known if o.status == "ok" for x in (".json", ".md")])
    outcomes = _outcomes(opt, tasks)
    try:
        for o in known:
            outputs.add(o)
        for o in outcomes:
            c = by_rel[o.rel]
            if o.status == "reused":  # touched but unchanged: the worker matched the content hash
                o = cache.load(cache.entries[c.rel])
                reused += 1
            elif o.status == "ok" and not o.written:
                write_report_files(opt.out, o)
            if _cacheable(o):
                cache.store(c, keys[c.rel], o)
            o.tables = None
            outputs.add(o)
            bar.update(done=1, failed=o.status == "failed")
        index, _ = outputs.finish()
    except BaseException:
        outputs.abort()
        raise
    finally:
        close = getattr(outcomes, "close", None)
        if close is not None:  # the workers stopped and waited for here, whatever ended the loop
            close()
        bar.close()
    cache.compact(set(by_rel))
    cache.close()
    _prune(opt.out, {o.trace_id for o in outputs.done.values()}, {j["file"] for j in outputs.jobs}, started)
    return ScanResult(index=index, jobs=outputs.jobs, analysed=len(outputs.done), reused=reused,
                      failures=outputs.failures, seconds=time.monotonic() - t0)


def _outcomes(opt: ScanOptions, tasks: list[Task]) -> Iterator[Outcome]:
    if not tasks:
        return iter(())
    if opt.dask:
        from traceread.scan.dask_run import run_on_dask

        return run_on_dask(opt.dask, tasks, opt.settings, workers=opt.workers, max_rss=opt.max_rss,
                           trace_timeout_s=opt.trace_timeout_s)
    from traceread.scan.pool import WorkerPool

    return WorkerPool(opt.workers, opt.settings, opt.trace_timeout_s, opt.max_rss, outdir=opt.out).run(tasks)


def _reanalyse(opt: ScanOptions, cache: Cache, finder: JobInputsFinder, c: Candidate, key: str) -> Outcome:
    """A file whose cached parts did not read back (damaged, cut or planted), analysed again by one local
    worker (its time and memory limits hold) and recorded in the cache again."""
    from traceread.scan.pool import WorkerPool

    task = Task(path=c.path, rel=c.rel, kind=c.kind, size=c.size, mtime_ns=c.mtime_ns, inode=c.inode,
                job=finder.for_file(c))
    (o,) = WorkerPool(1, opt.settings, opt.trace_timeout_s, opt.max_rss, outdir=opt.out).run([task])
    if o.status == "ok" and not o.written:
        write_report_files(opt.out, o)
    if _cacheable(o):
        cache.store(c, key, o)
    o.tables = None
    return o


def _cacheable(o: Outcome) -> bool:
    """Results that would come out the same next time: not time/memory kills, not a file in flux, not a
    failure of the environment (the output folder full or not writable: once space is freed, the file
    is analysed again without --no-cache)."""
    return not o.environment and (o.status in ("ok", "not-trace") or (
        o.status == "failed" and bool(o.content_hash) and not o.problem.startswith("changed while being read")))


def _prune(out: str, trace_ids: set[str], job_files: set[str], started: float) -> None:
    """Remove the reports and job files this folder's scans wrote (its manifest names them) that are no
    longer current (files gone from the tree, older contents), and the temporaries of writes that never
    finished (a worker killed while writing: :func:`~traceread.atomic.prune_stale`). Nothing else in
    ``out`` is ever removed: a file no scan recorded stays, whatever its name."""
    from traceread.atomic import prune_stale

    keep = {f"traces/{t}{x}" for t in trace_ids for x in (".json", ".md")} | \
        {f"jobs/{j}{x}" for j in job_files for x in (".json", ".md")}
    prune_recorded(out, keep)
    for sub in ("", "traces", "jobs", DIRNAME):
        prune_stale(os.path.join(out, sub), started)
