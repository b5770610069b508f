"""CPU sampling tables written into an nsys export as nsys writes them (the writers have no sampling).

``COMPOSITE_EVENTS``: a sample's time and thread; ``SAMPLING_CALLCHAINS``: its stack (depth 0: the frame it
was taken in, then its caller), symbols and modules as ``StringIds``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

PERIOD = 200_000  # ns between two samples of a running thread (nsys's default rate is near 5 kHz)


def add_cpu_samples(path: str, spans: list[tuple[int, int]], funcs: list[str], extra: Sequence[tuple[int, str]] = ()) -> int:
    """Write CPU samples every PERIOD over ``spans`` (the leaf function cycling through ``funcs``) and at the
    ``extra`` (time, function) points, on the thread that made the export's CUDA calls; its globalTid."""
    db = sqlite3.connect(path)
    (gtid,) = db.execute("SELECT DISTINCT globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()
    db.execute("CREATE TABLE COMPOSITE_EVENTS (id INTEGER NOT NULL PRIMARY KEY, start INTEGER NOT NULL, "
               "cpu INTEGER, threadState INTEGER, globalTid INTEGER, cpuCycles INTEGER NOT NULL)")
    db.execute("CREATE TABLE SAMPLING_CALLCHAINS (id INTEGER NOT NULL, symbol INTEGER NOT NULL, module INTEGER "
               "NOT NULL, kernelMode INTEGER, thumbCode INTEGER, unresolved INTEGER, specialEntry INTEGER, "
               "originalIP INTEGER, unwindMethod INTEGER, stackDepth INTEGER NOT NULL, symbolName TEXT, "
               "PRIMARY KEY (id, stackDepth))")
    next_id = db.execute("SELECT max(id) FROM StringIds").fetchone()[0] + 1
    ids = {}
    for name in sorted(set(funcs) | {f for _, f in extra} | {"libc_start_main", "/usr/lib/libfoo.so"}):
        ids[name] = next_id
        db.execute("INSERT INTO StringIds VALUES (?, ?)", (next_id, name))
        next_id += 1
    points = [(int(t), funcs[i % len(funcs)]) for s, e in spans for i, t in enumerate(range(s, e, PERIOD))]
    for k, (t, f) in enumerate(sorted(points + list(extra)), start=1):
        db.execute("INSERT INTO COMPOSITE_EVENTS VALUES (?, ?, 3, 1, ?, 1)", (k, t, gtid))
        db.execute("INSERT INTO SAMPLING_CALLCHAINS VALUES (?, ?, ?, NULL, NULL, NULL, NULL, 0, 0, 0, NULL)",
                   (k, ids[f], ids["/usr/lib/libfoo.so"]))
        db.execute("INSERT INTO SAMPLING_CALLCHAINS VALUES (?, ?, ?, NULL, NULL, NULL, NULL, 0, 0, 1, NULL)",
                   (k, ids["libc_start_main"], ids["/usr/lib/libfoo.so"]))
    db.commit()
    db.close()
    return int(gtid)
