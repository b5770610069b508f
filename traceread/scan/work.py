"""One trace file -> its report files and small summaries: the function every scan worker runs.

The same :func:`run_task` runs in the local worker processes and on Dask workers, so the two give
equal results. What it returns is small and picklable: the per-trace report files as bytes, one
index row of plain numbers, and the ``traceread.ranks`` identities and summaries the parent groups
into jobs. Frames never leave the worker.
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import re
import time
from dataclasses import dataclass, field
from typing import Any

from traceread.config import Thresholds

HASH_CHARS = 8  # of the content hash in a trace id: enough to tell versions of one path apart
SAFE_CHARS = 112  # of the path in a trace id or a job file name: with the suffixes, well under NAME_MAX (255)
_READ = 1 << 20
# an OSError with one of these is this machine's state (space, quota, memory, open files), not the file's
_ENVIRONMENT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.ENOMEM, errno.EMFILE, errno.ENFILE})


@dataclass(frozen=True)
class Settings:
    """Everything besides the file that changes a result (part of the cache key)."""

    cfg: Thresholds = Thresholds()  # noqa: RUF009 - frozen
    kernel_patterns: tuple[tuple[str, tuple[str, ...]], ...] = ()
    top_gaps: int = 10
    warmup_steps: int | None = None
    step_range: str | None = None
    rank_pattern: str | None = None

    def key(self) -> str:
        """A digest of the settings and of the installed traceread code (its version and sources)."""
        doc = {"cfg": self.cfg.to_dict(), "patterns": self.kernel_patterns, "top_gaps": self.top_gaps,
               "warmup": self.warmup_steps, "step_range": self.step_range, "rank_pattern": self.rank_pattern,
               "code": code_digest()}
        return hashlib.blake2b(json.dumps(doc, sort_keys=True, default=str).encode(), digest_size=12).hexdigest()


@dataclass(frozen=True)
class Task:
    """One file to analyse. ``reuse``: content hashes whose finished result the parent already has
    for this path and key (the file was touched but may be unchanged)."""

    path: str
    rel: str
    kind: str
    size: int
    mtime_ns: int
    inode: int
    job: dict[str, Any] | None = None  # Workload fields (MFU inputs) for this file, or None
    reuse: tuple[str, ...] = ()


@dataclass
class Outcome:
    """What came back for one task. ``status``: ok, reused, failed or not-trace."""

    rel: str
    path: str
    status: str
    problem: str = ""
    content_hash: str = ""
    trace_id: str = ""
    md: bytes | None = None
    json: bytes | None = None
    row: dict[str, Any] = field(default_factory=dict)  # the trace's index facts (see trace_row)
    tables: dict[str, Any] | None = None  # its gap and step rows (tables.report_tables: Arrow buffers)
    # traceread.ranks.RankIdentity / RankSummary; None: in the cache, not read (Cache.load_ranks)
    identities: list[Any] | None = field(default_factory=list)
    summaries: list[Any] | None = field(default_factory=list)
    seconds: float = 0.0
    written: bool = False  # report files and cache parts already on disk (run_task's outdir)
    environment: bool = False  # failed for the environment (disk full, output not writable): never cached


_code_digest: str | None = None
_registered: tuple | None = None


def code_digest() -> str:
    """traceread's version plus the size and mtime of its sources: an edited checkout is a new version."""
    global _code_digest
    if _code_digest is None:
        from traceread import __version__

        base = os.path.dirname(os.path.dirname(__file__))  # the traceread package
        h = hashlib.blake2b(__version__.encode(), digest_size=8)
        for d, dirs, files in os.walk(base):
            dirs.sort()
            for f in sorted(files):
                if f.endswith((".py", ".json", ".toml", ".so")):
                    st = os.stat(os.path.join(d, f))
                    h.update(f"{os.path.relpath(os.path.join(d, f), base)}:{st.st_size}:{st.st_mtime_ns};".encode())
        _code_digest = h.hexdigest()
    return _code_digest


def content_hash(path: str) -> str:
    h = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as fh:
        while chunk := fh.read(_READ):
            h.update(chunk)
    return h.hexdigest()


