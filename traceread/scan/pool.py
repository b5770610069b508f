"""Long-lived local worker processes with a per-trace time limit and a per-worker memory limit.

``N`` processes are started once and each analyses file after file (no interpreter per file). The
parent only hands out tasks and collects :class:`~traceread.scan.work.Outcome` objects; it watches
each busy worker's wall time (from the moment the worker begins the file, which it reports: its
start-up and the files waiting in its pipe do not count) and
resident memory, and a worker past ``--trace-timeout`` or
``--max-rss`` (or one that dies: the kernel's OOM killer, a crash) is killed and replaced, its file
listed as a failure, and the scan goes on.
"""

from __future__ import annotations

import collections
import contextlib
import multiprocessing
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import cast

from traceread.scan.work import Outcome, Settings, Task, run_task, warm_up

POLL_S = 0.1  # how often busy workers' clocks and memory are checked
# files in flight per worker: the one it analyses and the next, already in its pipe, so that it
# never waits while this process writes jobs and the index (small files come last: largest first)
IN_FLIGHT = 2
READY = "ready"  # what a worker sends once its start-up is done
BEGIN = "begin"  # (BEGIN, its monotonic clock): a worker starts a file; that file's clock starts then
START_LIMIT_S = 300.0  # a worker not ready after this long is stuck (its file fails, a new worker starts)
# a busy worker told to stop (SIGTERM: the scan ends early, or was itself terminated) gets this long to
# remove its temporaries and exit before it is killed
STOP_WAIT_S = 5.0


def _serve(conn: Connection, settings: Settings, inherited: tuple[Connection, ...] = (),
           outdir: str | None = None) -> None:
    """A worker's loop: a task in, an outcome out, until the parent sends None or goes away."""
    from traceread.atomic import termination_raises
    from traceread.runner.heap import trim

    for c in inherited:  # forked copies of the parent's pipe ends: with them open, a killed parent would
        c.close()  # never give this worker EOF (it would wait, or block sending, forever)
    try:
        # SIGTERM/SIGHUP (from the scan stopping it, or sent to the whole process group): raised, so the
        # report being written leaves no temporary, and the worker exits
        with termination_raises():
            warm_up()  # start-up, not any file's time
            conn.send(READY)
            while True:
                task = conn.recv()
                if task is None:
                    return
                conn.send((BEGIN, time.monotonic()))  # CLOCK_MONOTONIC: one clock for every process
                outcome = run_task(task, settings, outdir)
                trim()  # the freed frames of this file go back to the OS, not into the next file's peak
                conn.send(outcome)
    except (EOFError, OSError, KeyboardInterrupt):  # KeyboardInterrupt: SIGINT, and Terminated
        return


def _preimport() -> None:
    """Import what every task imports before forking: each worker then shares the parent's copy of
    the modules instead of importing them again after the fork (the CLI imports lazily)."""
    import traceread.analysis
    import traceread.loaders
    import traceread.ranks
    import traceread.render.jsonout
    import traceread.render.markdown
    import traceread.scan.rows
    import traceread.scan.tables  # noqa: F401


def rss_bytes(pid: int) -> int | None:
    """Resident set size of ``pid`` (Linux /proc), None where it cannot be read."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def default_max_rss(workers: int) -> int:
    """A share of the machine's memory per worker: 80% of it split among the workers (min 512 MiB)."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        total = 8 << 30
    return max(512 << 20, int(0.8 * total / max(workers, 1)))


@dataclass
class _Worker:
    proc: multiprocessing.process.BaseProcess
    conn: Connection
    tasks: collections.deque = field(default_factory=collections.deque)  # sent, oldest (being analysed) first
    started: float | None = None  # when the worker began tasks[0] (its BEGIN); None: not yet
    peak_rss: int = 0
    ready: bool = False  # start-up done: only then does a file's clock run
    born: float = field(default_factory=time.monotonic)

    @property
    def task(self) -> Task | None:
        return self.tasks[0] if self.tasks else None


