#!/usr/bin/env python3
"""Record real PyTorch-profiler traces of small workloads, one per cause traceread names (issue 8).

Each workload runs in a child process of its own: a crash, a hang or a poisoned CUDA context then loses
that one workload only, and the parent, which never touches the GPU, always writes the summary and the
archive inside its time budget. Only a few files come back from the GPU machine, so the command there
writes the working folder outside $OUT and sends back the archive and the log alone:

    PYTHONUNBUFFERED=1 python3 scripts/record_gpu_traces.py --out /tmp/gpu-traces \\
        --archive "$OUT/gpu-traces.tar.gz" 2>&1 | tee "$OUT/record.log"

CPU smoke test (CUDA-only workloads are skipped with a note; sizes shrink so it runs in a minute or two):

    .venv-torch/bin/python scripts/record_gpu_traces.py --out /tmp/gpu-dry --device cpu

Writes DIR/<name>/trace.pt.trace.json.gz, DIR/<name>/workload.json (what ran, the cause it shows, its
counterpart, parameters, versions, wall times, trace counts), DIR/<name>/log.txt, DIR/env.json,
DIR/summary.json, DIR/README.md (the text for fixtures/gpu/README.md), then DIR.tar.gz (or --archive).
"""

from __future__ import annotations

import argparse
import getpass
import gzip
import itertools
import json
import math
import os
import platform
import re
import signal
import socket
import subprocess
import sys
import tarfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

WAIT, WARMUP = 1, 2
DEFAULT_ACTIVE = 6  # issue 8 asks for at least 6 active steps
TRACE_NAME = "trace.pt.trace.json.gz"
# The GPU machine answers one command for at most 600 s; stopping new workloads at this budget leaves
# time to write the archive even if one child hangs until its own timeout.
DEFAULT_BUDGET_S = 420
TRACE_WARN_BYTES = 4 * 2**20  # issue 8: a few MB gzipped at most per trace


@dataclass(frozen=True)
class Workload:
    name: str
    cause: str  # the traceread cause the trace was built to show
    # "problem": built to show the cause; "fix": its counterpart with the cause removed; "reference": a
    # healthy pattern on its own
    role: str
    counterpart: str | None
    shows: str
    cuda: dict[str, Any]
    cpu: dict[str, Any] | None  # None: CUDA-only, skipped on --device cpu
    timeout_s: int = 150
    cpu_note: str = ""


