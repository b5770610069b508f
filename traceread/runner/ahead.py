"""A function applied to a stream's items on worker threads while the stream makes the next ones.

The table writers (``render.csv_table``) make a block of columns holding the GIL, then lay its rows out
in compiled code that releases it (``render.rowjoin.join_block``): with the layout on a thread, the two
overlap. The writer takes the mapping as an argument (render/ starts no thread); ``traceread gaps``
passes :func:`mapped_ahead`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

# One thread: a CSV's rows are short beside the making of their columns, so one layout keeps up; each
# more thread adds a block in flight (a block's columns and pieces) to the peak.
THREADS = 1


def mapped_ahead(items: Iterable[T], fn: Callable[[T], R], threads: int = THREADS) -> Iterator[R]:
    """``map(fn, items)`` in order, each ``fn`` on one of ``threads`` threads while ``items`` makes the
    next item. At most ``threads + 1`` results are made and not yet handed on; a failure making an item
    or in ``fn`` is raised here, and no thread is left behind."""
    with ThreadPoolExecutor(threads, thread_name_prefix="traceread-ahead") as pool:
        pending: deque[Future[R]] = deque()
        for item in items:
            pending.append(pool.submit(fn, item))
            if len(pending) > threads:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
