"""Collective identity: the host op that launched a communication kernel names its collective."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from _frames import annotation, api, comm, kernel, make_events, op

from traceread import kernel_classes as kc
from traceread.engine.collective_identity import host_name_type, identify, step_p2p_counts
from traceread.engine.gaps import find_gaps, with_fractions

SENDRECV = "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)"
ALLREDUCE = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"


@pytest.mark.parametrize("name,expected", [
    ("c10d::alltoall_base_", ("all-to-all", "host-range")),
    ("nccl:all_to_all", ("all-to-all", "host-range")),
    ("c10d::_allgather_base_", ("all-gather", "host-range")),
    ("nccl:_all_gather_base", ("all-gather", "host-range")),
    ("_c10d_functional::all_gather_into_tensor", ("all-gather", "host-range")),
    ("c10d::reduce_scatter_tensor_coalesced_", ("reduce-scatter", "host-range")),
    ("c10d::allreduce_", ("all-reduce", "host-range")),
    ("c10d::broadcast_", ("broadcast", "host-range")),
    ("c10d::send", ("send", "host-range")),
    ("c10d::recv_", ("recv", "host-range")),
    ("nccl:recv", ("recv", "host-range")),
    ("batch_isend_irecv", ("send-recv", "host-range")),
    ("ncclAllReduce", ("all-reduce", "nccl-range")),
    ("ncclReduceScatter", ("reduce-scatter", "nccl-range")),
    # NCCL-level p2p names and grouping never decide on their own; other ops name nothing.
    ("ncclSend", ("", "")), ("ncclRecv", ("", "")), ("ncclGroupEnd", ("", "")),
    ("nccl:coalesced", ("", "")), ("c10d::barrier", ("", "")), ("record_param_comms", ("", "")),
    ("aten::scatter", ("", "")), ("aten::all", ("", "")),
])
def test_host_name_type(name, expected):
    assert host_name_type(name) == expected


def _by_corr(trace, ident):
    corr = trace.events["correlation"].to_numpy()[ident.rows]
    return {int(c): (t, s) for c, t, s in zip(corr, ident.collective, ident.source, strict=True)}


def test_kineto_like_containment_external_id_and_args():
    rows = [
        # An all-to-all: framework op, record_param_comms without a Collective name, PyTorch's
        # annotation; the launch's and kernel's External id match no host op (as in real traces).
        dict(op("c10d::alltoall_base_", 100, 400), external_id=10),
        dict(op("record_param_comms", 110, 390), external_id=11),
        dict(annotation("nccl:all_to_all", 120, 380), external_id=12),
        dict(api("cudaLaunchKernel", 200, 220, corr=5), external_id=5005),
        dict(comm(500, 900, SENDRECV, corr=5), external_id=5005),
        # A pipeline send: the host names the direction; the External id links the op.
        dict(op("c10d::send", 1_000, 1_300), external_id=20),
        dict(api("cudaLaunchKernel", 1_100, 1_120, corr=6), external_id=20),
        dict(comm(1_200, 1_800, SENDRECV, corr=6), external_id=20),
        # No host op at all: the kernel name decides (point-to-point).
        api("cudaLaunchKernel", 2_000, 2_020, corr=7),
        comm(2_100, 2_600, SENDRECV, corr=7),
        # Another thread's launch inside thread 1's all-to-all window is not contained by it.
        dict(op("c10d::alltoall_base_", 3_000, 3_400), external_id=30),
        api("cudaLaunchKernel", 3_100, 3_120, corr=8, tid=2),
        comm(3_200, 3_900, SENDRECV, corr=8),
        # The External id names record_param_comms, whose recorded args say all-to-all.
        dict(op("c10d::broadcast_", 4_000, 4_400), external_id=40),
        dict(op("record_param_comms", 4_050, 4_350), external_id=41),
        dict(api("cudaLaunchKernel", 4_100, 4_120, corr=9), external_id=41),
        dict(comm(4_200, 4_900, SENDRECV, corr=9), external_id=41),
        # An External id that collides with an unrelated op's (not running at the launch) is no link.
        dict(op("c10d::allreduce_", 7_000, 7_100), external_id=70),
        api("cudaLaunchKernel", 8_100, 8_120, corr=11),
        dict(comm(8_200, 8_900, SENDRECV, corr=11), external_id=70),
        # Kernel's own recorded Collective name beats everything.
        dict(op("c10d::send", 6_000, 6_300), external_id=60),
        api("cudaLaunchKernel", 6_100, 6_120, corr=10),
        dict(comm(6_200, 6_900, ALLREDUCE, corr=10), external_id=-1),
    ]
    tr = make_events(rows)
    ev = tr.events
    rpc41 = int(np.flatnonzero((ev["name"] == "record_param_comms").to_numpy() & (ev["external_id"] == 41).to_numpy())[0])
    k10 = int(np.flatnonzero((ev["correlation"] == 10).to_numpy() & (ev["lane"] == "gpu_comm").to_numpy())[0])
    side = {"collective_args": pd.DataFrame({
        "row": np.array([rpc41, k10], np.int64), "collective": pd.Categorical(["all_to_allv", "allreduce"]),
        "in_nelems": np.array([-1, -1], np.int64), "out_nelems": np.array([-1, -1], np.int64),
        "dtype": pd.Categorical(["", ""]), "group_size": np.array([-1, -1], np.int64),
        "group_name": pd.Categorical(["", ""]), "group_desc": pd.Categorical(["", ""])}).sort_values("row")}
    tr = make_events(rows, side=side)
    got = _by_corr(tr, identify(tr))
    assert got[5] == ("all-to-all", "host-range")
    assert got[6] == ("send", "host-op")  # its External id names the op
    assert got[7] == ("send-recv", "kernel-name")
    assert got[8] == ("send-recv", "kernel-name")
    assert got[9] == ("all-to-all", "host-op")
    assert got[10] == ("all-reduce", "host-args")
    assert got[11] == ("send-recv", "kernel-name")


def test_nsys_like_nvtx_ranges():
    rows = [
        # emit_nvtx op range around NCCL's own NVTX ranges: the framework range decides.
        op("c10d::alltoall_base_", 100, 1_000),
        annotation("ncclGroupStart", 110, 120),
        annotation("ncclSend", 130, 150), annotation("ncclRecv", 160, 180),
        annotation("ncclGroupEnd", 190, 400),
        api("cudaLaunchKernel_v7000", 200, 230, corr=1),
        comm(300, 900, SENDRECV, corr=1),
        # Only NCCL's grouped p2p ranges: they do not decide; the kernel is point-to-point.
        annotation("ncclGroupStart", 2_000, 2_010),
        annotation("ncclSend", 2_020, 2_050), annotation("ncclGroupEnd", 2_060, 2_300),
        api("cudaLaunchKernel_v7000", 2_100, 2_130, corr=2),
        comm(2_200, 2_800, SENDRECV, corr=2),
        # An NCCL collective range does decide.
        annotation("ncclAllReduce", 3_000, 3_300),
        api("cudaLaunchKernel_v7000", 3_100, 3_130, corr=3),
        comm(3_200, 3_800, ALLREDUCE, corr=3),
    ]
    tr = make_events(rows, fmt="nsys")
    got = _by_corr(tr, identify(tr))
    assert got[1] == ("all-to-all", "host-range")
    assert got[2] == ("send-recv", "kernel-name")
    assert got[3] == ("all-reduce", "nccl-range")


def test_gaps_count_all_to_all_as_collective_and_p2p_per_step():
    rows = [
        kernel(0, 1_000), kernel(200_000, 201_000),  # a 199 us gap between two compute kernels
        op("c10d::alltoall_base_", 100, 900),
        api("cudaLaunchKernel", 200, 300, corr=1),
        comm(1_000, 199_000, SENDRECV, corr=1),
        kernel(300_000, 301_000), kernel(500_000, 501_000),  # second step: a pipeline recv
        op("c10d::recv_", 300_100, 300_900),
        api("cudaLaunchKernel", 300_200, 300_300, corr=2),
        comm(301_000, 499_000, SENDRECV, corr=2),
    ]
    tr = make_events(rows)
    steps = pd.DataFrame({"rank": np.int32([0, 0]), "device": np.int32([0, 0]), "step": [0, 1],
                          "start_ns": [0, 300_000], "end_ns": [201_000, 501_000],
                          "warmup": [False, False], "outlier": [False, False]})
    assert step_p2p_counts(tr, steps).tolist() == [0, 1]
    g = with_fractions(find_gaps(tr, steps)).set_index("step")
    assert g.loc[0, "comm_collective_frac"] == pytest.approx(198_000 / 199_000)
    assert g.loc[0, "comm_p2p_ns"] == 0
    assert g.loc[0, "comm_type"] == kc.COLL_ALL_TO_ALL
    assert g.loc[1, "comm_p2p_frac"] == pytest.approx(198_000 / 199_000)
    assert g.loc[1, "comm_type"] == kc.COLL_RECV
    assert g["step_p2p_count"].tolist() == [0, 1]