# Sizes: a CUDA step is tens of ms on an H200 (~790 TFLOP/s bf16, ~4.3 TB/s); CPU sizes only smoke-test.
WORKLOADS: tuple[Workload, ...] = (
    Workload("healthy_gemm", "healthy", "reference", None,
             "bf16 MLP training loop of large matmuls; GPU busy back to back, compute-bound kernels",
             cuda=dict(batch=8192, hidden=4096, layers=16, dtype="bfloat16"),
             cpu=dict(batch=256, hidden=256, layers=4, dtype="float32")),
    Workload("launch_bound", "launch-bound", "problem", "launch_bound_cudagraph",
             "tiny MLP with dozens of small elementwise ops per layer; GPU idles between microsecond kernels "
             "while the CPU launches the next one",
             cuda=dict(batch=64, width=256, layers=4, elementwise_per_layer=40, dtype="float32"),
             cpu=dict(batch=32, width=64, layers=2, elementwise_per_layer=10, dtype="float32")),
    Workload("launch_bound_cudagraph", "healthy", "fix", "launch_bound",
             "the launch_bound training step (forward, backward, SGD) captured once in a CUDA graph and "
             "replayed: one cudaGraphLaunch per step, kernels back to back",
             cuda=dict(batch=64, width=256, layers=4, elementwise_per_layer=40, dtype="float32"),
             cpu=None, cpu_note="CUDA graphs need a GPU"),
    Workload("sync_stall", "sync-stall", "problem", None,
             "training loop with .item() after every block and a per-parameter isfinite() host check "
             "after backward; each sync drains the queue and the GPU waits for the host to relaunch",
             cuda=dict(batch=4096, hidden=2048, ffn=4096, blocks=8, dtype="bfloat16"),
             cpu=dict(batch=64, hidden=64, ffn=128, blocks=2, dtype="float32")),
    Workload("memory_bound", "memory-bound", "problem", "memory_bound_compiled",
             "eager chain of one-flop elementwise ops on a 1 GiB tensor, one kernel per op, each "
             "streaming the whole tensor through DRAM",
             cuda=dict(numel=2**28, chain=48, dtype="float32"),
             cpu=dict(numel=2**20, chain=16, dtype="float32")),
    Workload("two_stream", "healthy", "reference", None,
             "double-buffered input prefetch: a pinned non_blocking host-to-device copy on a side stream "
             "overlaps matmuls on the default stream; copy time hidden",
             cuda=dict(copy_mib=128, matmul=8192, dtype="bfloat16"),
             cpu=None, cpu_note="side CUDA streams and pinned copies need a GPU"),
    Workload("data_starved", "data-starved", "problem", "data_workers_pinned",
             "DataLoader with num_workers=0 and a CPU transform about 3x the GPU step; pageable copies; "
             "GPU idles inside enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
             cuda=dict(batch=4096, features=512, hidden=4096, layers=12, dtype="bfloat16",
                       cpu_over_gpu=3.0, num_workers=0, pin_memory=False),
             cpu=dict(batch=256, features=64, hidden=128, layers=2, dtype="float32",
                      cpu_over_gpu=3.0, num_workers=0, pin_memory=False)),
    Workload("data_workers_pinned", "healthy", "fix", "data_starved",
             "same model and transform with enough DataLoader workers, pinned memory and non_blocking "
             "copies; batches wait in the queue, GPU stays busy",
             cuda=dict(batch=4096, features=512, hidden=4096, layers=12, dtype="bfloat16",
                       cpu_over_gpu=3.0, num_workers="auto", pin_memory=True, prefetch_factor=2),
             cpu=dict(batch=256, features=64, hidden=128, layers=2, dtype="float32",
                      cpu_over_gpu=3.0, num_workers="auto", pin_memory=False, prefetch_factor=2)),
    # Last: the first torch.compile costs 30-60 s, so a slow compile cannot crowd out the others.
    Workload("memory_bound_compiled", "memory-bound", "fix", "memory_bound",
             "the memory_bound chain under torch.compile: one fused kernel reads and writes the tensor "
             "once per step (still memory-bound: 6 flop/byte against H200's fp32 ridge of ~14; "
             "chain x less DRAM traffic)",
             cuda=dict(numel=2**28, chain=48, dtype="float32"),
             cpu=dict(numel=2**20, chain=16, dtype="float32"), timeout_s=300),
)
BY_NAME = {w.name: w for w in WORKLOADS}


@dataclass
class Built:
    step: Any  # zero-argument callable: one training/inference step
    info: dict[str, Any] = field(default_factory=dict)  # calibration results, FLOPs, notes


# ----------------------------------------------------------------------------------------------- helpers

def _dtype(p: dict[str, Any]) -> Any:
    import torch
    return getattr(torch, p["dtype"])


def _sync(dev: str) -> None:
    import torch
    if dev == "cuda":
        torch.cuda.synchronize()


def _time_ms(fn: Any, dev: str, reps: int = 3, warm: int = 1) -> float:
    """Fastest of `reps` timed calls of fn(), in wall ms, each drained (calibration only, never profiled).
    The minimum, because a noisy neighbour only ever adds time."""
    for _ in range(warm):
        fn()
    _sync(dev)
    best = math.inf
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        _sync(dev)
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


def _train_step(model: Any, opt: Any, x: Any) -> Any:
    opt.zero_grad(set_to_none=True)
    loss = model(x).float().pow(2).mean()
    loss.backward()
    opt.step()
    return loss


def _mlp(dev: str, p: dict[str, Any], d_in: int, hidden: int, layers: int) -> Any:
    import torch
    mods: list[Any] = [torch.nn.Linear(d_in, hidden, bias=False)]
    for _ in range(layers):
        mods += [torch.nn.ReLU(), torch.nn.Linear(hidden, hidden, bias=False)]
    return torch.nn.Sequential(*mods).to(dev, _dtype(p))


# --------------------------------------------------------------------------------------------- workloads

def build_healthy_gemm(dev: str, p: dict[str, Any]) -> Built:
    import torch
    b, h, n = p["batch"], p["hidden"], p["layers"]
    model = _mlp(dev, p, h, h, n - 1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9)
    x = torch.randn(b, h, device=dev, dtype=_dtype(p))
    return Built(lambda: _train_step(model, opt, x), {"model_flops_per_step": 6 * b * h * h * n})


