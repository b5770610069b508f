"""Diff two ``traceread scan`` output directories job by job.

A scan output holds ``index.json``, ``jobs/<job>.json`` (the job's name and its member traces by
``trace_id``) and ``traces/<trace_id>.json`` (each trace's ``analyze`` JSON report). Jobs are
matched by their ``job`` name without the ``~N`` suffix a scan adds to keep names unique (it
depends on the rest of the scan); job files with one name are captures of one job and pool their
steps. Each matched job is one :class:`~traceread.diff.compare.Diff` built from those reports (no
trace is read again). Jobs found on one side only are listed.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Any

from traceread.config import Thresholds
from traceread.diff.compare import Diff, compare
from traceread.diff.side import Capture, capture_from_reports, summarize_side
from traceread.errors import UsageError

SCAN_INDEX = "index.json"
# Severity order: the combined verdict of several jobs is the first of these any job has.
_SEVERITY = ("not comparable", "inconclusive", "regressed", "no significant change", "improved")


def is_scan_output(path: str) -> bool:
    return os.path.isfile(os.path.join(path, SCAN_INDEX)) and os.path.isdir(os.path.join(path, "jobs")) \
        and os.path.isdir(os.path.join(path, "traces"))


def _read(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror})") from None
    except ValueError as exc:
        raise UsageError(f"{path}: not valid JSON ({exc})") from None


def _job_stragglers(doc: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    """Stragglers of a job file, wherever the job report put them (``stragglers`` or ``report.stragglers``)."""
    found = doc.get("stragglers")
    if found is None and isinstance(doc.get("report"), dict):
        found = doc["report"].get("stragglers")
    return tuple({k: s.get(k) for k in ("rank", "cause", "reason", "waited_on_ns")} for s in (found or [])
                 if isinstance(s, dict))


_UNIQUE_SUFFIX = re.compile(r"~\d+$")


def job_match_name(name: str) -> str:
    """The job name two scans agree on: without the uniqueness suffix (``train/rank*~3`` -> ``train/rank*``)."""
    return _UNIQUE_SUFFIX.sub("", name)


def scan_jobs(path: str, cfg: Thresholds) -> dict[str, list[Capture]]:
    """The jobs of a scan output by match name, each a list of captures (one per job file)."""
    out: dict[str, list[Capture]] = {}
    jobs_dir = os.path.join(path, "jobs")
    for name in sorted(os.listdir(jobs_dir)):
        if not name.endswith(".json"):
            continue
        doc = _read(os.path.join(jobs_dir, name))
        job = str(doc.get("job") or name[:-5])
        ids = [t["trace_id"] for t in doc.get("traces", []) if isinstance(t, dict) and t.get("trace_id")]
        reports = [_read(os.path.join(path, "traces", f"{i}.json")) for i in ids]
        if reports:
            out.setdefault(job_match_name(job), []).append(capture_from_reports(reports, cfg, _job_stragglers(doc)))
    if not out:
        raise UsageError(f"{path}: a scan output with no job reports")
    return out


@dataclass(frozen=True, eq=False)
class JobDiffs:
    """The diffs of the jobs both scans hold, and the jobs only one holds."""

    diffs: tuple[tuple[str, Diff], ...]
    only_before: tuple[str, ...]
    only_after: tuple[str, ...]

    @property
    def verdict(self) -> str:
        got = {d.verdict for _, d in self.diffs}
        return next((v for v in _SEVERITY if v in got), "not comparable")


def diff_scans(before: str, after: str, job_before: Any, job_after: Any, cfg: Thresholds,
               fix: str | None = None) -> JobDiffs:
    """Diff every job the two scan outputs share (matched by job name); ``fix``: the fix that was made
    (each job's diff checks it against its before side's prediction, :mod:`traceread.diff.whatif`)."""
    from traceread.diff.whatif import attach

    jb, ja = scan_jobs(before, cfg), scan_jobs(after, cfg)
    common = [j for j in jb if j in ja]
    if not common:
        raise UsageError(f"no job name is in both scans ({', '.join(sorted(jb))} before; "
                         f"{', '.join(sorted(ja))} after)")
    diffs = tuple((j, attach(compare(summarize_side("before", jb[j], job_before, cfg),
                                     summarize_side("after", ja[j], job_after, cfg), cfg),
                             jb[j], fix, cfg.diff_fix_tolerance)) for j in common)
    return JobDiffs(diffs=diffs, only_before=tuple(j for j in jb if j not in ja),
                    only_after=tuple(j for j in ja if j not in jb))
