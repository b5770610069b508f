"""The same scan on a Dask distributed cluster: ``--dask tcp://HOST:PORT | scheduler.json | local``.

Each file is one task running :func:`traceread.scan.work.run_task` on a worker, which reads the
trace from the path it was given (a shared filesystem on a real cluster), so only the task, the
small outcome and the per-trace report bytes cross the network: never a frame. ``local`` starts a
``LocalCluster`` of ``--workers`` single-threaded processes with ``--max-rss`` as each worker's
memory limit (Dask's nanny restarts a worker past it; the file is then listed as a failure).
On a cluster the workers' memory limits are the cluster's own settings. ``--trace-timeout`` is
enforced from the client on any cluster (see :func:`run_on_dask`); stopping a late task needs
workers started with a nanny (the default of ``dask worker`` and of LocalCluster).
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Iterator

from traceread.errors import UsageError
from traceread.scan.work import Outcome, Settings, Task, run_task, warm_up

START_LIMIT_S = 300.0  # a task still starting up (imports) after this long is stuck: it fails
_ANALYSING: dict[str, float] = {}  # on a worker: key -> when its analysis began (after the start-up)
# distributed raises asyncio's TimeoutError, which is the builtin one only from Python 3.11 on.
_TIMEOUTS = (TimeoutError, asyncio.TimeoutError)


def _client(address: str, workers: int, max_rss: int):  # noqa: ANN202 - distributed is optional
    import logging
    import warnings

    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise UsageError("--dask needs the distributed package: pip install 'traceread[dask]'") from None
    # distributed logs and warns on standard error (ports, worker restarts, the event loop): the
    # scan says what matters in its own lines
    for name in ("distributed", "tornado", "bokeh"):
        logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", module=r"distributed(\..*)?$")
    if address == "local":
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, memory_limit=max_rss,
                               dashboard_address=None)
        return Client(cluster), cluster
    try:
        if address.endswith(".json") or os.path.isfile(address):
            return Client(scheduler_file=address, timeout="30s"), None
        return Client(address, timeout="30s"), None
    except (OSError, *_TIMEOUTS, ValueError) as exc:
        raise UsageError(f"--dask {address}: cannot reach the scheduler ({exc})") from None


def _executing(dask_worker) -> dict[str, float | None]:  # noqa: ANN001 - runs on a worker (Client.run passes it)
    """Keys the worker is computing right now (not those merely queued on it), each with the seconds
    its analysis has run (None: still starting up, which is not the file's time)."""
    now = time.monotonic()
    return {str(ts.key): (now - _ANALYSING[str(ts.key)]) if str(ts.key) in _ANALYSING else None
            for ts in dask_worker.state.executing}


def run_timed(task: Task, key: str, settings: Settings) -> Outcome:
    """``run_task`` on a Dask worker, its analysis clock started after the worker's start-up."""
    warm_up()
    _ANALYSING[key] = time.monotonic()
    try:
        return run_task(task, settings)
    finally:
        _ANALYSING.pop(key, None)


def _poll_s(timeout_s: float) -> float:
    """How often the client asks the workers what they run: a twentieth of the limit, 0.05-1 s."""
    return min(1.0, max(0.05, timeout_s / 20))


def run_on_dask(address: str, tasks: list[Task], settings: Settings, workers: int, max_rss: int,
                trace_timeout_s: float = 1800.0) -> Iterator[Outcome]:
    """Outcomes in completion order. ``trace_timeout_s`` is enforced from the client: it asks the
    workers which tasks they are executing and for how long each one's analysis has run (``Client.run``;
    a worker's start-up, such as its first imports, is not counted), and past the limit cancels the task and restarts its worker (``Client.restart_workers``, through
    the worker's nanny; Dask reschedules the tasks queued there), listing the file as failed."""
    from distributed import wait

    client, cluster = _client(address, workers, max_rss)
    try:
        run = uuid.uuid4().hex[:8]  # keys unique per scan: two scans may share a cluster
        keys = [f"traceread-{run}-{i}" for i in range(len(tasks))]
        futures = client.map(run_timed, tasks, keys, settings=settings, pure=False, key=keys)
        by_key = {f.key: (f, t) for f, t in zip(futures, tasks, strict=True)}
        pending = set(futures)
        started: dict[str, float] = {}
        poll = _poll_s(trace_timeout_s)
        while pending:
            try:
                done = wait(list(pending), timeout=poll, return_when="FIRST_COMPLETED").done
            except _TIMEOUTS:
                done = set()
            for fut in done:
                pending.discard(fut)
                yield _late(_outcome(fut, by_key[fut.key][1]), trace_timeout_s)
                fut.release()
            if pending:
                yield from _police(client, by_key, pending, started, trace_timeout_s)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _late(o: Outcome, timeout_s: float) -> Outcome:
    """A file whose analysis ran past the limit is a failure even when it finished before the client
    could stop it: a worker busy in compiled code answers the client's question late, and the local
    pool, which watches its workers without asking them, would have stopped it."""
    if o.status != "ok" or o.seconds <= timeout_s:
        return o
    return Outcome(rel=o.rel, path=o.path, status="failed",
                   problem=f"took longer than --trace-timeout {timeout_s:g} s (its analysis finished after "
                           f"{o.seconds:.1f} s, before it could be stopped)")


def _outcome(fut, task: Task) -> Outcome:  # noqa: ANN001
    try:
        return fut.result()
    except Exception as exc:  # noqa: BLE001 - a killed worker (memory) fails this file only
        first = (str(exc).splitlines() or [""])[0]
        return Outcome(rel=task.rel, path=task.path, status="failed",
                       problem=f"Dask task failed: {type(exc).__name__}: {first}"[:300])


def _police(client, by_key: dict, pending: set, started: dict[str, float], timeout_s: float  # noqa: ANN001
            ) -> Iterator[Outcome]:
    """Fail, cancel and stop the tasks that have been executing longer than ``timeout_s``."""
    try:
        running = client.run(_executing, on_error="ignore")
    except (OSError, *_TIMEOUTS):
        return  # the cluster is busy restarting a worker: ask again next time
    now = time.monotonic()
    live = {k for keys in running.values() for k in keys}
    for k in list(started):
        if k not in live:
            del started[k]  # finished, or rescheduled after a restart: its clock starts again
    late = []
    for addr, keys in running.items():
        for k, analysing_s in keys.items():
            if k in by_key and by_key[k][0] in pending:
                first_seen = now - started.setdefault(k, now)
                if (analysing_s is not None and analysing_s > timeout_s) or (
                        analysing_s is None and first_seen > START_LIMIT_S):
                    late.append((addr, k))
    for addr, k in late:
        fut, task = by_key[k]
        client.cancel([fut])  # first, so the restart does not reschedule it
        pending.discard(fut)
        started.pop(k, None)
        problem = f"took longer than --trace-timeout {timeout_s:g} s; its worker was stopped and replaced"
        try:
            client.restart_workers([addr], raise_for_error=True)
        except Exception as exc:  # noqa: BLE001 - no nanny: the worker cannot be restarted from here
            problem = (f"took longer than --trace-timeout {timeout_s:g} s; its task was cancelled but its worker "
                       f"could not be restarted ({type(exc).__name__}) and may finish it in the background")
        yield Outcome(rel=task.rel, path=task.path, status="failed", problem=problem)