def _tiny_mlp(dev: str, p: dict[str, Any]) -> tuple[Any, Any, Any]:
    import torch
    w, n, e = p["width"], p["layers"], p["elementwise_per_layer"]
    layers = torch.nn.ModuleList(torch.nn.Linear(w, w) for _ in range(n)).to(dev, _dtype(p))

    def forward(x: Any) -> Any:
        for lin in layers:
            x = lin(x)
            for k in range(e):  # bounded ops, so values stay finite however long the chain
                x = torch.tanh(x) if k % 3 == 0 else (x * 0.9 if k % 3 == 1 else x + 0.01)
        return x

    # foreach=False: one small kernel per parameter, as many small-model setups still run it.
    opt = torch.optim.SGD(layers.parameters(), lr=1e-3, momentum=0.9, foreach=False)
    return forward, opt, torch.randn(p["batch"], w, device=dev, dtype=_dtype(p))


def build_launch_bound(dev: str, p: dict[str, Any]) -> Built:
    forward, opt, x = _tiny_mlp(dev, p)
    flops = 6 * p["batch"] * p["width"] ** 2 * p["layers"]
    return Built(lambda: _train_step(forward, opt, x), {"model_flops_per_step": flops})


def build_launch_bound_cudagraph(dev: str, p: dict[str, Any]) -> Built:
    import torch
    forward, opt, x = _tiny_mlp(dev, p)
    inputs = [torch.randn_like(x) for _ in range(4)]
    # Warm up on a side stream before capture, as torch.cuda.graphs requires (lazy state, momentum buffers).
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            _train_step(forward, opt, x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    t0 = time.perf_counter()
    with torch.cuda.graph(graph):  # captured before profiling: the trace shows replays only
        loss = forward(x).float().pow(2).mean()
        loss.backward()
        opt.step()
    capture_s = time.perf_counter() - t0
    counter = itertools.count()

    def step() -> None:
        x.copy_(inputs[next(counter) % len(inputs)])  # new data into the static input, as real loops do
        graph.replay()

    flops = 6 * p["batch"] * p["width"] ** 2 * p["layers"]
    return Built(step, {"model_flops_per_step": flops, "capture_s": round(capture_s, 3)})


def build_sync_stall(dev: str, p: dict[str, Any]) -> Built:
    import torch
    import torch.nn.functional as F
    h, f, n = p["hidden"], p["ffn"], p["blocks"]
    blocks = torch.nn.ModuleList(
        torch.nn.ModuleList([torch.nn.LayerNorm(h), torch.nn.Linear(h, f), torch.nn.Linear(f, h)])
        for _ in range(n)).to(dev, _dtype(p))
    params = list(blocks.parameters())
    opt = torch.optim.SGD(params, lr=1e-4, momentum=0.9)
    x = torch.randn(p["batch"], h, device=dev, dtype=_dtype(p))
    history: list[float] = []

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        y = x
        for ln, up, down in blocks:
            y = y + down(F.gelu(up(ln(y))))
            peak = y.detach().abs().amax().item()  # the anti-pattern: a device-to-host read per block
            if not math.isfinite(peak):
                raise FloatingPointError(f"activation peak {peak}")
            history.append(peak)
        loss = y.float().pow(2).mean()
        loss.backward()
        for prm in params:  # host-side check, one sync per parameter tensor
            if not bool(torch.isfinite(prm.grad).all()):
                raise FloatingPointError("non-finite gradient")
        opt.step()
        history.append(loss.item())

    syncs = n + len(params) + 1
    flops = 6 * p["batch"] * 2 * h * f * n
    return Built(step, {"model_flops_per_step": flops, "syncs_per_step": syncs})


def _chain(x: Any, n: int) -> Any:
    import torch
    # One-flop ops, bounded: eager runs one kernel per op, each streaming all of x through DRAM. No
    # transcendentals: fused, 48 of them would make the single kernel compute-bound, not memory-bound.
    for k in range(n):
        x = (lambda t: t * 0.999, lambda t: t + 0.001, lambda t: t.clamp(-4.0, 4.0), torch.neg)[k % 4](x)
    return x


def _build_chain(dev: str, p: dict[str, Any], compiled: bool) -> Built:
    import torch
    x = torch.randn(p["numel"], device=dev, dtype=_dtype(p))
    n = p["chain"]
    fn = torch.compile(_chain) if compiled else _chain
    t0 = time.perf_counter()
    with torch.no_grad():
        fn(x, n)  # compile (or first-use allocation) before profiling starts, outside the active window
    _sync(dev)
    first_s = time.perf_counter() - t0
    elem = x.element_size() * p["numel"]

    def step() -> None:
        with torch.no_grad():
            fn(x, n)

    info = {"first_call_s": round(first_s, 3), "eager_kernels_per_step": n, "flops_per_step": n * p["numel"],
            "eager_dram_bytes_per_step": 2 * elem * n, "fused_dram_bytes_per_step": 2 * elem}
    return Built(step, info)


def build_memory_bound(dev: str, p: dict[str, Any]) -> Built:
    return _build_chain(dev, p, compiled=False)


def build_memory_bound_compiled(dev: str, p: dict[str, Any]) -> Built:
    return _build_chain(dev, p, compiled=True)


def build_two_stream(dev: str, p: dict[str, Any]) -> Built:
    import torch
    n = p["copy_mib"] * 2**20 // 4
    host = [torch.randn(n).pin_memory() for _ in range(2)]
    buf = [torch.empty(n, device=dev) for _ in range(2)]
    m = p["matmul"]
    a, b = (torch.randn(m, m, device=dev, dtype=_dtype(p)) for _ in range(2))
    c = torch.empty_like(a)
    copy_ms = _time_ms(lambda: buf[0].copy_(host[0], non_blocking=True), dev)
    mm_ms = _time_ms(lambda: torch.mm(a, b, out=c), dev)
    # Compute about twice the copy, so an overlapped copy is fully hidden whatever the link speed.
    n_mm = max(1, min(64, math.ceil(2 * copy_ms / mm_ms)))
    main, side = torch.cuda.current_stream(), torch.cuda.Stream()
    ready = [torch.cuda.Event() for _ in range(2)]
    free = [torch.cuda.Event() for _ in range(2)]
    buf[0].copy_(host[0])
    ready[0].record(main)
    free[1].record(main)
    acc = torch.zeros((), device=dev)
    counter = itertools.count()

    def step() -> None:
        k = next(counter) % 2
        nk = 1 - k
        with torch.cuda.stream(side):
            side.wait_event(free[nk])  # do not overwrite a buffer the compute stream may still read
            buf[nk].copy_(host[nk], non_blocking=True)
            ready[nk].record(side)
        main.wait_event(ready[k])
        acc.add_(buf[k].sum())
        for _ in range(n_mm):
            torch.mm(a, b, out=c)
        free[k].record(main)

    info = {"copy_ms": round(copy_ms, 3), "matmul_ms": round(mm_ms, 3), "matmuls_per_step": n_mm,
            "model_flops_per_step": 2 * m**3 * n_mm}
    return Built(step, info)


class TransformedBatches:
    """Map-style dataset whose item i is a whole (batch, features) float32 batch after `passes` passes of
    a CPU transform (three torch ops per pass). Module level so DataLoader workers can pickle it."""

    def __init__(self, base: Any, passes: int, length: int) -> None:
        self.base, self.passes, self.length = base, passes, length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int) -> Any:
        import torch
        x = self.base + float(i % 97) * 1e-3
        for _ in range(self.passes):
            x = torch.tanh(x * 1.01 + 0.01)
        return x