def trace_id(rel: str, digest: str) -> str:
    """``<relative path made safe>-<short content hash>``: stable, readable, one per file version.

    Where making the path safe loses something (``run 1/``, ``run_1/`` and ``run&1/`` are all
    ``run_1``; ``a__b/c`` and ``a/b__c`` are both ``a__b__c``; a long path is shortened), a short
    hash of the exact path follows it: distinct files never share an id, even with equal contents."""
    flat = rel.replace(os.sep, "__").replace("/", "__")
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", flat).strip("._") or "trace"
    if safe != flat or "__" in rel or len(safe) > SAFE_CHARS:
        if len(safe) > SAFE_CHARS:  # keep file names well under NAME_MAX with the suffixes
            safe = safe[:SAFE_CHARS // 2] + "~" + safe[-(SAFE_CHARS // 2 - 1):]
        safe += "~" + hashlib.blake2b(rel.encode("utf-8", "surrogateescape"), digest_size=3).hexdigest()
    return f"{safe}-{digest[:HASH_CHARS]}"


def _register_patterns(patterns: tuple) -> None:
    """User kernel patterns from --config, once per process (Dask workers start without them)."""
    global _registered
    if _registered == patterns:
        return
    from traceread import kernel_classes

    kernel_classes.clear_user_patterns()
    kernel_classes.register_patterns_from_config({cls: list(rx) for cls, rx in patterns}, "--config")
    _registered = patterns


# Test hook: seconds a worker's start-up sleeps (a slow start-up, e.g. a cold import on a cluster
# node), to show that start-up does not count against --trace-timeout.
SLOW_START_ENV = "TRACEREAD_TEST_WORKER_START_S"
_warm = False


def warm_up() -> None:
    """A worker's start-up, done once per process before its first file: import what every task
    imports. Not part of any file's time (``--trace-timeout`` counts analysis only)."""
    global _warm
    if _warm:
        return
    import traceread.analysis
    import traceread.loaders
    import traceread.metrics.workload
    import traceread.ranks
    import traceread.render.jsonout
    import traceread.render.markdown
    import traceread.scan.blobs
    import traceread.scan.rows
    import traceread.scan.tables  # noqa: F401

    delay = os.environ.get(SLOW_START_ENV)
    if delay:
        time.sleep(float(delay))
    _warm = True


def run_task(task: Task, settings: Settings, outdir: str | None = None) -> Outcome:
    """Analyse one file; never raises for a bad file (the problem is the outcome).

    ``outdir`` (the local pool, which shares the scan's filesystem): the worker writes the trace's
    report files and its cache parts (table rows, rank identities and summaries) there itself, and
    the outcome comes back without them (``written``): a trace's JSON report and table rows can be
    several times the trace's size, and would otherwise be pickled, piped, unpickled and written again by the
    parent. Without it (Dask) the bytes travel in the outcome."""
    from traceread.errors import OutputError, UserFacingError

    t0 = time.monotonic()
    out = Outcome(rel=task.rel, path=task.path, status="failed")
    try:
        _analyse(task, settings, out, outdir)
        if out.status == "ok" and outdir is not None:
            _write_parts(outdir, out)
    except OutputError as exc:  # the output folder, not the file
        out.status, out.problem, out.environment = "failed", str(exc), True
    except UserFacingError as exc:
        out.status = "not-trace" if _not_a_trace(str(getattr(exc, "problem", exc))) else "failed"
        out.problem = str(getattr(exc, "problem", exc))
    except MemoryError:
        out.problem = "out of memory while analysing"
    except OSError as exc:
        out.problem = f"cannot read ({exc.strerror or exc})"
        out.environment = exc.errno in _ENVIRONMENT_ERRNOS
    except Exception as exc:  # noqa: BLE001 - one bad file never stops the scan
        first = str(exc).splitlines()[0] if str(exc) else ""
        out.problem = f"internal error: {type(exc).__name__}: {first}"[:300]
    if out.status != "ok":
        out.md = out.json = out.tables = None
        out.written = False
    out.seconds = time.monotonic() - t0
    return out


def write_report_files(outdir: str, o: Outcome) -> None:
    """``traces/<id>.json`` and ``.md`` of an ok outcome, atomically; the outcome keeps only its row."""
    from traceread.atomic import atomic_open
    from traceread.scan.owner import record

    assert o.md is not None and o.json is not None
    record(outdir, [f"traces/{o.trace_id}.json", f"traces/{o.trace_id}.md"])  # before: never an unrecorded file
    base = os.path.join(outdir, "traces", o.trace_id)
    with atomic_open(base + ".json", "wb") as fh:
        fh.write(o.json)
    with atomic_open(base + ".md", "wb") as fh:
        fh.write(o.md)
    o.md = o.json = None


def _write_parts(outdir: str, o: Outcome) -> None:
    """Worker side of ``outdir``: the cache parts the parent would write (the report files are written)."""
    from traceread.scan.blobs import write_blob

    write_blob(outdir, o.trace_id, "rows", o.tables)
    write_blob(outdir, o.trace_id, "ranks", (o.identities, o.summaries))
    o.tables = o.identities = o.summaries = None  # on disk: the parent reads them when it needs them
    o.written = True


def _not_a_trace(problem: str) -> bool:
    return problem.startswith(("not a trace", "not a Kineto trace", "SQLite file is not an Nsight"))


def _analyse(task: Task, settings: Settings, out: Outcome, outdir: str | None = None) -> None:
    from traceread.metrics.workload import Workload
    from traceread.render import jsonout, markdown
    from traceread.runner import analyze, load
    from traceread.scan.rows import trace_row
    from traceread.scan.tables import gap_numbers, gap_texts, report_tables

    _register_patterns(settings.kernel_patterns)
    from traceread.loaders import check_extent

    check_extent(task.path)  # a sparse file is refused before its holes are read and hashed
    out.content_hash = content_hash(task.path)
    out.trace_id = trace_id(task.rel, out.content_hash)
    if out.content_hash in task.reuse:
        out.status = "reused"
        return
    trace = load(task.path, step_range=settings.step_range, decoders=1)
    st = os.stat(task.path)
    if (st.st_size, st.st_mtime_ns) != (task.size, task.mtime_ns):
        out.problem = (f"changed while being read ({task.size:,} -> {st.st_size:,} bytes): still being "
                       "written? it is scanned again next time")
        return
    if trace.meta.truncated:  # a damaged file of a known format: a failure (--strict), not a report
        from traceread.render.notes import text as note_text

        cut = next((w for w in map(note_text, trace.meta.warnings) if "ends" in w), "it ends early")
        out.problem = f"truncated (a damaged file): {cut}; `traceread analyze` reads the events before the cut"
        return
    trace.meta.path = task.rel  # reports name the file as the user sees it under the scan root
    workload = Workload(**task.job) if task.job else None
    analysis = analyze([trace], workload=workload, cfg=settings.cfg, top_gaps=settings.top_gaps,
                       warmup_steps=settings.warmup_steps, step_range=settings.step_range)
    text = io.StringIO()
    markdown.render(analysis, text)
    out.md = text.getvalue().encode("utf-8")
    out.row = trace_row(analysis, trace)
    out.identities, out.summaries = _rank_facts(trace, analysis, task.rel, settings)
    # ranks as the trace claims them (metadata, nsys process, file name), never the loader's default 0
    claimed = {i.frame_rank: i.rank for i in out.identities}
    out.row["rank_of_frame"] = {str(k): v for k, v in claimed.items()}
    if out.identities:
        out.row["ranks"] = sorted({r for r in claimed.values() if r is not None})
        worlds = [i.world_size for i in out.identities if i.world_size]
        out.row["world_size"] = max(worlds) if worlds else None
    if not out.row["gpus"]:  # devices without names in the file: the rank identities' GPU model
        out.row["gpus"] = sorted({i.gpu_model for i in out.identities if i.gpu_model})
    # The report's gap table is written column-wise (no dict per gap) and the parquet rows come from
    # the same columns; the frames go before the rows are made, and the bytes (with outdir) go to disk
    # before them: a trace's JSON and rows can be several times its size.
    report = jsonout.to_report(analysis, tables=False)
    report["steps"] = jsonout.step_records(analysis)  # one row per step: few
    numbers = gap_numbers(analysis.gaps)
    texts = gap_texts(analysis.gaps, analysis.cfg)  # the evidence sentences: not in the report's table
    if numbers is None:  # a column not of the table's kind: the rows from the report's values
        report["gaps"] = jsonout.gap_records(analysis)
    out.json = jsonout.dumps(analysis)
    del trace, analysis
    if outdir is not None:
        write_report_files(outdir, out)
    out.tables = report_tables(report, out.row, out.trace_id, numbers, texts)
    del report, numbers, texts
    out.status = "ok"


def _rank_facts(trace: Any, analysis: Any, rel: str, settings: Settings) -> tuple[list, list]:
    """The trace's rank identities and per-rank summaries (small, picklable) for grouping and alignment."""
    from traceread import ranks
    from traceread.analysis import rank_summary

    identities = list(ranks.identify(trace, rel, rank_pattern=settings.rank_pattern))
    summaries = [rank_summary(analysis, ident) for ident in identities]
    return identities, summaries
