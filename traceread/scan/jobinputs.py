"""Which MFU job inputs apply to each scanned file.

``--job FILE`` on the command line applies to every file and wins over files in the tree; without
it, the ``traceread-job.toml`` nearest above the file (its directory first, up to the scan root)
applies. MFU flags given on the command line (``--params`` ...) override either, as in ``analyze``.
"""

from __future__ import annotations

import os
from typing import Any

from traceread.errors import UsageError
from traceread.metrics.workload import make_workload, read_workload_file
from traceread.scan.discover import Candidate

JOB_FILE = "traceread-job.toml"


class JobInputsFinder:
    def __init__(self, cli_file: str | None = None, cli_values: dict[str, Any] | None = None) -> None:
        self.cli_file_values = read_workload_file(cli_file) if cli_file else None
        self.cli_file = cli_file
        self.cli_values = cli_values or {}
        self._files: dict[str, dict[str, Any] | None] = {}  # job-file path -> values (None: absent)
        self.sources: dict[str, str | None] = {}  # rel -> the job file that applied

    def _tree_file(self, c: Candidate) -> tuple[str | None, dict[str, Any]]:
        root = _root_dir(c)
        d = os.path.dirname(c.path)
        while True:
            p = os.path.join(d, JOB_FILE)
            if p not in self._files:
                self._files[p] = read_workload_file(p) if os.path.isfile(p) else None
            if self._files[p] is not None:
                return p, self._files[p]  # type: ignore[return-value]
            if d == root or not d.startswith(root) or os.path.dirname(d) == d:
                return None, {}
            d = os.path.dirname(d)

    def for_file(self, c: Candidate) -> dict[str, Any] | None:
        """The Workload fields for ``c`` (None when no input applies); UsageError on a bad job file."""
        if self.cli_file_values is not None:
            src, values = self.cli_file, self.cli_file_values
        else:
            src, values = self._tree_file(c)
            if src is not None:
                src = os.path.relpath(src, _root_dir(c))
        try:
            workload = make_workload(values, self.cli_values)
        except UsageError as exc:  # name the job file: its values together are out of range
            raise UsageError(f"{src}: {exc}" if src and not str(exc).startswith(src) else str(exc)) from None
        self.sources[c.rel] = src
        return workload.to_dict() if workload is not None else None


def _root_dir(c: Candidate) -> str:
    return c.root if os.path.isdir(c.root) else os.path.dirname(c.root)
