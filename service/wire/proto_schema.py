"""JSON Schema for a protobuf message, generated from its descriptor, in protobuf's JSON form.

The generated `_pb2` modules carry no comments, so the descriptions come from compiling the `.proto` source
again with its source info (grpc_tools, already a dependency) when the source is at hand; without it the schema
keeps its structure, enum choices and units. Field names are the proto names, which `json_format.ParseDict`
accepts and `MessageToDict(preserving_proto_field_name=True)` emits.

`output=True` describes what `MessageToDict` emits (64-bit integers as strings, NaN and infinities as strings,
every enum value); the default describes what a caller should send (numbers, the enum values that mean
something: `*_UNSPECIFIED` is what leaving a field out means).
"""

from __future__ import annotations

import functools
import tempfile
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor, FileDescriptor

# A hook may narrow a field's schema (bounds, formats): it gets the field's path (`brief.model.params_billion`,
# `quotes[].gpu`), its descriptor and the schema so far, and edits the schema in place.
Hook = Callable[[str, FieldDescriptor, dict[str, Any]], None]

# Units follow from the contract's naming convention (shared/design/contract.md: units in names). Longest suffix
# first; a field whose name ends in none of these gets no unit.
_UNIT_SUFFIXES: tuple[tuple[str, str], ...] = (
    ("_usd_per_tflop_hour", "USD per dense TFLOP-hour"),
    ("_usd_per_million_tokens", "USD per 1M tokens"),
    ("usd_per_hour", "USD per hour"),
    ("_usd_per_kwh", "USD per kWh"),
    ("hours_per_month", "hours per month"),
    ("requests_per_second", "requests per second"),
    ("requests_per_month", "requests per month"),
    ("usd_per_unit", "USD per accepted unit"),
    ("params_billion", "billion parameters"),
    ("tokens_billion", "billion tokens"),
    ("_tokens", "tokens"),
    ("_ms", "milliseconds"),
    ("_months", "months"),
    ("_days", "days"),
    ("_hours", "hours"),
    ("_gb", "GB"),
    ("_gbs", "GB/s"),
    ("_tbs", "TB/s"),
    ("_usd", "USD"),
    ("_w", "watts"),
)

_INT64 = (FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_SINT64,
          FieldDescriptor.TYPE_FIXED64, FieldDescriptor.TYPE_SFIXED64)
_INT32 = (FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_SINT32,
          FieldDescriptor.TYPE_FIXED32, FieldDescriptor.TYPE_SFIXED32)
_FLOAT = (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT)

# Well-known types have their own JSON forms (protobuf JSON mapping); the rest of google.protobuf is "any".
_WELL_KNOWN: dict[str, dict[str, Any]] = {
    "google.protobuf.Timestamp": {"type": "string", "format": "date-time"},
    "google.protobuf.Duration": {"type": "string", "pattern": r"^-?[0-9]+(\.[0-9]+)?s$"},
    "google.protobuf.StringValue": {"type": "string"},
    "google.protobuf.BoolValue": {"type": "boolean"},
    "google.protobuf.DoubleValue": {"type": "number"},
    "google.protobuf.FloatValue": {"type": "number"},
    "google.protobuf.Int32Value": {"type": "integer"},
    "google.protobuf.UInt32Value": {"type": "integer"},
    "google.protobuf.Struct": {"type": "object"},
}


def unit_of(field_name: str) -> str:
    """The unit a field's name declares, e.g. `p95_ms` → milliseconds; "" when the name declares none."""
    for suffix, unit in _UNIT_SUFFIXES:
        if field_name == suffix.lstrip("_") or field_name.endswith(suffix):
            return unit
    return ""


def default_proto_roots() -> tuple[Path, ...]:
    # The repo keeps its contract in protos/ beside the package; an installed wheel has no sources (no comments).
    return (Path(__file__).resolve().parents[2] / "protos",)


