"""What a loader may run beside its own work, and the default that runs nothing beside it (:data:`SERIAL`).

A loader reads the same events whichever :class:`Parallel` it is given; only its speed changes. The
loaders never start a thread or a process themselves: the caller passes the object that does. The runner's
(:data:`traceread.runner.workers.THREADS`) starts the second decoder, the gunzip read-ahead, the nsys reader
threads and the pandas import beside the decode; :data:`SERIAL`, the default, does every piece inline, in
the calling thread, which keeps a loader a plain function a test can call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any, Protocol, TypeVar

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class Task(Protocol[T_co]):
    """A function running beside the caller."""

    def result(self) -> T_co:
        """Wait for it: its value, or its exception raised again here."""


class Flag(Protocol):
    """A stop signal one side sets and the other reads."""

    def set(self) -> None: ...

    def is_set(self) -> bool: ...


class Ahead(Protocol[T_co]):
    """An iterator's items made beside the reader, a few at most waiting."""

    def next(self) -> T_co | None:
        """The next item, None at the end; the producer's exception is raised here."""

    def close(self) -> None:
        """Stop the producer (it may be mid-way) and wait for it."""


class Executor(Protocol):
    """A few reader threads: ``submit`` returns a :class:`Task`."""

    def submit(self, fn: Callable[..., Any], /, *args: Any) -> Any: ...

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None: ...


class Parallel(Protocol):
    """What runs beside a load; every method may decline (None), and the loader then does the piece inline."""

    cores: int  # decoders a Kineto load uses unless told (``decoders``)

    def thread(self, fn: Callable[[], T], name: str, daemon: bool = True) -> Task[T] | None:
        """``fn`` started on a thread of its own, or None (none could start: the caller runs it)."""

    def flag(self) -> Flag: ...

    def ahead(self, items: Iterator[T], depth: int, name: str) -> Ahead[T] | None:
        """``items`` made on a thread, at most ``depth`` waiting; None: the caller iterates them itself."""

    def fork(self) -> int | None:
        """``os.fork()`` (0 in the child, its pid in the parent), or None: no second process."""

    def fork_pool(self, workers: int, initializer: Callable[[], None]) -> Any | None:
        """A pool of forked decoding processes (``multiprocessing.pool.Pool``'s ``apply_async``), or None."""

    def executor(self, workers: int) -> Executor | None:
        """``workers`` reader threads, or None (read serially)."""

    def local(self) -> Any:
        """Attributes of the calling thread's own (``threading.local``)."""

    def beside_decode(self) -> None:
        """The decode runs from here on with the GIL released, and forks nothing more: what the caller
        wants done meanwhile starts now (the runner's pandas import)."""


class _Flag:
    def __init__(self) -> None:
        self._set = False

    def set(self) -> None:
        self._set = True

    def is_set(self) -> bool:
        return self._set


class Serial:
    """Nothing beside the load: one decoder, inflated on demand, tables read in one connection."""

    cores = 1

    def thread(self, fn: Callable[[], T], name: str, daemon: bool = True) -> Task[T] | None:
        return None

    def flag(self) -> Flag:
        return _Flag()

    def ahead(self, items: Iterator[T], depth: int, name: str) -> Ahead[T] | None:
        return None

    def fork(self) -> int | None:
        return None

    def fork_pool(self, workers: int, initializer: Callable[[], None]) -> Any | None:
        return None

    def executor(self, workers: int) -> Executor | None:
        return None

    def local(self) -> Any:
        return SimpleNamespace()

    def beside_decode(self) -> None:
        pass


SERIAL: Parallel = Serial()
