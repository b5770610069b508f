"""Run a traceread command with a per-thread CPU timeline: every ~0.1 s, how much of a core each thread used.

Where a phase leaves a core idle on a 2-core machine shows as rows with one thread near 1.0 and nothing
beside it (the what-if replay waiting for the rules, the end of a load). Printed to stderr at exit.

    .venv/bin/python scripts/thread_timeline.py analyze TRACE -o r.md --json r.json

Linux only (``/proc/self/task``). A sampler thread of its own is left out of the rows; it takes the
GIL for a moment every interval, so the command runs slightly slower than it would alone.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time

INTERVAL_S = 0.1
_T0 = time.perf_counter()
_TICKS = os.sysconf("SC_CLK_TCK")
_names: dict[int, str] = {}
_samples: list[tuple[float, dict[int, float]]] = []


def _cpu(tid: str) -> float | None:
    """The thread's user + system time in seconds, or None once it has ended."""
    try:
        with open(f"/proc/self/task/{tid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / _TICKS


def _sample() -> None:
    me = threading.get_native_id()
    while True:
        for t in threading.enumerate():
            if t.native_id is not None:
                _names[t.native_id] = t.name.replace("traceread-", "")
        row = {int(tid): c for tid in os.listdir("/proc/self/task")
               if int(tid) != me and (c := _cpu(tid)) is not None}
        _samples.append((time.perf_counter() - _T0, row))
        time.sleep(INTERVAL_S)


def _report() -> None:
    before: dict[int, float] = {}
    last = 0.0
    for now, row in _samples:
        span = max(now - last, 1e-9)
        used = {tid: (c - before.get(tid, 0.0)) / span for tid, c in row.items()}
        busy = [f"{_names.get(tid, tid)}:{u:.1f}" for tid, u in used.items() if u >= 0.05]
        print(f"{now:6.2f} s  cores {sum(used.values()):3.1f}  {' '.join(busy)}", file=sys.stderr)
        before.update(row)
        last = now


def main() -> None:
    threading.Thread(target=_sample, name="timeline-sampler", daemon=True).start()
    atexit.register(_report)
    from traceread.cli import run

    sys.argv[0] = "traceread"
    run()


if __name__ == "__main__":
    main()
