"""Scenario -> column arrays of the nsys export tables (used by :mod:`tracesynth.nsys_writer`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tracesynth.model import Scenario

_K = "CUPTI_ACTIVITY_KIND_"
_NVTX_PUSHPOP = 59
_OSRT_CLASS = 27
# PyTorch annotation names that emit_nvtx also suffixes with op_id (record_function ranges).
_SUFFIXED_ANNOTATIONS = ("ProfilerStep#", "Optimizer.", "enumerate(DataLoader)")


def scenario_columns(scenario: Scenario, strings, schema: str) -> dict[str, dict[str, Sequence]]:
    """Column-oriented rows of every table the scenario fills (tables without rows are left out)."""
    from tracesynth import nsys_writer as w

    acc: dict[str, dict[str, list]] = {}

    def add(table: str, **cols) -> None:
        dst = acc.setdefault(table, {})
        for k, v in cols.items():
            dst.setdefault(k, []).extend(v)

    op_id = 300_000
    for rank in scenario.ranks:
        gpid = w.global_pid(rank.pid)
        ks = rank.kernels
        if ks:
            names = [k.name for k in ks]
            add(_K + "KERNEL",
                start=[k.start_ns for k in ks], end=[k.end_ns for k in ks], deviceId=[k.device for k in ks],
                contextId=[k.device + 1 for k in ks], streamId=[k.stream for k in ks],
                correlationId=[k.correlation for k in ks], globalPid=[gpid] * len(ks),
                demangledName=strings.ids_of(names).tolist(),
                shortName=strings.ids_of([w.short_name(n) for n in names]).tolist(),
                launchType=[0] * len(ks), cacheConfig=[0] * len(ks),
                registersPerThread=[k.registers for k in ks],
                gridX=[k.grid[0] for k in ks], gridY=[k.grid[1] for k in ks], gridZ=[k.grid[2] for k in ks],
                blockX=[k.block[0] for k in ks], blockY=[k.block[1] for k in ks], blockZ=[k.block[2] for k in ks],
                staticSharedMemory=[0] * len(ks), dynamicSharedMemory=[k.shared_mem for k in ks],
                gridId=list(range(1, len(ks) + 1)))
        hc = rank.host_calls
        if hc:
            api = [w.api_name(c.name) for c in hc]
            add(_K + "RUNTIME",
                start=[c.start_ns for c in hc], end=[c.end_ns for c in hc], eventClass=[a[1] for a in api],
                globalTid=[w.global_tid(rank.pid, c.tid) for c in hc], correlationId=[c.correlation for c in hc],
                nameId=strings.ids_of([a[0] for a in api]).tolist(), returnValue=[0] * len(hc))
        copies = [c for c in rank.copies if c.kind != "memset"]
        sets = [c for c in rank.copies if c.kind == "memset"]
        if copies:
            add(_K + "MEMCPY",
                start=[c.start_ns for c in copies], end=[c.end_ns for c in copies],
                deviceId=[c.device for c in copies], contextId=[c.device + 1 for c in copies],
                streamId=[c.stream for c in copies], correlationId=[c.correlation for c in copies],
                globalPid=[gpid] * len(copies), bytes=[c.bytes for c in copies],
                copyKind=[w.COPY_KINDS.get(c.kind, 0) for c in copies],
                srcKind=[w.MEM_KINDS.get(c.src_kind, 7) for c in copies],
                dstKind=[w.MEM_KINDS.get(c.dst_kind, 7) for c in copies],
                srcDeviceId=[c.device for c in copies], dstDeviceId=[c.device for c in copies])
        if sets:
            add(_K + "MEMSET",
                start=[c.start_ns for c in sets], end=[c.end_ns for c in sets], deviceId=[c.device for c in sets],
                contextId=[c.device + 1 for c in sets], streamId=[c.stream for c in sets],
                correlationId=[c.correlation for c in sets], globalPid=[gpid] * len(sets),
                value=[0] * len(sets), bytes=[c.bytes for c in sets],
                memKind=[w.MEM_KINDS.get(c.dst_kind, 7) for c in sets])
        sy = rank.syncs
        if sy:
            numbering = w.SYNC_TYPES[schema]
            add(_K + "SYNCHRONIZATION",
                start=[s.start_ns for s in sy], end=[s.end_ns for s in sy], deviceId=[s.device for s in sy],
                contextId=[s.device + 1 for s in sy],
                streamId=[w.NO_STREAM if s.stream < 0 else s.stream for s in sy],
                correlationId=[s.correlation for s in sy], globalPid=[gpid] * len(sy),
                syncType=[numbering.get(s.kind, 0) for s in sy],
                eventId=[w.NO_STREAM if s.kind in ("stream", "context") else 1 for s in sy])
        gr = rank.graphs
        if gr:
            add(_K + "GRAPH_TRACE",
                start=[g.start_ns for g in gr], end=[g.end_ns for g in gr], deviceId=[g.device for g in gr],
                contextId=[g.device + 1 for g in gr], streamId=[g.stream for g in gr],
                correlationId=[g.correlation for g in gr], globalPid=[gpid] * len(gr),
                graphId=[g.graph_id for g in gr], graphExecId=[g.graph_id for g in gr])
        hr = rank.host_ranges
        if hr:
            texts = []
            for i, r in enumerate(hr):
                if r.is_op:
                    op_id += 1
                    texts.append(f"{r.name}, seq = {i}, op_id = {op_id}" if i % 2 else f"{r.name}, op_id = {op_id}")
                elif r.name.startswith(_SUFFIXED_ANNOTATIONS):
                    op_id += 1
                    texts.append(f"{r.name}, op_id = {op_id}")
                else:
                    texts.append(r.name)
            add("NVTX_EVENTS",
                start=[r.start_ns for r in hr], end=[r.end_ns for r in hr], eventType=[_NVTX_PUSHPOP] * len(hr),
                text=texts, globalTid=[w.global_tid(rank.pid, r.tid) for r in hr], domainId=[0] * len(hr))
        oc = rank.os_calls
        if oc:
            add("OSRT_API",
                start=[c.start_ns for c in oc], end=[c.end_ns for c in oc], eventClass=[_OSRT_CLASS] * len(oc),
                globalTid=[w.global_tid(rank.pid, c.tid) for c in oc],
                nameId=strings.ids_of([c.name for c in oc]).tolist(), returnValue=[0] * len(oc),
                nestingLevel=[0] * len(oc), callchainId=[0] * len(oc))
        tids = sorted({c.tid for c in hc} | {r.tid for r in hr} | {c.tid for c in rank.os_calls})
        if tids:
            add("ThreadNames", nameId=[strings.id("python3" if t == rank.pid else f"pt_thread_{t}") for t in tids],
                priority=[0] * len(tids), globalTid=[w.global_tid(rank.pid, t) for t in tids])
        streams = sorted({(k.device, k.stream) for k in ks} | {(c.device, c.stream) for c in rank.copies})
        if streams:
            add("TARGET_INFO_CUDA_STREAM", streamId=[s for _, s in streams], hwId=[0] * len(streams),
                vmId=[1] * len(streams), processId=[rank.pid] * len(streams),
                contextId=[d + 1 for d, _ in streams], priority=[0] * len(streams),
                flag=[1 if s == 7 else 2 for _, s in streams])
    return {t: _sorted_by_start(cols) for t, cols in acc.items()}


def _sorted_by_start(cols: dict[str, list]) -> dict[str, list]:
    """Rows in start order, as nsys writes them."""
    if "start" not in cols:
        return cols
    order = np.argsort(np.asarray(cols["start"], dtype=np.int64), kind="stable")
    return {k: [v[i] for i in order] for k, v in cols.items()}