@functools.cache
def source_comments(file_name: str, roots: tuple[Path, ...] | None = None) -> Mapping[str, str]:
    """Full name (message, field, enum, enum value) → its comment, read from the `.proto` source.

    Empty when the source cannot be found or compiled: descriptions are a help, never a reason to fail.
    """
    roots = roots if roots is not None else default_proto_roots()
    root = next((r for r in roots if (r / file_name).is_file()), None)
    if root is None:
        return {}
    from grpc_tools import protoc  # the compiler is only needed when a source is at hand

    includes = Path(protoc.__file__).parent / "_proto"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "set.binpb"
        rc = protoc.main(["protoc", f"-I{root}", f"-I{includes}", "--include_source_info",
                          f"--descriptor_set_out={out}", file_name])
        if rc != 0 or not out.is_file():
            return {}
        fds = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    proto = next((f for f in fds.file if f.name == file_name), None)
    return _comments(proto) if proto else {}


def _comments(fp: descriptor_pb2.FileDescriptorProto) -> dict[str, str]:
    by_path = {
        tuple(loc.path): " ".join(
            part.strip() for part in (loc.leading_comments, loc.trailing_comments) if part.strip()
        )
        for loc in fp.source_code_info.location
    }
    out: dict[str, str] = {}
    prefix = f"{fp.package}." if fp.package else ""

    def enum(e: descriptor_pb2.EnumDescriptorProto, name: str, path: tuple[int, ...]) -> None:
        out[name] = by_path.get(path, "")
        for i, v in enumerate(e.value):
            # Enum values live in the enclosing scope in protobuf's naming, but keyed under the enum here so
            # that two enums' values never collide.
            out[f"{name}.{v.name}"] = by_path.get((*path, 2, i), "")

    def message(m: descriptor_pb2.DescriptorProto, name: str, path: tuple[int, ...]) -> None:
        out[name] = by_path.get(path, "")
        for i, f in enumerate(m.field):
            out[f"{name}.{f.name}"] = by_path.get((*path, 2, i), "")
        for i, nested in enumerate(m.nested_type):
            message(nested, f"{name}.{nested.name}", (*path, 3, i))
        for i, e in enumerate(m.enum_type):
            enum(e, f"{name}.{e.name}", (*path, 4, i))

    for i, m in enumerate(fp.message_type):
        message(m, prefix + m.name, (4, i))
    for i, e in enumerate(fp.enum_type):
        enum(e, prefix + e.name, (5, i))
    return {k: v for k, v in out.items() if v}


def comments_for(desc: Descriptor | EnumDescriptor | FileDescriptor) -> Mapping[str, str]:
    file = desc if isinstance(desc, FileDescriptor) else desc.file
    return source_comments(file.name)


def enum_schema(enum: EnumDescriptor, *, output: bool = False, comments: Mapping[str, str] | None = None
                ) -> dict[str, Any]:
    comments = comments if comments is not None else comments_for(enum)
    # The zero value of a proto3 enum means "not said": a caller leaves the field out instead of sending it.
    values = [v for v in enum.values if output or v.number != 0]
    schema: dict[str, Any] = {"type": "string", "enum": [v.name for v in values]}
    notes = [f"{v.name}: {comments[key]}" for v in values if (key := f"{enum.full_name}.{v.name}") in comments]
    if text := comments.get(enum.full_name):
        notes.insert(0, text)
    if notes:
        schema["description"] = "; ".join(notes)
    return schema


