"""Host-side communication (issue 42): MPI / Gloo ranges on the host over a gap are comm-bound, with nothing
on the GPU's communication lane; NCCL and c10d ranges are not read this way (their data moves in kernels)."""

from __future__ import annotations

from _frames import annotation, kernel, make_events
from test_rules import US, gap, one

MS = 1_000 * US


def _gap():
    return gap(start=1 * MS, dur=5 * MS, next_launch_start_ns=6 * MS - 20 * US, next_launch_end_ns=6 * MS - 15 * US)


def test_mpi_ranges_over_the_gap_are_host_side_communication():
    trace = make_events([kernel(0, 1 * MS), annotation("MPI_Send", 1 * MS, 2 * MS),
                         annotation("MPI_Recv", 2 * MS + 10 * US, 6 * MS - 40 * US), kernel(6 * MS, 7 * MS)])
    row = one(_gap(), trace=trace)
    assert row["class"] == "comm-bound"
    assert row["evidence"].startswith("host-side communication: MPI_Recv") and "99% of the 5.00 ms gap" in row["evidence"]


def test_nccl_and_c10d_ranges_are_not_host_side_communication():
    trace = make_events([kernel(0, 1 * MS), annotation("c10d::allreduce_", 1 * MS, 6 * MS - 40 * US),
                         annotation("nccl:all_reduce", 1 * MS, 6 * MS - 40 * US), kernel(6 * MS, 7 * MS)])
    assert one(_gap(), trace=trace)["class"] != "comm-bound"


def test_a_short_mpi_call_in_a_long_gap_is_named_but_not_the_class():
    trace = make_events([kernel(0, 1 * MS), annotation("MPI_Recv", 1 * MS, 2 * MS), kernel(6 * MS, 7 * MS)])
    row = one(_gap(), trace=trace)
    assert row["class"] == "unattributed"
    assert "host-side communication 20% (MPI_Recv)" in row["evidence"]
