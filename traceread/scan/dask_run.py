"""The same scan on a Dask distributed cluster: ``--dask tcp://HOST:PORT | scheduler.json | local``.

Each file is one task running :func:`traceread.scan.work.run_task` on a worker, which reads the
trace from the path it was given (a shared filesystem on a real cluster), so only the task, the
small outcome and the per-trace report bytes cross the network: never a frame. ``local`` starts a
``LocalCluster`` of ``--workers`` single-threaded processes with ``--max-rss`` as each worker's
memory limit (Dask's nanny restarts a worker past it; the file is then listed as a failure).
On a cluster the workers' limits are the cluster's own settings.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from traceread.errors import UsageError
from traceread.scan.work import Outcome, Settings, Task, run_task


def _client(address: str, workers: int, max_rss: int):  # noqa: ANN202 - distributed is optional
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise UsageError("--dask needs the distributed package: pip install 'traceread[dask]'") from None
    if address == "local":
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, memory_limit=max_rss,
                               dashboard_address=None)
        return Client(cluster), cluster
    try:
        if address.endswith(".json") or os.path.isfile(address):
            return Client(scheduler_file=address, timeout="30s"), None
        return Client(address, timeout="30s"), None
    except (OSError, TimeoutError, ValueError) as exc:
        raise UsageError(f"--dask {address}: cannot reach the scheduler ({exc})") from None


def run_on_dask(address: str, tasks: list[Task], settings: Settings, workers: int, max_rss: int) -> Iterator[Outcome]:
    from distributed import as_completed

    client, cluster = _client(address, workers, max_rss)
    try:
        futures = client.map(run_task, tasks, settings=settings, pure=False, key=[f"traceread-{i}" for i in
                                                                                range(len(tasks))])
        index = {f.key: t for f, t in zip(futures, tasks, strict=True)}
        for fut in as_completed(futures):
            task = index[fut.key]
            try:
                yield fut.result()
            except Exception as exc:  # noqa: BLE001 - a killed worker (memory) fails this file only
                first = (str(exc).splitlines() or [""])[0]
                yield Outcome(rel=task.rel, path=task.path, status="failed",
                              problem=f"Dask task failed: {type(exc).__name__}: {first}"[:300])
            fut.release()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