def _build_data(dev: str, p: dict[str, Any]) -> Built:
    import torch
    # One intra-op thread: the transform then costs the same here as in a DataLoader worker (which
    # sets one thread itself), so the starved run and its fix share one calibrated transform.
    torch.set_num_threads(1)
    model = _mlp(dev, p, p["features"], p["hidden"], p["layers"])
    opt = torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9)
    base = torch.randn(p["batch"], p["features"])
    x_dev = base.to(dev, _dtype(p))
    gpu_ms = _time_ms(lambda: _train_step(model, opt, x_dev), dev, reps=3, warm=2)
    probe = TransformedBatches(base, 4, 1)
    pass_ms = _time_ms(lambda: probe[0], "cpu", reps=3) / 4
    passes = max(1, math.ceil(p["cpu_over_gpu"] * gpu_ms / pass_ms))
    cpu_ms = passes * pass_ms
    workers = p["num_workers"]
    if workers == "auto":  # enough workers that a batch is ready in half a GPU step
        workers = max(1, min((os.cpu_count() or 2) - 2, math.ceil(2 * cpu_ms / gpu_ms)))
    pin = p["pin_memory"] and dev == "cuda"
    extra = {"prefetch_factor": p["prefetch_factor"]} if workers else {}
    loader = torch.utils.data.DataLoader(TransformedBatches(base, passes, 100_000), batch_size=None,
                                         num_workers=workers, pin_memory=pin, **extra)
    it = iter(loader)
    t0 = time.perf_counter()
    next(it)  # start the workers (fork, first batch) before profiling
    first_batch_s = time.perf_counter() - t0
    dtype = _dtype(p)

    def step() -> None:
        xb = next(it).to(dev, non_blocking=pin).to(dtype)
        _train_step(model, opt, xb)

    flops = 6 * p["batch"] * (p["features"] * p["hidden"] + p["layers"] * p["hidden"] ** 2)
    info = {"gpu_step_ms": round(gpu_ms, 3), "transform_pass_ms": round(pass_ms, 3),
            "transform_passes": passes, "transform_ms_per_batch": round(cpu_ms, 3),
            "num_workers": workers, "pin_memory": pin, "first_batch_s": round(first_batch_s, 3),
            "worker_batch_interval_ms": round(cpu_ms / workers, 3) if workers else None,
            "model_flops_per_step": flops, "shm_free_mib": _shm_free_mib()}
    return Built(step, info)


