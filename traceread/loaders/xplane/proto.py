"""The XSpace protobuf messages, built at run time from a descriptor written here.

The field numbers are those of ``xplane.proto`` (package ``tensorflow.profiler``, in TensorFlow's
``tsl/profiler/protobuf``); no generated module, JAX, TensorFlow or xprof is needed, only the
``protobuf`` runtime that ``perfetto`` already brings (its upb backend parses in C).
"""

from __future__ import annotations

from functools import cache
from typing import Any

_I64, _U64, _DBL, _STR, _BYTES, _MSG = 3, 4, 1, 9, 12, 11  # FieldDescriptorProto.Type
_OPT, _REP = 1, 3  # labels

# message -> [(field name, number, type, label, message type name or None, oneof index or None)]
_MESSAGES: dict[str, list[tuple[str, int, int, int, str | None, int | None]]] = {
    "XSpace": [("planes", 1, _MSG, _REP, "XPlane", None), ("errors", 2, _STR, _REP, None, None),
               ("warnings", 3, _STR, _REP, None, None), ("hostnames", 4, _STR, _REP, None, None)],
    "XPlane": [("id", 1, _I64, _OPT, None, None), ("name", 2, _STR, _OPT, None, None),
               ("lines", 3, _MSG, _REP, "XLine", None),
               ("event_metadata", 4, _MSG, _REP, "XPlane.EventMetadataEntry", None),
               ("stat_metadata", 5, _MSG, _REP, "XPlane.StatMetadataEntry", None),
               ("stats", 6, _MSG, _REP, "XStat", None)],
    "XLine": [("id", 1, _I64, _OPT, None, None), ("display_id", 10, _I64, _OPT, None, None),
              ("name", 2, _STR, _OPT, None, None), ("display_name", 11, _STR, _OPT, None, None),
              ("timestamp_ns", 3, _I64, _OPT, None, None), ("duration_ps", 9, _I64, _OPT, None, None),
              # The events stay serialized: :mod:`wire` decodes all of them at once (see decode).
              ("events", 4, _BYTES, _REP, None, None)],
    "XEvent": [("metadata_id", 1, _I64, _OPT, None, None), ("offset_ps", 2, _I64, _OPT, None, 0),
               ("num_occurrences", 5, _I64, _OPT, None, 0), ("duration_ps", 3, _I64, _OPT, None, None),
               ("stats", 4, _MSG, _REP, "XStat", None)],
    "XStat": [("metadata_id", 1, _I64, _OPT, None, None), ("double_value", 2, _DBL, _OPT, None, 0),
              ("uint64_value", 3, _U64, _OPT, None, 0), ("int64_value", 4, _I64, _OPT, None, 0),
              ("str_value", 5, _STR, _OPT, None, 0), ("bytes_value", 6, _BYTES, _OPT, None, 0),
              ("ref_value", 7, _U64, _OPT, None, 0)],
    "XEventMetadata": [("id", 1, _I64, _OPT, None, None), ("name", 2, _STR, _OPT, None, None),
                       ("display_name", 4, _STR, _OPT, None, None), ("metadata", 3, _BYTES, _OPT, None, None),
                       ("stats", 5, _MSG, _REP, "XStat", None), ("child_id", 6, _I64, _REP, None, None)],
    "XStatMetadata": [("id", 1, _I64, _OPT, None, None), ("name", 2, _STR, _OPT, None, None),
                      ("description", 3, _STR, _OPT, None, None)],
}
_ONEOFS = {"XEvent": ["data"], "XStat": ["value"]}
_MAPS = {"EventMetadataEntry": "XEventMetadata", "StatMetadataEntry": "XStatMetadata"}
PACKAGE = "traceread_xplane"  # a private package name: never clashes with a real tensorflow.profiler pool


def _add_fields(msg: Any, fields: list[tuple[str, int, int, int, str | None, int | None]]) -> None:
    for name, number, ftype, label, type_name, oneof in fields:
        f = msg.field.add(name=name, number=number, type=ftype, label=label)
        if type_name:
            f.type_name = f".{PACKAGE}.{type_name}"
        if oneof is not None:
            f.oneof_index = oneof


@cache
def message_classes() -> dict[str, Any]:
    """The message classes by name (``XSpace``, ``XPlane``...), built once per process."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fdp = descriptor_pb2.FileDescriptorProto(name="traceread_xplane.proto", package=PACKAGE, syntax="proto3")
    for name, fields in _MESSAGES.items():
        msg = fdp.message_type.add(name=name)
        for oneof in _ONEOFS.get(name, []):
            msg.oneof_decl.add(name=oneof)
        _add_fields(msg, fields)
        if name == "XPlane":
            for entry, value in _MAPS.items():
                nested = msg.nested_type.add(name=entry)
                nested.options.map_entry = True
                _add_fields(nested, [("key", 1, _I64, _OPT, None, None), ("value", 2, _MSG, _OPT, value, None)])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.{name}"))
            for name in _MESSAGES}
