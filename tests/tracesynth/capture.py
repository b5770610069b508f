"""Planted capture boundaries: the GPU busy with work issued before the capture, and the profiler
shutting down after the last step (ground truth by construction, on ``planted._Sim``).

``lead_boundary(sim, kind, wait)`` runs at the start of the first step: the GPU stays busy with
unrecorded work for ``wait`` ns (its streams are not free before then) and

* ``queued``: the host goes on queueing kernels; the first one starts when the GPU frees up;
* ``blocking-copy``: the host first reads a value back with a synchronous DtoH ``cudaMemcpy``,
  which waits behind that work (the copy itself, and the launch after it, are a sync stall);
* ``sync``: the host first calls ``cudaDeviceSynchronize``, which waits for it, then launches.

Truth: ``capture-boundary`` from the step's start to the first GPU op, which is one ordinary kernel
(whatever the step plants next follows it). The shutdown tail is planted
by ``_Sim.step`` (``tail``): the last step is padded with a stretch where no thread issues anything.
``lost_kernel_records(scenario)`` drops every GPU activity record of a scenario (the refusal test).
"""

from __future__ import annotations

import dataclasses

from tracesynth.model import Copy, HostCall, Scenario
from tracesynth.planted import _BIG, COMM, COMPUTE, COPY, _Sim

KINDS: tuple[str, ...] = ("queued", "blocking-copy", "sync")


def _first_kernel(sim: _Sim) -> None:
    """One GEMM after the lead: it closes the lead's truth interval (no overlapped all-reduce is drawn
    here: queued behind the unrecorded work, it would run across the next planted gap)."""
    sim.kernel(_BIG["gemm"][0], sim.j(80_000))


def lead_boundary(sim: _Sim, kind: str, wait: int) -> None:
    """Plant the capture's leading boundary of ``kind`` (module doc) at the host cursor."""
    start = sim.h
    busy_until = start + wait
    for stream in (COMPUTE, COMM, COPY):
        sim.free[stream] = max(sim.free[stream], busy_until)
    if kind == "queued":
        sim.pending = "capture-boundary"
        sim.last_end = start  # the truth runs from the capture's start to the first kernel
        _first_kernel(sim)
        return
    if kind == "blocking-copy":
        sim.copy("DtoH", sim.j(8_000), COMPUTE, "Device", "cudaMemcpy", blocking=True)
        # The copy ran on the compute stream right after the unrecorded work: the wait before it is the
        # boundary, the copy and the launch after it the sync's own stall (host blocked, then refill).
        sim.truth.append((start, busy_until, "capture-boundary"))
        sim.last_end, sim.pending = busy_until, "sync-stall"
        _first_kernel(sim)
        return
    if kind == "sync":
        _, sim.h = sim.api("cudaDeviceSynchronize", sim.h + 2_000, busy_until + 1_500 - sim.h - 2_000)
        sim.h += 1_000
        sim.pending = "capture-boundary"
        sim.last_end = start
        _first_kernel(sim)
        return
    raise ValueError(f"unknown lead kind {kind!r}")


def data_movement_only(scenario: Scenario, memsets: int = 0, memset_bytes: int = 4096) -> Scenario:
    """The same capture with no kernel: its kernels, graphs and their launch calls gone, its copies (and
    their calls) kept, plus ``memsets`` memsets of ``memset_bytes`` each on rank 0 after its last copy (a
    set-up or transfer-only window: the GPU moved data but computed nothing)."""
    ranks = []
    for rk in scenario.ranks:
        kept = [c for c in rk.host_calls if "Launch" not in c.name and "Graph" not in c.name]
        copies = list(rk.copies)
        if memsets and rk is scenario.ranks[0]:
            t = max((c.end_ns for c in copies), default=0) + 1_000_000
            corr = max((c.correlation for c in rk.host_calls), default=0) + 1
            tid = rk.host_calls[0].tid if rk.host_calls else rk.pid
            for i in range(memsets):
                kept.append(HostCall(tid=tid, name="cudaMemsetAsync", start_ns=t, end_ns=t + 4_000,
                                     correlation=corr + i))
                copies.append(Copy(device=rk.devices[0], stream=7, kind="memset", start_ns=t + 6_000,
                                   end_ns=t + 9_000, correlation=corr + i, bytes=memset_bytes,
                                   src_kind="Device", dst_kind="Device"))
                t += 50_000
        ranks.append(dataclasses.replace(rk, kernels=[], graphs=[], host_calls=kept, copies=copies))
    return dataclasses.replace(scenario, ranks=ranks)


def lost_kernel_records(scenario: Scenario) -> Scenario:
    """The same capture with every GPU activity record lost (the profiler stopped before its activity
    buffers were flushed): launch calls, their flow starts and the host side stay, no kernel, copy,
    memset or sync record does."""
    ranks = [dataclasses.replace(rk, kernels=[], copies=[], graphs=[], syncs=[]) for rk in scenario.ranks]
    return dataclasses.replace(scenario, ranks=ranks)