def _shm_free_mib() -> int | None:
    try:  # DataLoader workers hand batches over through /dev/shm; a small one kills them
        st = os.statvfs("/dev/shm")
        return st.f_bavail * st.f_frsize // 2**20
    except OSError:
        return None


BUILDERS = {"healthy_gemm": build_healthy_gemm, "launch_bound": build_launch_bound,
            "launch_bound_cudagraph": build_launch_bound_cudagraph, "sync_stall": build_sync_stall,
            "memory_bound": build_memory_bound, "memory_bound_compiled": build_memory_bound_compiled,
            "two_stream": build_two_stream, "data_starved": _build_data, "data_workers_pinned": _build_data}


# ------------------------------------------------------------------------------------------------- child

def _profile(dev: str, step: Any, active: int, path: Path) -> None:
    from torch.profiler import ProfilerActivity, profile, schedule
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev == "cuda" else [])
    written: list[bool] = []

    def ready(prof: Any) -> None:
        prof.export_chrome_trace(str(path))  # a .gz path makes PyTorch gzip the export itself
        written.append(True)

    # Our own handler, not tensorboard_trace_handler: that one puts the host name in the file name.
    with profile(activities=acts, schedule=schedule(wait=WAIT, warmup=WARMUP, active=active, repeat=1),
                 record_shapes=True, with_flops=True, on_trace_ready=ready) as prof:
        for i in range(WAIT + WARMUP + active):
            step()
            if i == WAIT + WARMUP - 1:
                # Loops that never sync let the CPU run steps ahead; draining here keeps GPU work of the
                # unrecorded steps out of the window, so the trace holds exactly the active steps' kernels.
                _sync(dev)
            prof.step()
    if not written:
        raise RuntimeError("profiler window closed without exporting a trace")


def _device_info(dev: str) -> dict[str, Any]:
    import torch
    if dev != "cuda":
        return {"device_name": f"cpu ({platform.machine()})"}
    prop = torch.cuda.get_device_properties(0)
    return {"device_name": prop.name, "capability": f"{prop.major}.{prop.minor}",
            "multiprocessors": prop.multi_processor_count, "memory_gib": round(prop.total_memory / 2**30, 1)}


