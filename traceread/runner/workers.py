"""The loaders' threads and processes (:data:`THREADS`, a :class:`traceread.loaders.parallel.Parallel`).

A loader takes the object that runs pieces of its work beside it; this is the one the runner's loads
(:func:`traceread.runner.load`) give it: the second Kineto decoder (a thread with the compiled scanner,
else a forked child), the gunzip read-ahead, the worker pool of a many-core machine, the nsys reader
threads, and pandas imported beside the decode (:mod:`traceread.runner.prefetch`).
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Generic, TypeVar

from traceread.loaders.parallel import Ahead, Executor, Flag, Task
from traceread.runner import prefetch

T = TypeVar("T")


class _Thread(Generic[T]):
    """``fn`` on a thread; :meth:`result` joins it and returns its value or raises its exception."""

    def __init__(self, fn: Callable[[], T], name: str, daemon: bool) -> None:
        self._fn = fn
        self._value: T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=daemon)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._value = self._fn()
        except BaseException as exc:  # noqa: BLE001 - raised again in the thread that reads the result
            self._error = exc

    def result(self) -> T:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]  # set by _run when it raised nothing


class _Ahead(Generic[T]):
    """An iterator's items made on a thread into a bounded queue, then None (or the producer's exception)."""

    def __init__(self, items: Iterator[T], depth: int, name: str) -> None:
        self._items = items
        self._queue: queue.Queue[Any] = queue.Queue(depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _put(self, item: Any) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        try:
            for item in self._items:
                if not self._put(item):
                    return
        except Exception as exc:  # noqa: BLE001 - raised again in the reading thread
            self._put(exc)
            return
        self._put(None)

    def next(self) -> T | None:
        item = self._queue.get()
        if isinstance(item, BaseException):
            raise item
        return item

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


class Threads:
    """Threads and forked processes beside a load (:class:`traceread.loaders.parallel.Parallel`).

    A thread that cannot start (its stack does not fit under ``--max-memory``) is declined (None), and
    the loader does that piece inline."""

    def __init__(self, cores: int | None = None) -> None:
        self.cores = cores if cores is not None else min(os.cpu_count() or 1, 4)

    def thread(self, fn: Callable[[], T], name: str, daemon: bool = True) -> Task[T] | None:
        try:
            return _Thread(fn, name, daemon)
        except RuntimeError:  # no thread
            return None

    def flag(self) -> Flag:
        return threading.Event()

    def ahead(self, items: Iterator[T], depth: int, name: str) -> Ahead[T] | None:
        try:
            return _Ahead(items, depth, name)
        except RuntimeError:  # no thread
            return None

    def fork(self) -> int | None:
        try:
            return os.fork()
        except (OSError, AttributeError):  # no fork (platform, limits)
            return None

    def fork_pool(self, workers: int, initializer: Callable[[], None]) -> Any | None:
        if multiprocessing.current_process().daemon:  # daemons may not fork workers
            return None
        try:
            return multiprocessing.get_context("fork").Pool(workers, initializer=initializer)
        except (OSError, ValueError):  # no fork (platform, limits): decode in this process
            return None

    def executor(self, workers: int) -> Executor | None:
        return ThreadPoolExecutor(max_workers=workers)

    def local(self) -> Any:
        return threading.local()

    def beside_decode(self) -> None:
        prefetch.pandas_in_background()


THREADS = Threads()


def on_a_thread(fn: Callable[[], T], name: str = "traceread-beside") -> Callable[[], T]:
    """``fn`` started on a thread of its own (inline when no thread can start); the result joins it."""
    task = THREADS.thread(fn, name, daemon=False)
    return fn if task is None else task.result
