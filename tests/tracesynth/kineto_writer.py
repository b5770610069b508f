"""Write a Scenario as PyTorch profiler (Kineto) Chrome-trace JSON, one file per rank.

Generations (trace-formats.md A.3/A.4):

* ``"2024"`` (PyTorch >= 2.4): ``ts``/``dur`` are relative microseconds written as
  ``<us>.<3-digit ns>`` text, ``baseTimeNanoseconds`` = ``scenario.origin_epoch_ns``; so the raw ns
  a loader reads (``ts * 1000``) equal the scenario's ns, and epoch ns = base + raw. This is the
  time base the nsys writer uses too (``utcEpochNs`` = origin, ``start`` = scenario ns), which is
  what makes the two files of one scenario comparable to the nanosecond.
* ``"int-us"`` (2022-style, PyTorch 1.13-2.3): integer **absolute** epoch microseconds
  (``(origin + t) // 1000``, floor like Kineto's ``us()``), no ``baseTimeNanoseconds``.

Rows: kernels/memcpy/memset/cuda_sync on ``pid`` = device, ``tid`` = stream; runtime/driver calls,
CPU ops and annotations on the host pid/tid; ``ac2g`` flows from each launch to its GPU op; a whole
CUDA graph (``GraphLaunch``) is written as one kernel row named ``CUDA graph <id>``, since Kineto
has no whole-graph record. OS runtime calls (``Rank.os_calls``) have no Kineto form and are skipped.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

from traceread.atomic import atomic_open
from tracesynth.model import Rank, Scenario

GENERATIONS = ("2024", "int-us")
SYNC_NAMES = {"stream": "Stream Sync", "event": "Event Sync", "context": "Context Sync",
              "wait_event": "Stream Wait Event"}
_SYNC_STREAM_NONE = 4294967295  # CUPTI's invalid-stream value on context-level syncs


def graph_name(graph_id: int) -> str:
    """The name both writers and the nsys loader give a whole-graph execution row."""
    return f"CUDA graph {graph_id}"


def write_kineto(scenario: Scenario, path: str | os.PathLike[str], generation: str = "2024",
                 rank: int | None = None) -> list[str]:
    """Write Kineto JSON for one rank (``rank``) or all ranks; return the paths written.

    With several ranks and ``rank=None``, ``path`` may contain ``{rank}``; otherwise ``.rank<N>`` is
    inserted before the first ``.json``. Files are written atomically.
    """
    if generation not in GENERATIONS:
        raise ValueError(f"unknown Kineto generation {generation!r}; choose one of {GENERATIONS}")
    path = os.fspath(path)
    chosen = [r for r in scenario.ranks if rank is None or r.rank == rank]
    if not chosen:
        raise ValueError(f"scenario has no rank {rank}")
    written = []
    for rk in chosen:
        out = path
        if len(chosen) > 1:
            out = path.replace("{rank}", str(rk.rank)) if "{rank}" in path else \
                path.replace(".json", f".rank{rk.rank}.json", 1) if ".json" in path else f"{path}.rank{rk.rank}"
        with atomic_open(out, "w") as fh:
            for chunk in _document(scenario, rk, generation):
                fh.write(chunk)
        written.append(out)
    return written


def _document(sc: Scenario, rk: Rank, gen: str) -> Iterator[str]:
    world = sc.world_size or len(sc.ranks)
    head = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": d, "name": rk.device_name, "totalGlobalMem": 85_520_809_984,
                              "computeMajor": 9, "computeMinor": 0, "maxThreadsPerBlock": 1024,
                              "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536, "warpSize": 32,
                              "sharedMemPerBlock": 49152, "numSms": 132} for d in rk.devices],
        "distributedInfo": {"backend": "nccl", "rank": rk.rank, "world_size": world},
    }
    if sc.pg_config is not None:
        head["distributedInfo"].update(pg_count=len(sc.pg_config), pg_config=sc.pg_config)
    parts = [json.dumps(head)[:-1]]
    if gen == "2024":
        parts.append(f', "displayTimeUnit": "ms", "baseTimeNanoseconds": {sc.origin_epoch_ns}')
    yield "".join(parts) + ', "traceEvents": [\n'
    first = True
    for ev in _events(sc, rk, gen):
        yield ev if first else ",\n" + ev
        first = False
    yield f'\n], "traceName": "/tmp/rank{rk.rank}.pt.trace.json"}}\n'


def _events(sc: Scenario, rk: Rank, gen: str) -> Iterator[str]:
    def ts(t: int) -> str:
        if gen == "2024":
            if t < 0:
                raise ValueError("Kineto relative timestamps cannot be negative")
            return f"{t // 1000}.{t % 1000:03d}"
        return str((sc.origin_epoch_ns + t) // 1000)

    def span(start: int, end: int) -> str:
        if gen == "2024":
            d = end - start
            return f'"ts": {ts(start)}, "dur": {d // 1000}.{d % 1000:03d}'
        a, b = (sc.origin_epoch_ns + start) // 1000, (sc.origin_epoch_ns + end) // 1000
        return f'"ts": {a}, "dur": {b - a}'

    def x(cat: str, name: str, pid: int, tid: int, start: int, end: int, args: dict) -> str:
        a = f', "args": {json.dumps(args)}' if args else ""
        return (f'{{"ph": "X", "cat": "{cat}", "name": {json.dumps(name)}, "pid": {pid}, "tid": {tid}, '
                f'{span(start, end)}{a}}}')

    def flow(ph: str, corr: int, pid: int, tid: int, t: int) -> str:
        bp = ', "bp": "e"' if ph == "f" else ""
        return (f'{{"ph": "{ph}", "id": {corr}, "pid": {pid}, "tid": {tid}, "ts": {ts(t)}, '
                f'"cat": "ac2g", "name": "ac2g"{bp}}}')

    pid = rk.pid
    threads = sorted({c.tid for c in rk.host_calls} | {r.tid for r in rk.host_ranges})
    for d in rk.devices:
        yield json.dumps({"name": "process_name", "ph": "M", "ts": 0, "pid": d, "tid": 0,
                          "args": {"name": "python3"}})
        yield json.dumps({"name": "process_labels", "ph": "M", "ts": 0, "pid": d, "tid": 0,
                          "args": {"labels": f"GPU {d}"}})
    yield json.dumps({"name": "process_name", "ph": "M", "ts": 0, "pid": pid, "tid": 0, "args": {"name": "python3"}})
    for t in threads:
        yield json.dumps({"name": "thread_name", "ph": "M", "ts": 0, "pid": pid, "tid": t,
                          "args": {"name": f"thread {t} (python3)"}})
    for r in rk.host_ranges:
        args = {"External id": r.external_id} if r.external_id >= 0 else {}
        if r.input_dims is not None:
            args.update({"Input Dims": r.input_dims, "Input type": r.input_types or []})
        if r.args:
            args.update(r.args)
        kind = "python_function" if r.python else "cpu_op" if r.is_op else "user_annotation"
        yield x(kind, r.name, pid, r.tid, r.start_ns, r.end_ns, args)
    launched = {k.correlation for k in rk.kernels} | {c.correlation for c in rk.copies} | \
        {g.correlation for g in rk.graphs}
    for c in rk.host_calls:
        args = {"cbid": 211, "correlation": c.correlation}
        if c.external_id >= 0:
            args["External id"] = c.external_id
        cat = "cuda_runtime" if c.name.startswith("cuda") else "cuda_driver"
        yield x(cat, c.name, pid, c.tid, c.start_ns, c.end_ns, args)
        if c.correlation in launched:
            yield flow("s", c.correlation, pid, c.tid, c.start_ns)
    for k in rk.kernels:
        args = {"External id": k.external_id, "queued": 0, "device": k.device, "context": 1, "stream": k.stream,
                "correlation": k.correlation, "registers per thread": k.registers, "shared memory": k.shared_mem,
                "blocks per SM": 1.0, "warps per SM": 8.0, "grid": list(k.grid), "block": list(k.block),
                "est. achieved occupancy %": 25}
        if k.external_id < 0:
            del args["External id"]
        yield x("kernel", k.name, k.device, k.stream, k.start_ns, k.end_ns, args)
        yield flow("f", k.correlation, k.device, k.stream, k.start_ns)
    for g in rk.graphs:
        args = {"device": g.device, "stream": g.stream, "correlation": g.correlation, "graph id": g.graph_id}
        yield x("kernel", graph_name(g.graph_id), g.device, g.stream, g.start_ns, g.end_ns, args)
        yield flow("f", g.correlation, g.device, g.stream, g.start_ns)
    for c in rk.copies:
        args = {"device": c.device, "context": 1, "stream": c.stream, "correlation": c.correlation,
                "bytes": c.bytes, "memory bandwidth (GB/s)": round(c.bytes / max(c.end_ns - c.start_ns, 1), 6)}
        if c.kind == "memset":
            cat, name = "gpu_memset", f"Memset ({c.dst_kind})"
        else:
            cat, name = "gpu_memcpy", f"Memcpy {c.kind} ({c.src_kind} -> {c.dst_kind})"
        yield x(cat, name, c.device, c.stream, c.start_ns, c.end_ns, args)
        yield flow("f", c.correlation, c.device, c.stream, c.start_ns)
    for s in rk.syncs:
        stream = s.stream if s.stream >= 0 else _SYNC_STREAM_NONE
        args = {"cuda_sync_kind": SYNC_NAMES.get(s.kind, s.kind), "stream": stream, "correlation": s.correlation,
                "device": s.device, "context": 1}
        if s.wait_on_stream >= 0 or s.record_correlation >= 0:
            args.update({"wait_on_stream": s.wait_on_stream, "wait_on_cuda_event_record_corr_id": s.record_correlation})
        yield x("cuda_sync", SYNC_NAMES.get(s.kind, s.kind), s.device, stream, s.start_ns, s.end_ns, args)
    starts = [e.start_ns for e in (*rk.host_ranges, *rk.host_calls, *rk.kernels, *rk.copies)]
    ends = [e.end_ns for e in (*rk.host_ranges, *rk.host_calls, *rk.kernels, *rk.copies)]
    if starts:
        yield x("Trace", "PyTorch Profiler (0)", "Spans", "PyTorch Profiler", min(starts), max(ends),
                {"Op count": 0}).replace('"pid": Spans, "tid": PyTorch Profiler',
                                         '"pid": "Spans", "tid": "PyTorch Profiler"')