def run_child(name: str, out: Path, dev: str, active: int) -> int:
    wl = BY_NAME[name]
    folder = out / name
    params = dict(wl.cuda if dev == "cuda" else wl.cpu or {})
    rec: dict[str, Any] = {
        "name": name, "cause": wl.cause, "role": wl.role, "counterpart": wl.counterpart, "shows": wl.shows,
        "device": dev, "params": params, "status": "failed", "error": None,
        "profiler": {"activities": ["CPU", "CUDA"] if dev == "cuda" else ["CPU"], "record_shapes": True,
                     "with_flops": True, "with_stack": False, "drained_before_active": True,
                     "schedule": {"wait": WAIT, "warmup": WARMUP, "active": active, "repeat": 1}},
        "trace_file": TRACE_NAME, "script": "scripts/record_gpu_traces.py",
        "recorded_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    t0 = time.perf_counter()
    code = 1
    try:
        import torch
        torch.manual_seed(0)
        cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        rec["versions"] = {"torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": cudnn,
                           "python": platform.python_version()}
        rec["versions"].update(_device_info(dev))  # after the versions, which then survive a device failure
        built = BUILDERS[name](dev, params)
        rec["calibration"] = built.info
        t1 = time.perf_counter()
        _profile(dev, built.step, active, folder / TRACE_NAME)
        rec["wall_s"] = {"setup": round(t1 - t0, 3), "profiled": round(time.perf_counter() - t1, 3)}
        rec["status"], code = "ok", 0
    except Exception as exc:  # recorded in workload.json so the parent reports why
        rec["error"] = "".join(traceback.format_exception_only(type(exc), exc)).strip()[:2000]
        traceback.print_exc()
    rec.setdefault("wall_s", {})["total"] = round(time.perf_counter() - t0, 3)
    _write_json(folder / "workload.json", rec)
    return code


# ------------------------------------------------------------------------------------------------ parent

def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")
    os.replace(tmp, path)  # never leave a half-written json for the archive


def _nvidia_smi() -> dict[str, Any]:
    fields = "name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit"
    try:
        q = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=30)
        plain = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"nvidia_smi": f"unavailable: {type(exc).__name__}"}
    gpus = [dict(zip(fields.split(","), (v.strip() for v in line.split(",")), strict=False))
            for line in q.stdout.splitlines() if line.strip()]
    cuda = next((ln.split("CUDA Version:")[1].split()[0] for ln in plain.stdout.splitlines()
                 if "CUDA Version:" in ln), None)
    return {"gpus": gpus, "driver": gpus[0].get("driver_version") if gpus else None,
            "driver_cuda": cuda}


def _identities() -> dict[str, str]:
    ids = {"hostname": socket.gethostname()}
    try:
        ids["user"] = getpass.getuser()
    except (KeyError, OSError):
        pass
    return {k: v for k, v in ids.items() if len(v) >= 4}  # shorter ones match too much to mean anything


def trace_stats(path: Path) -> dict[str, Any]:
    """Counts from an exported trace, for the summary and workload.json (reporting only, floats are fine)."""
    raw = gzip.decompress(path.read_bytes())
    doc = json.loads(raw)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    cats = Counter(str(e.get("cat", e.get("ph", ""))) for e in events)
    steps = sorted({e["name"] for e in events if str(e.get("name", "")).startswith("ProfilerStep#")})
    kernels = [e for e in events if e.get("cat") == "kernel"]
    ts = [float(e["ts"]) for e in events if "ts" in e and e.get("ph") == "X"]
    text = raw.decode("utf-8", "replace")
    return {"bytes_gz": path.stat().st_size, "bytes_json": len(raw), "events": len(events),
            "by_cat": dict(cats.most_common()), "profiler_steps": steps, "kernels": len(kernels),
            "kernel_ms": round(sum(float(e.get("dur", 0)) for e in kernels) / 1e3, 3),
            "span_ms": round((max(ts) - min(ts)) / 1e3, 3) if ts else 0.0,
            "identity_hits": {k: text.count(v) for k, v in _identities().items() if v in text}}


def scrub(path: Path) -> int:
    """Replace Kineto's top-level host_name and any whole JSON string equal to the host or user name with
    "redacted" (fixtures are published; MANIFEST.md does the same). Byte-level, so no number is reparsed
    through float64; returns how many strings were replaced."""
    raw = gzip.decompress(path.read_bytes())
    raw, n = re.subn(rb'("host_name"\s*:\s*)"(?!redacted")[^"]*"', rb'\1"redacted"', raw)
    for value in _identities().values():
        token = json.dumps(value).encode()
        n += raw.count(token)
        raw = raw.replace(token, b'"redacted"')
    if n:
        path.write_bytes(gzip.compress(raw, 9))  # the level PyTorch uses
    return n


