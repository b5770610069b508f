"""The collective table: exposure, message sizes from either record site, nccl-tests bandwidths."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from scoreboard_frames import ev, kernel, make_trace

from traceread import kernel_classes as kc
from traceread import schema
from traceread.metrics.collectives import bus_factor, collective_table

AR = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
AG = "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
SR = "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)"


def _trace(steps_warmup_send: bool = False):
    rows = [
        kernel("sm90_xmma_gemm_bf16", 0, 10_000),  # 0: compute
        ev(schema.LANE_CPU_THREAD, "record_param_comms", 4_000, 4_500, external_id=77),  # 1
        ev(schema.LANE_GPU_COMM, AR, 5_000, 25_000, external_id=77),  # 2: 5 us hidden, 15 us exposed
        ev(schema.LANE_GPU_COMM, AG, 30_000, 40_000),  # 3: args on the kernel itself, fully exposed
        kernel("sm90_xmma_gemm_bf16", 28_000, 45_000),  # 4: hides the all-gather completely
        ev(schema.LANE_GPU_COMM, SR, 50_000, 51_000),  # 5: no args
        ev(schema.LANE_GPU_COMM, AR, 60_000, 80_000, device=1),  # 6: another device, no compute there
    ]
    args = [
        {"row": 1, "collective": "allreduce", "in_nelems": 1_000_000, "out_nelems": 1_000_000, "dtype": "BFloat16",
         "group_size": 8, "group_name": "0", "group_desc": "default_pg"},
        {"row": 3, "collective": "all_gather", "in_nelems": 1_000, "out_nelems": 8_000, "dtype": "Float",
         "group_size": 8, "group_name": "1", "group_desc": "dp"},
    ]
    return make_trace(rows, world_size=8, devices=(0, 1), side={"collective_args": args})


def test_bus_factors() -> None:
    assert bus_factor(kc.COLL_ALL_REDUCE, 8) == pytest.approx(2 * 7 / 8)
    for c in (kc.COLL_ALL_GATHER, kc.COLL_REDUCE_SCATTER, kc.COLL_ALL_TO_ALL):
        assert bus_factor(c, 4) == pytest.approx(3 / 4)
    assert bus_factor(kc.COLL_SEND_RECV, 2) == 1.0 and bus_factor(kc.COLL_BROADCAST, 8) == 1.0
    assert math.isnan(bus_factor(kc.COLL_ALL_REDUCE, float("nan")))


def test_table_by_type_and_group() -> None:
    t = collective_table(_trace()).set_index(["collective", "group"])
    ar = t.loc[("all-reduce", "0")]
    assert ar["count"] == 1 and ar["total_ns"] == 20_000 and ar["exposed_ns"] == 15_000
    assert ar["dtype"] == "BFloat16" and ar["msg_bytes"] == 2_000_000 and ar["group_size"] == 8
    assert ar["algbw_gbps"] == pytest.approx(100.0) and ar["busbw_gbps"] == pytest.approx(175.0)
    ag = t.loc[("all-gather", "1")]
    assert ag["exposed_ns"] == 0 and ag["msg_bytes"] == 32_000 and ag["group_desc"] == "dp"
    assert ag["busbw_gbps"] == pytest.approx(3.2 * 7 / 8)
    sr = t.loc[("send-recv", "")]
    assert sr["count"] == 1 and math.isnan(sr["algbw_gbps"]) and sr["exposed_ns"] == 1_000
    # The device-1 all-reduce has no recorded args: its own row, the whole of it exposed.
    other = t.loc[("all-reduce", "")]
    assert other["exposed_ns"] == 20_000 and other["exposed_frac"] == pytest.approx(1.0)
    assert t["total_ns"].sum() == 20_000 + 10_000 + 1_000 + 20_000


def test_steps_restrict_to_steady_steps() -> None:
    steps = pd.DataFrame([
        {"rank": 0, "device": 0, "step": 0, "start_ns": 0, "end_ns": 45_000, "warmup": False},
        {"rank": 0, "device": 0, "step": 1, "start_ns": 45_000, "end_ns": 55_000, "warmup": True},
    ])
    t = collective_table(_trace(), steps)
    assert set(t["collective"]) == {"all-reduce", "all-gather"} and t["count"].sum() == 2


def test_no_communication() -> None:
    t = collective_table(make_trace([kernel("gemm", 0, 10)]))
    assert t.empty and "busbw_gbps" in t.columns