def message_schema(
    desc: Descriptor,
    *,
    output: bool = False,
    exclude: Collection[str] = (),
    hook: Hook | None = None,
    comments: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """JSON Schema of `desc` in protobuf's JSON form. `exclude` drops top-level fields by name."""
    comments = comments if comments is not None else comments_for(desc)
    schema = _message(desc, "", output, hook, comments, frozenset())
    if exclude:
        schema["properties"] = {k: v for k, v in schema["properties"].items() if k not in exclude}
    return schema


def _message(desc: Descriptor, prefix: str, output: bool, hook: Hook | None, comments: Mapping[str, str],
             seen: frozenset[str]) -> dict[str, Any]:
    if desc.full_name in _WELL_KNOWN:
        return dict(_WELL_KNOWN[desc.full_name])
    if desc.full_name in seen:
        return {"type": "object"}  # a recursive message: one level is described, deeper levels are open
    seen = seen | {desc.full_name}
    props = {}
    for fd in desc.fields:
        path = f"{prefix}{fd.name}"
        props[fd.name] = _field(fd, path, output, hook, comments, seen)
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if not output:
        # A misspelt field would otherwise be dropped without a word; the server ignores nothing it is sent.
        schema["additionalProperties"] = False
    if text := comments.get(desc.full_name):
        schema["description"] = text
    return schema


def _field(fd: FieldDescriptor, path: str, output: bool, hook: Hook | None, comments: Mapping[str, str],
           seen: frozenset[str]) -> dict[str, Any]:
    if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
        value_fd = fd.message_type.fields_by_name["value"]
        schema: dict[str, Any] = {"type": "object",
                                  "additionalProperties": _single(value_fd, f"{path}.*", output, hook, comments,
                                                                  seen)}
    elif fd.is_repeated:
        schema = {"type": "array", "items": _single(fd, f"{path}[]", output, hook, comments, seen)}
    else:
        schema = _single(fd, path, output, hook, comments, seen)
    notes = [comments.get(f"{fd.containing_type.full_name}.{fd.name}", "")]
    unit = unit_of(fd.name)
    if unit:
        schema["x-unit"] = unit
        if unit not in notes[0]:
            notes.append(f"Unit: {unit}.")
    if fd.has_presence and fd.containing_oneof is not None and fd.containing_oneof.name.startswith("_"):
        notes.append("Leave out when not known: not given is not the same as false.")
    text = " ".join(_sentence(n) for n in notes if n)
    if text:
        # An enum field keeps its values' notes after the field's own.
        schema["description"] = f"{text} {schema['description']}" if "description" in schema else text
    if hook:
        hook(path, fd, schema)
    return schema


def _sentence(text: str) -> str:
    return text if text.endswith((".", "?", "!", ")")) else f"{text}."


def _single(fd: FieldDescriptor, path: str, output: bool, hook: Hook | None, comments: Mapping[str, str],
            seen: frozenset[str]) -> dict[str, Any]:
    t = fd.type
    if t == FieldDescriptor.TYPE_MESSAGE or t == FieldDescriptor.TYPE_GROUP:
        return _message(fd.message_type, f"{path}.", output, hook, comments, seen)
    if t == FieldDescriptor.TYPE_ENUM:
        return enum_schema(fd.enum_type, output=output, comments=comments)
    if t in _FLOAT:
        if output:  # the JSON mapping writes non-finite doubles as strings
            return {"anyOf": [{"type": "number"}, {"enum": ["NaN", "Infinity", "-Infinity"]}]}
        return {"type": "number"}
    if t in _INT64:
        if output:  # the JSON mapping writes 64-bit integers as strings
            return {"anyOf": [{"type": "integer"}, {"type": "string", "pattern": r"^-?[0-9]+$"}]}
        return {"type": "integer"}
    if t in _INT32:
        return {"type": "integer"}
    if t == FieldDescriptor.TYPE_BOOL:
        return {"type": "boolean"}
    if t == FieldDescriptor.TYPE_BYTES:
        return {"type": "string", "contentEncoding": "base64"}
    return {"type": "string"}


def json_type(fd: FieldDescriptor) -> str:
    """The JSON type a caller sends for a singular field: number, integer, boolean, string, enum or object."""
    if fd.type == FieldDescriptor.TYPE_ENUM:
        return "enum"
    if fd.type == FieldDescriptor.TYPE_MESSAGE:
        return "object"
    return _single(fd, "", False, None, {}, frozenset()).get("type", "string")


def field_at(desc: Descriptor, path: str) -> FieldDescriptor | None:
    """The field a dotted path names under `desc` (`model.params_billion` under WorkloadBrief), or None."""
    fd = None
    for part in path.split("."):
        if desc is None:
            return None
        fd = desc.fields_by_name.get(part)
        if fd is None:
            return None
        desc = fd.message_type
    return fd