def _stub(wl: Workload, dev: str, status: str, error: str) -> dict[str, Any]:
    return {"name": wl.name, "cause": wl.cause, "role": wl.role, "counterpart": wl.counterpart,
            "shows": wl.shows, "device": dev, "status": status, "error": error}


def _run_workload(wl: Workload, out: Path, dev: str, active: int, deadline: float) -> dict[str, Any]:
    folder = out / wl.name
    folder.mkdir(parents=True, exist_ok=True)
    for stale in (folder / TRACE_NAME, folder / "workload.json"):
        stale.unlink(missing_ok=True)
    timeout = min(wl.timeout_s, deadline - time.monotonic())
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", wl.name, "--out", str(out),
           "--device", dev, "--steps", str(active)]
    t0 = time.monotonic()
    with open(folder / "log.txt", "wb") as log:
        # Own session, so a timeout kills the child's DataLoader workers too (by its group id).
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc: int | str = proc.wait(timeout=max(timeout, 1))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            rc = f"timeout after {timeout:.0f} s"
    wall = round(time.monotonic() - t0, 1)
    rec_path = folder / "workload.json"
    if rec_path.exists():
        rec = json.loads(rec_path.read_text())
    else:  # the child died before it could write (crash, kill, timeout)
        rec = _stub(wl, dev, "failed", f"child exit: {rc}")
    if isinstance(rc, str):
        rec["status"], rec["error"] = "timeout", rc
    rec["child_wall_s"] = wall
    trace = folder / TRACE_NAME
    if trace.exists():
        redacted = scrub(trace)
        rec["trace"] = stats = trace_stats(trace) | {"redacted_strings": redacted}
        rec["checks"] = _checks(rec, stats, dev, active)
    elif rec["status"] == "ok":
        rec["status"], rec["error"] = "failed", "no trace written"
    _write_json(rec_path, rec)
    return rec


def _checks(rec: dict[str, Any], stats: dict[str, Any], dev: str, active: int) -> list[str]:
    """What a reader of the trace relies on; failures are warnings, the trace is kept."""
    warn = []
    if len(stats["profiler_steps"]) != active:
        warn.append(f"{len(stats['profiler_steps'])} ProfilerStep spans, expected {active}")
    if dev == "cuda" and stats["kernels"] == 0:
        warn.append("no kernel events (CUPTI off, or graph kernels not traced)")
    if stats["identity_hits"]:
        warn.append(f"host/user name still in the trace: {stats['identity_hits']}")
    if stats["bytes_gz"] > TRACE_WARN_BYTES:
        warn.append(f"trace is {stats['bytes_gz'] / 2**20:.1f} MiB gzipped; lower the sizes or steps")
    return warn


def _env(dev: str, records: list[dict[str, Any]]) -> dict[str, Any]:
    env: dict[str, Any] = {"device": dev, "python": platform.python_version(), "machine": platform.machine(),
                           "cpu_count": os.cpu_count(), "shm_free_mib": _shm_free_mib()}
    env.update(_nvidia_smi() if dev == "cuda" else {})
    ok = next((r for r in records if r.get("versions")), None)
    if ok:  # the children imported torch and touched the device; the parent never does
        env.update({k: ok["versions"].get(k) for k in ("torch", "cuda", "cudnn", "device_name", "capability",
                                                         "multiprocessors", "memory_gib")})
    return env


def _readme(env: dict[str, Any], records: list[dict[str, Any]], active: int) -> str:
    acts = "+".join(next((r["profiler"]["activities"] for r in records if "profiler" in r), ["?"]))
    lines = ["# Real GPU traces (issue 8)", "",
             "Recorded by `scripts/record_gpu_traces.py`; each folder holds `trace.pt.trace.json.gz` "
             f"(PyTorch profiler, {acts}, record_shapes, with_flops, schedule wait={WAIT} warmup={WARMUP} "
             f"active={active}; top-level host_name redacted) and `workload.json` (what ran and the "
             "cause it was built to show). `log.txt` files are run logs: do not commit them.", "",
             f"- device: {env.get('device_name')} (capability {env.get('capability')}, "
             f"{env.get('multiprocessors')} SMs, {env.get('memory_gib')} GiB)",
             f"- driver: {env.get('driver')} (driver CUDA {env.get('driver_cuda')})",
             f"- CUDA (PyTorch build): {env.get('cuda')}; cuDNN: {env.get('cudnn')}",
             f"- PyTorch: {env.get('torch')}; Python: {env.get('python')}", "",
             "| workload | cause shown | role | counterpart | status | kernels | trace KiB |",
             "|---|---|---|---|---|---|---|"]
    for r in records:
        t = r.get("trace", {})
        lines.append(f"| `{r['name']}` | {r['cause']} | {r['role']} | {r.get('counterpart') or ''} | "
                     f"{r['status']} | {t.get('kernels', '')} | "
                     f"{round(t['bytes_gz'] / 1024) if t else ''} |")
    return "\n".join(lines) + "\n"


