"""Mutations of XSpace protobufs (``.xplane.pb``) for the fuzz suite and ``scripts/fuzz_long.py``.

Byte mutations break the wire format anywhere; ``hostile`` writes a well-formed XSpace with values no
profiler writes (times at the int64 edges, negative durations, undefined metadata ids, stats of the
wrong type, control characters in names). Bases are written by ``xplane_synth`` (plus the shared GEMM
sample when ../shared is present).
"""

from __future__ import annotations

import random

from conftest import SHARED_TRACES
from fuzz_mutations import COMMANDS
from xplane_synth import PlaneWriter, space

# scan's discovery of .xplane.pb files comes with the content-based discovery of issue 45 (another
# branch): until then scan skips them and reports no trace, so scan is left out here.
XPLANE_COMMANDS = [c for c in COMMANDS if c != "scan"]
BYTE_MUTATIONS = ("truncate", "flip", "splice", "zero-run", "wire-type", "hostile")
_EDGES = [0, 1, -1, 2**31, 2**53 + 1, 2**62, 2**63 - 1, -(2**63)]
_NAMES = ["", "\x1b]0;pwned\x07", "\x9b31m", "a" * 5000, "/device:GPU:0", "\udcff".encode("utf-8", "surrogatepass")
          .decode("utf-8", "replace"), "Stream #99999999999999999999(Kernel)"]


def _base_space(rnd: random.Random) -> bytes:
    gpu = PlaneWriter("/device:GPU:0", 1)
    gpu.plane_stat("device_vendor", "Nvidia")
    host = PlaneWriter("/host:CPU", 2)
    kern, calls = [], []
    for i in range(6):
        kern.append((f"kernel_{i % 3}", 1_000_000 * i, 500_000, {"correlation_id": i, "kernel_details": "grid:1,1,1"}))
        calls.append(("cudaLaunchKernel", 1_000_000 * i - 200_000, 10_000, {"correlation_id": i}))
    gpu.line(7, "Stream #7(Kernel)", 100, kern)
    host.line(1, "Host Threads/1", 100, calls)
    tpu = PlaneWriter("/device:TPU:0", 3)
    tpu.plane_stat("device_type_string", "TPU v6 Lite")
    tpu.line(2, "XLA Modules", 0, [("jit_f(1)", 10**9 * k, 10**8, {}) for k in range(3)])
    tpu.line(3, "XLA Ops", 0, [("%all-reduce", 10**9 * k, 10**7, {}, {"hlo_category": "all-reduce"}, "all-reduce")
                               for k in range(3)])
    env = PlaneWriter("Task Environment")
    env.plane_stat("profile_start_time", ("u", 1_700_000_000_000_000_000))
    return space([gpu, host, tpu, env])


def _hostile_space(rnd: random.Random) -> tuple[bytes, str]:
    gpu = PlaneWriter(rnd.choice(["/device:GPU:0", "/device:TPU:7", "/device:GPU:2147483648", "/host:CPU"]), 1)
    gpu.plane_stat(rnd.choice(["core_count", "memory_size", "peak_teraflops_per_second", "device_type_string"]),
                   rnd.choice([-1, 2**63 - 1, 1e308, float("nan"), "x" * 100, b"\xff\x00"]))
    ts = rnd.choice(_EDGES)
    evs = []
    for _ in range(rnd.randint(0, 5)):
        stats = {rnd.choice(["correlation_id", "step_num", "memcpy_details", "kernel_details", "group_id"]):
                 rnd.choice([*_EDGES, "text", ("u", 2**64 - 1), 1.5, b"\x00\xff", ("ref", "memcpy_details")])}
        evs.append((rnd.choice(_NAMES), rnd.choice(_EDGES), rnd.choice(_EDGES), stats,
                    {"hlo_category": rnd.choice(["all-reduce", "", "copy"])}, rnd.choice(["", "x"])))
    gpu.line(rnd.choice(_EDGES), rnd.choice(["Stream #7(Kernel)", "XLA Ops", "Steps", "XLA Modules", *_NAMES]), ts, evs)
    if rnd.random() < 0.3:  # events naming metadata the plane never defines
        gpu.event_meta.clear()
    data = space([gpu])
    return data, f"hostile XSpace (line timestamp {ts}, {len(evs)} events)"


def mutate_xplane(rnd: random.Random, data: bytes, kind: str) -> tuple[bytes, str]:
    if kind == "hostile":
        return _hostile_space(rnd)
    b = bytearray(data)
    if kind == "truncate":
        at = rnd.randrange(1, len(b))
        return bytes(b[:at]), f"truncated at byte {at} of {len(b)}"
    if kind == "flip":
        n = rnd.randint(1, 8)
        for _ in range(n):
            b[rnd.randrange(8, len(b))] = rnd.randrange(256)
        return bytes(b), f"{n} byte flips"
    if kind == "splice":
        a = rnd.randrange(len(b))
        z = rnd.randrange(a, min(len(b), a + 200) + 1)
        at = rnd.randrange(len(b))
        return bytes(b[:at] + b[a:z] + b[at:]), f"bytes {a}:{z} copied to {at}"
    if kind == "zero-run":
        a = rnd.randrange(8, len(b))
        n = rnd.randint(1, 64)
        b[a:a + n] = bytes(min(n, len(b) - a))
        return bytes(b), f"{n} zero bytes at {a}"
    # wire-type: a byte that reads as a tag gets another wire type (3, 4: groups; 6, 7: invalid)
    tags = [i for i in range(8, len(b)) if b[i] in (0x08, 0x10, 0x18, 0x12, 0x1A, 0x22)]
    i = rnd.choice(tags)
    b[i] = (b[i] & ~7) | rnd.choice([1, 3, 4, 5, 6, 7])
    return bytes(b), f"tag byte {i} given another wire type"


class Bases(dict):
    """The base inputs; a short repr, so a failing example does not print the bytes."""

    def __repr__(self) -> str:
        return f"<XSpace bases {sorted(self)}>"


def xplane_bases() -> Bases:
    out = Bases(synthetic=_base_space(random.Random(0)))
    gemm = SHARED_TRACES / "formats" / "tracelens_jax08_gemm_mi300x.xplane.pb"
    if gemm.exists():
        out["gemm"] = gemm.read_bytes()
    return out