class WorkerPool:
    """``run(tasks)`` yields one Outcome per task, in completion order."""

    def __init__(self, workers: int, settings: Settings, trace_timeout_s: float, max_rss: int,
                 outdir: str | None = None) -> None:
        """``outdir``: the scan's output directory, where workers write each trace's report files and
        cache parts themselves (see :func:`~traceread.scan.work.run_task`); None: they travel back."""
        self.n = max(1, workers)
        self.outdir = outdir
        self.settings = settings
        self.timeout = trace_timeout_s
        self.max_rss = max_rss
        methods = multiprocessing.get_all_start_methods()
        # fork: a worker starts in milliseconds with traceread already imported (and the user's
        # kernel patterns registered); spawn where fork does not exist
        self.ctx = multiprocessing.get_context("fork") if "fork" in methods else multiprocessing.get_context("spawn")
        if self.ctx.get_start_method() == "fork":
            _preimport()
        self.workers: list[_Worker] = []
        self.replaced = 0

    def _start(self) -> _Worker:
        parent, child = self.ctx.Pipe(duplex=True)
        inherited = (parent, *(w.conn for w in self.workers)) if self.ctx.get_start_method() == "fork" else ()
        proc = self.ctx.Process(target=_serve, args=(child, self.settings, inherited, self.outdir),
                                name="traceread-scan-worker", daemon=True)
        proc.start()
        child.close()
        return _Worker(proc, parent)

    def _kill(self, w: _Worker) -> None:
        if w.proc.is_alive():
            w.proc.kill()
        w.proc.join(5)
        w.conn.close()

    def run(self, tasks: Iterable[Task]) -> Iterator[Outcome]:
        queue = collections.deque(tasks)
        self.workers = [self._start() for _ in range(min(self.n, len(queue)))]
        try:
            while queue or any(w.tasks for w in self.workers):
                self._fill(queue)
                busy = {w.conn: w for w in self.workers if w.tasks}
                for conn in cast("list[Connection]", wait(list(busy), timeout=POLL_S)):  # of those given
                    w = busy[conn]
                    try:
                        outcome = conn.recv()
                    except (EOFError, OSError):
                        yield self._replace(w, self._death(w), queue)
                        continue
                    if outcome == READY:  # start-up done
                        w.ready = True
                        continue
                    if isinstance(outcome, tuple) and outcome[0] == BEGIN:  # tasks[0]'s analysis begins
                        w.started = float(outcome[1])
                        continue
                    w.tasks.popleft()
                    w.started, w.peak_rss = None, 0  # its next file starts with its BEGIN
                    self._fill(queue)  # before this result is written: the worker never waits
                    yield outcome
                yield from self._police(queue)
        finally:
            self.close()

    def _fill(self, queue: collections.deque) -> None:
        """Send files until every worker has ``IN_FLIGHT``: level by level, so that an idle worker
        gets the next file before a busy one gets its second."""
        for depth in range(1, IN_FLIGHT + 1):
            for w in self.workers:
                if queue and len(w.tasks) < depth:
                    if not w.tasks:
                        w.started, w.peak_rss = None, 0
                    w.tasks.append(queue.popleft())
                    w.conn.send(w.tasks[-1])

    def _police(self, queue: collections.deque) -> Iterator[Outcome]:
        now = time.monotonic()
        for w in list(self.workers):
            if not w.tasks:
                continue
            if w.started is None:  # starting up or between files: not a file's time
                if not w.ready and now - w.born > START_LIMIT_S:  # stuck starting up
                    yield self._replace(w, f"its worker did not start within {START_LIMIT_S:g} s; replaced", queue)
                elif not w.proc.is_alive():
                    yield self._replace(w, self._death(w), queue)
                continue
            if now - w.started > self.timeout:
                yield self._replace(w, f"took longer than --trace-timeout {self.timeout:g} s; its worker was "
                                       "stopped and replaced", queue)
                continue
            rss = rss_bytes(w.proc.pid) if w.proc.pid else None
            if rss is not None:
                w.peak_rss = max(w.peak_rss, rss)
                if rss > self.max_rss:
                    yield self._replace(w, f"its worker used {rss / 2**20:,.0f} MiB, over --max-rss "
                                           f"{self.max_rss / 2**20:,.0f} MiB; stopped and replaced", queue)
                    continue
            if not w.proc.is_alive():
                yield self._replace(w, self._death(w), queue)

    def _death(self, w: _Worker) -> str:
        w.proc.join(1)
        code = w.proc.exitcode
        how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        hint = " (out of memory?)" if code == -9 else ""
        return f"its worker died while analysing it ({how}{hint}); replaced"

    def _replace(self, w: _Worker, problem: str, queue: collections.deque) -> Outcome:
        """Fail the file ``w`` was analysing, give back the ones waiting in its pipe, start a new worker."""
        task = w.tasks.popleft()
        queue.extendleft(reversed(w.tasks))  # not started: the next worker takes them first
        w.tasks.clear()
        self._kill(w)
        self.replaced += 1
        self.workers[self.workers.index(w)] = self._start()
        return Outcome(rel=task.rel, path=task.path, status="failed", problem=problem)

    def close(self) -> None:
        """Stop every worker and wait for it: an idle one is told to finish, a busy one (the scan ends
        early: an error, SIGINT, SIGTERM) gets SIGTERM and ``STOP_WAIT_S`` to clean up; none outlives
        this (a worker left running would go on writing into the output folder, unlimited)."""
        for w in self.workers:
            if not w.proc.is_alive():
                continue
            with contextlib.suppress(OSError, ValueError):
                if w.tasks:
                    w.proc.terminate()
                else:
                    w.conn.send(None)
        deadline = time.monotonic() + STOP_WAIT_S
        for w in self.workers:
            w.proc.join(max(0.0, deadline - time.monotonic()))
            self._kill(w)
        self.workers = []