def _archive(out: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".tmp")
    with tarfile.open(tmp, "w:gz") as tar:
        tar.add(out, arcname=out.name)
    os.replace(tmp, dest)


def run_parent(args: argparse.Namespace) -> int:
    out: Path = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    names = args.only.split(",") if args.only else [w.name for w in WORKLOADS]
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        print(f"unknown workload(s): {', '.join(unknown)}; known: {', '.join(BY_NAME)}", file=sys.stderr)
        return 2
    if args.steps < 1:
        print("--steps must be at least 1", file=sys.stderr)
        return 2
    if args.steps < DEFAULT_ACTIVE:
        print(f"note: --steps {args.steps} is below the {DEFAULT_ACTIVE} active steps issue 8 asks for")
    deadline = time.monotonic() + args.budget
    records = []
    for wl in WORKLOADS:
        if wl.name not in names:  # a rerun with --only keeps the earlier results in DIR in the summary
            old = out / wl.name / "workload.json"
            if old.exists():
                records.append(json.loads(old.read_text()))
            continue
        if args.device == "cpu" and wl.cpu is None:
            rec = _stub(wl, "cpu", "skipped", wl.cpu_note)
        elif time.monotonic() > deadline - 10:
            rec = _stub(wl, args.device, "skipped",
                        f"time budget of {args.budget} s spent; rerun with --only {wl.name}")
        else:
            print(f"[{time.strftime('%H:%M:%S')}] {wl.name} ...", flush=True)
            rec = _run_workload(wl, out, args.device, args.steps, deadline)
        if rec["status"] == "skipped":
            _write_json(out / wl.name / "workload.json", rec)
        records.append(rec)
        _print_row(rec)
    env = _env(args.device, records)
    for rec in records:  # the driver is known to the parent only (nvidia-smi)
        if "versions" in rec and env.get("driver"):
            rec["versions"]["driver"] = env["driver"]
            _write_json(out / rec["name"] / "workload.json", rec)
    _write_json(out / "env.json", env)
    summary = {"device": args.device, "active_steps": args.steps,
               "workloads": [{k: r.get(k) for k in ("name", "cause", "status", "error", "checks")}
                             for r in records]}
    _write_json(out / "summary.json", summary)
    (out / "README.md").write_text(_readme(env, records, args.steps))
    dest = args.archive or out.with_name(out.name + ".tar.gz")
    _archive(out, dest)
    ok = sum(r["status"] == "ok" for r in records)
    print(f"\n{ok}/{len(records)} ok; archive {dest} ({dest.stat().st_size / 2**20:.2f} MiB)")
    return 0 if all(r["status"] in ("ok", "skipped") for r in records) else 1


def _print_row(r: dict[str, Any]) -> None:
    t = r.get("trace", {})
    size = f"{t['bytes_gz'] / 1024:8.0f} KiB" if t else " " * 12
    extra = r.get("error") or "; ".join(r.get("checks", [])) or ""
    print(f"  {r['name']:24} {r['cause']:13} {r['status']:8} {size} kernels={t.get('kernels', '-'):<6} "
          f"events={t.get('events', '-'):<7} wall={r.get('child_wall_s', '-')} s  {extra}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="working folder for traces and metadata")
    ap.add_argument("--only", help=f"comma-separated subset of: {', '.join(BY_NAME)}")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--steps", type=int, default=DEFAULT_ACTIVE, help="active (recorded) steps per trace")
    ap.add_argument("--archive", type=Path, help="archive path (default: OUT.tar.gz)")
    ap.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S,
                    help="seconds after which no new workload starts")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return run_child(args.child, args.out.resolve(), args.device, args.steps)
    return run_parent(args)


if __name__ == "__main__":
    sys.exit(main())
