"""A loaded trace: the events frame plus trace-level metadata and side tables.

Loaders return :class:`Trace`; analyses read it and never modify it.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used: see traceread.runner.prefetch
    import pandas as pd

from traceread.note import Note
from traceread.schema import TIME_EPOCH


def shown_path(path: str) -> str:
    """``path`` as reports and tables show it: a name that is not valid UTF-8 (Python holds its bytes as
    surrogates) with those bytes escaped (``\\xff``), every other name unchanged."""
    try:
        path.encode("utf-8")
        return path
    except UnicodeEncodeError:
        pass
    try:
        return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate that stands for no byte
        return path.encode("utf-8", "backslashreplace").decode("utf-8")


def job_digest(job: dict[str, str], attempt: bool = False) -> str:
    """A short stable digest of a job's name and version (and ``attempt``: its attempt index too), ''
    for none: reports tell jobs apart by it, never by the values (environment values never reach a report)."""
    if not job:
        return ""
    keys = ("name", "version", "attempt") if attempt else ("name", "version")
    text = "\x00".join(job.get(k, "") for k in keys) + ("\x00attempt" if attempt else "")
    return hashlib.blake2b(text.encode("utf-8", "surrogateescape"), digest_size=4).hexdigest()


@dataclass(frozen=True)
class DeviceInfo:
    """One GPU/accelerator as the trace describes it."""

    rank: int  # rank of the process that used/listed it
    id: int  # device index as used in the events' ``device`` column
    name: str  # as the trace wrote it ('' when unknown)
    sm_count: int | None = None  # SMs / compute units, when known
    memory_bytes: int | None = None  # global memory, when known
    compute_capability: str | None = None  # "9.0", when known
    used: bool = False  # at least one GPU event ran on it

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "id": self.id,
            "name": self.name,
            "sm_count": self.sm_count,
            "memory_bytes": self.memory_bytes,
            "compute_capability": self.compute_capability,
            "used": self.used,
        }


@dataclass(frozen=True)
class RankInfo:
    """A rank in the trace and where its numbers came from."""

    rank: int
    rank_source: str  # "distributedInfo", "file name", "process order", "default"
    world_size: int | None
    world_size_source: str  # "distributedInfo", "unknown"
    pid: int | None = None  # host process id, when known

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "rank_source": self.rank_source,
            "world_size": self.world_size,
            "world_size_source": self.world_size_source,
            "pid": self.pid,
        }


@dataclass
class TraceMeta:
    """Trace-level facts beside the events frame."""

    path: str
    format: str  # the reader's format name (traceread.loaders.detect): "kineto", "nsys", "perfetto"...
    generation: str  # human-readable format generation, e.g. "kineto 2024+ (float relative ts)"
    time_base: str  # one of schema.TIME_BASES
    epoch_offset_ns: int | None = None  # add to start_ns for Unix epoch ns (time_base == "epoch")
    devices: list[DeviceInfo] = field(default_factory=list)
    ranks: list[RankInfo] = field(default_factory=list)
    profiler_options: dict[str, Any] = field(default_factory=dict)  # record_shapes, with_stack...
    distributed: dict[str, Any] = field(default_factory=dict)  # backend, nccl_version, pg_config (no hosts)
    steps: pd.DataFrame | None = None  # rank, step, name, start_ns, end_ns (host step annotations)
    warnings: list[Note | str] = field(default_factory=list)  # a Note is worded by traceread.render.notes
    truncated: bool = False  # file ended early; events before the cut were kept
    extra: dict[str, Any] = field(default_factory=dict)  # format-specific facts (schema versions...)
    # The profiled job as the file names it (Kineto 2026+: PT_PROFILER_JOB_NAME, _VERSION, _ATTEMPT_INDEX):
    # keys "name", "version", "attempt", each a string; empty when the file names none. Environment
    # values: they group and tell traces apart, and are never shown (see ``job_digest``).
    job: dict[str, str] = field(default_factory=dict)
    # the file's top-level ``trace_id``: a profiler session's id (the captures one session exports share it)
    trace_id: str | None = None

    @property
    def world_size(self) -> int | None:
        sizes = {r.world_size for r in self.ranks if r.world_size}
        return max(sizes) if sizes else None

    @property
    def epoch_offset_if_epoch(self) -> int | None:
        """The offset to Unix-epoch ns, or None when the time base is not the epoch (the JSON contract)."""
        return self.epoch_offset_ns if self.time_base == TIME_EPOCH else None


class EpochWindow:
    """For records with ``start_ns``, ``end_ns`` and ``epoch_offset_ns``: the window in Unix-epoch ns
    (None when the trace's time base is not the epoch)."""

    start_ns: int
    end_ns: int
    epoch_offset_ns: int | None

    @property
    def start_epoch_ns(self) -> int | None:
        return None if self.epoch_offset_ns is None else self.start_ns + self.epoch_offset_ns

    @property
    def end_epoch_ns(self) -> int | None:
        return None if self.epoch_offset_ns is None else self.end_ns + self.epoch_offset_ns


class SideTables(MutableMapping[str, "pd.DataFrame"]):
    """Side tables by name, some of them read on first access.

    A loader can register a table as a callable (``pending``) instead of a frame: the table is
    then read when first asked for (``side[name]``, iteration over items or values) and kept.
    ``name in side``, ``len`` and key order do not read anything. Pickling reads every pending
    table first, so a pickled trace carries all of them.
    """

    def __init__(self, tables: dict[str, pd.DataFrame | None] | None = None,
                 pending: dict[str, Callable[[], pd.DataFrame]] | None = None) -> None:
        # Key order is that of ``tables`` (a None value holds a pending table's place), then of
        # the pending tables it does not name.
        self._tables: dict[str, pd.DataFrame | None] = dict(tables or {})
        self._pending = dict(pending or {})
        # Held while a pending table is read, so that it is read once: the runner puts its lock here when its
        # replay thread and the rules may ask for the table together (traceread.runner.run.share_cache).
        self.reading: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
        for name in self._pending:
            self._tables.setdefault(name, None)
        assert all(t is not None or n in self._pending for n, t in self._tables.items()), "table without reader"

    def __getitem__(self, name: str) -> pd.DataFrame:
        table = self._tables[name]
        if table is None:
            with self.reading:
                table = self._tables[name]
                if table is None:
                    table = self._tables[name] = self._pending.pop(name)()
        return table

    def __setitem__(self, name: str, table: pd.DataFrame) -> None:
        self._pending.pop(name, None)
        self._tables[name] = table

    def __delitem__(self, name: str) -> None:
        self._pending.pop(name, None)
        del self._tables[name]

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._tables))

    def __len__(self) -> int:
        return len(self._tables)

    def __contains__(self, name: object) -> bool:
        return name in self._tables

    def is_read(self, name: str) -> bool:
        """Whether table ``name`` is in memory (False while it is still pending)."""
        return self._tables.get(name) is not None

    def __getstate__(self) -> dict[str, Any]:
        return {"tables": {name: self[name] for name in self}}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._tables, self._pending = dict(state["tables"]), {}
        self.reading = contextlib.nullcontext()

    def __repr__(self) -> str:
        return f"SideTables({', '.join(n + ('' if self.is_read(n) else ' (pending)') for n in self._tables)})"


@dataclass
class Trace:
    """Events frame (schema.EVENT_COLUMNS), metadata, and side tables (schema.SIDE_TABLES).

    ``side`` is a dict, or a :class:`SideTables` whose bulky tables are read on first use.
    """

    events: pd.DataFrame
    meta: TraceMeta
    side: MutableMapping[str, pd.DataFrame] = field(default_factory=dict)
    # The engine's cache (a traceread.engine.lanes.EngineCache: the event view and what is derived from it), set by
    # the runner for an analysis (one shared by its traces) or made on first use; never part of the data.
    cache: Any = field(default=None, init=False, repr=False, compare=False)

    def side_table(self, name: str) -> pd.DataFrame:
        """The side table ``name``, or an empty frame with its columns when the trace has none."""
        import pandas as pd

        from traceread.schema import SIDE_TABLES

        if name in self.side:
            return self.side[name]
        return pd.DataFrame({c: pd.Series(dtype=d) for c, (d, _) in SIDE_TABLES[name].items()})
