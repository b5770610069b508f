"""Typed msgspec structs for Kineto events: only the fields the frame needs are decoded.

The decoder dispatches on ``ph``: rows (``X``, instants) and metadata get their fields, every
other phase (flows are much of a Kineto file) becomes an empty object with its values skipped.

Two families of row structs differ only in how ``ts``/``dur`` arrive. :data:`AnyEvent` keeps them
as raw number text (exact for any format: float microseconds become ns digit by digit).
:data:`AnyEventIntTime` takes them as JSON integers, which 2020-24 files write: msgspec builds
the ints directly (no text made and parsed again per value); a float anywhere fails
the chunk's decode, which then goes the text way.
"""

from __future__ import annotations

import functools
import operator
import types
from typing import Any

import msgspec
from msgspec import Raw, Struct, field

EMPTY_RAW = Raw(b"")
Id = int | str  # ids are ints, but old/ROCm writers put strings ("stream 7", "0x7f..")


class Args(Struct, frozen=True, gc=False):
    """The args keys the frame and its side tables use; all others are skipped by the decoder."""

    # read for every row: first, so they share the object's first cache line
    external_id: Id = field(name="External id", default=-1)
    correlation: Id = -1
    input_dims: Raw = field(name="Input Dims", default=EMPTY_RAW)
    input_dims_old: Raw = field(name="Input dims", default=EMPTY_RAW)
    external_id_old: Id = field(name="external id", default=-1)
    device: Id = -1
    stream: Id = -1
    grid: Raw = EMPTY_RAW
    block: Raw = EMPTY_RAW
    registers: Id = field(name="registers per thread", default=-1)
    shared_mem: Id = field(name="shared memory", default=-1)
    nbytes: Id = field(name="bytes", default=-1)
    input_types: Raw = field(name="Input type", default=EMPTY_RAW)
    collective: str = field(name="Collective name", default="")
    in_nelems: Id = field(name="In msg nelems", default=-1)
    out_nelems: Id = field(name="Out msg nelems", default=-1)
    in_size: Id = field(name="In msg size", default=-1)
    out_size: Id = field(name="Out msg size", default=-1)
    dtype: str = ""
    group_size: Id = field(name="Group size", default=-1)
    pg_name: Id = field(name="Process Group Name", default="")
    pg_id: Id = field(name="Process Group ID", default="")
    pg_desc: str = field(name="Process Group Description", default="")
    seq: Id = field(name="Seq", default=-1)  # record_param_comms' collective sequence number (PyTorch 2026-03+)
    # a ``Stream Wait Event`` cuda_sync row: the stream its event was recorded on, and that record call's correlation
    wait_on_stream: Id = -1
    wait_record_corr: Id = field(name="wait_on_cuda_event_record_corr_id", default=-1)
    name: str = ""  # metadata rows: thread/process name
    labels: str = ""  # metadata rows: process labels ("GPU 0", "CPU")


NO_ARGS = Args()


NO_TIME = -(2**63)  # an integer-time field that was absent (no real timestamp is this)


# The fields a row event carries, in this order, twice: here with ``ts``/``dur`` as raw number
# text, and in :class:`RowIntTime` as JSON integers. Written out as class bodies (not built by
# msgspec.defstruct) so that type checkers see the structs; keep the two lists alike.
class _EventFields(Struct, gc=False):
    """The row fields shared by the tagged row structs and the untagged :class:`Event`."""

    cat: str = ""
    name: str = ""
    pid: Id = -1
    tid: Id = -1
    ts: Raw = EMPTY_RAW
    dur: Raw = EMPTY_RAW
    args: Args = NO_ARGS


class Event(_EventFields, gc=False):
    """One event of any phase, untyped by phase: only for events the tagged decode rejected."""

    ph: str = ""


class Row(_EventFields, tag_field="ph", tag="X", gc=False):
    """A complete (``X``) event; :class:`Instant` shares its fields."""


class Instant(Row, tag="i"):
    pass


class InstantOld(Row, tag="I"):  # the deprecated spelling of an instant
    pass


class RowIntTime(Struct, tag_field="ph", tag="X", gc=False):
    """:class:`Row` with ``ts``/``dur`` as JSON integers (microseconds), absent ones ``NO_TIME``."""

    cat: str = ""
    name: str = ""
    pid: Id = -1
    tid: Id = -1
    ts: int = NO_TIME
    dur: int = NO_TIME
    args: Args = NO_ARGS


class InstantIntTime(RowIntTime, tag="i"):
    pass


class InstantOldIntTime(RowIntTime, tag="I"):
    pass


class Meta(Struct, tag_field="ph", tag="M", gc=False):
    name: str = ""
    pid: Id = -1
    tid: Id = -1
    args: Args = NO_ARGS


class Skipped(Struct, tag_field="ph", tag="", gc=False):
    """An event of a phase that is not a row (flows, counters, async, ...): nothing is kept."""


class CounterSample(Struct, tag_field="ph", tag="C", gc=False):
    """A counter sample (``ph: C``: MTIA/XPU counters, memory counters): not a row, but counted."""


# every other phase of the Chrome trace event format
_SKIPPED = [Skipped] + [msgspec.defstruct(f"Skipped_{i}", [], bases=(Skipped,), tag=ph, gc=False)
                        for i, ph in enumerate("BEbnesStTpFfPONDRcVv()")]
# 0 row, 1 instant, 2 metadata, 3 skipped, 4 counter (skipped too, and counted)
_KIND: dict[type, int] = {Row: 0, Instant: 1, InstantOld: 1, RowIntTime: 0, InstantIntTime: 1, InstantOldIntTime: 1, Meta: 2,
         **{t: 3 for t in _SKIPPED}, CounterSample: 4}
INT_TIME_TYPES = (RowIntTime, InstantIntTime, InstantOldIntTime)
# The unions the decoders take (runtime values: the skipped phases' structs are built above).
AnyEvent: Any = functools.reduce(operator.or_, [Row, Instant, InstantOld, Meta, CounterSample, *_SKIPPED])
AnyEventIntTime: Any = functools.reduce(operator.or_, [RowIntTime, InstantIntTime, InstantOldIntTime, Meta, CounterSample,
                                                        *_SKIPPED])
EVENT_LIST: Any = types.GenericAlias(list, (AnyEvent,))  # list[AnyEvent], which a type checker reads as a type
EVENT_LIST_INT_TIME: Any = types.GenericAlias(list, (AnyEventIntTime,))


def wait_rows(rows: list[int], args: Any) -> list[tuple]:
    """``(row, wait_on_stream, record correlation)`` for the ``rows`` (one ``args`` each) that name a stream wait's
    event record (Kineto's ``Stream Wait Event`` cuda_sync rows; -1 where the trace recorded none)."""
    return [(i, a.wait_on_stream, a.wait_record_corr) for i, a in zip(rows, args, strict=True)
            if a.wait_record_corr != -1 or a.wait_on_stream != -1]


def collective_rows(rows: list[int], args: Any) -> list[tuple]:
    """Collective-args tuples for the candidate ``rows`` (kernels, ``record_param_comms``) whose
    ``args`` (one per row) carry any."""
    return [
        (i, a.collective, a.in_nelems if a.in_nelems != -1 else a.in_size,
         a.out_nelems if a.out_nelems != -1 else a.out_size, a.dtype, a.group_size,
         str(a.pg_name if a.pg_name != "" else a.pg_id), a.pg_desc, a.seq)
        for i, a in zip(rows, args, strict=True)
        if a.collective or a.in_nelems != -1 or a.in_size != -1
    ]
