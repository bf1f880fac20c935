"""Requests from dicts, checked before any call, and enum names read off answers."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from typing import Any, TypeVar

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor
from google.protobuf.message import Message

from ._errors import InvalidArgument

M = TypeVar("M", bound=Message)


def to_message(value: M | Mapping[str, Any], cls: type[M], path: str) -> M:
    """`value` as a `cls` message: itself, or a dict in the proto3 JSON mapping (what grpcurl takes).

    A dict naming a field `cls` does not have, or an enum value its enum does not have, raises InvalidArgument
    with each such field's path (`brief.model.params_bilion`), and a close match when there is one, before
    anything is sent: the server would only see a message with that field missing.
    """
    if isinstance(value, cls):
        return value
    if not isinstance(value, Mapping):
        raise TypeError(f"{path} must be a {cls.DESCRIPTOR.full_name} or a mapping, not {type(value).__name__}")
    violations: list[tuple[str, str]] = []
    _check(value, cls.DESCRIPTOR, path, violations)
    if not violations:
        try:
            return json_format.ParseDict(value, cls())
        except json_format.ParseError as err:  # a wrong type or range, which the walk does not look at
            violations.append(_parse_error(err, path))
    raise local_invalid(violations)


def local_invalid(violations: list[tuple[str, str]]) -> InvalidArgument:
    """InvalidArgument for a request found wrong here, so never sent."""
    return InvalidArgument(message="not sent: " + "; ".join(f"{f}: {d}" for f, d in violations),
                           violations=violations)


# ParseDict says "Failed to parse model field: Failed to parse params_billion field: Couldn't parse float: x at
# WorkloadBrief.model.params_billion." for a wrong type: the innermost words, and where, in the request's terms.
_NESTED = re.compile(r"^(Failed to parse \w+ field: )+")
_WHERE = re.compile(r" at (\w+)((?:\.\w+)*)\.*$")


def _parse_error(err: json_format.ParseError, path: str) -> tuple[str, str]:
    text = _NESTED.sub("", str(err).split("\n")[0])
    where = _WHERE.search(text)
    if where is None:
        return path, text.rstrip(".")
    return path + where.group(2), text[: where.start()]


def _check(value: Mapping[str, Any], descriptor: Descriptor, path: str, out: list[tuple[str, str]]) -> None:
    by_name = {**{f.json_name: f for f in descriptor.fields}, **descriptor.fields_by_name}
    for key, item in value.items():
        field = by_name.get(key) if isinstance(key, str) else None
        if field is None:
            out.append((f"{path}.{key}", f"{descriptor.full_name} has no field {key!r}"
                        + _did_you_mean(str(key), descriptor.fields_by_name)))
            continue
        here = f"{path}.{field.name}"
        if item is None:
            continue  # null is the field's default in the JSON mapping
        if _is_map(field):
            continue  # no request message has a map; ParseDict checks them
        items = list(enumerate(item)) if _repeated(field) and isinstance(item, list) else [(None, item)]
        for i, element in items:
            at = here if i is None else f"{here}[{i}]"
            if field.type == FieldDescriptor.TYPE_ENUM:
                _check_enum(element, field.enum_type, at, out)
            elif (field.type == FieldDescriptor.TYPE_MESSAGE and isinstance(element, Mapping)
                  and not field.message_type.full_name.startswith("google.protobuf.")):
                _check(element, field.message_type, at, out)


def _check_enum(value: Any, enum: EnumDescriptor, path: str, out: list[tuple[str, str]]) -> None:
    if isinstance(value, str) and value not in enum.values_by_name:
        out.append((path, f"{enum.full_name} has no value {value!r}" + _did_you_mean(value, enum.values_by_name)))


def _did_you_mean(word: str, choices: Mapping[str, Any]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    if not close:  # an enum value without its prefix: "FP8" for PRECISION_FP8
        close = [c for c in choices if c.endswith("_" + word.upper())][:1]
    return f"; did you mean {close[0]!r}?" if close else ""


def _repeated(field: FieldDescriptor) -> bool:
    return field.is_repeated  # protobuf 7 has no `label`


def _is_map(field: FieldDescriptor) -> bool:
    return (_repeated(field) and field.type == FieldDescriptor.TYPE_MESSAGE
            and field.message_type.GetOptions().map_entry)


def enum_name(message: Message, field: str) -> str | list[str]:
    """The name of an enum field's value: `enum_name(answer, "route.kind")` → "ROUTE_KIND_RENT_ON_DEMAND".

    `field` is a field of `message`, or a dotted path through singular message fields. A repeated enum field
    gives a list of names. A value newer than this client's stubs (a newer server) gives its number as a
    string, e.g. "9", rather than failing.
    """
    *parents, last = field.split(".")
    for name in parents:
        message = getattr(message, name)
    descriptor = message.DESCRIPTOR.fields_by_name.get(last)
    if descriptor is None or descriptor.type != FieldDescriptor.TYPE_ENUM:
        raise ValueError(f"{message.DESCRIPTOR.full_name}.{last} is not an enum field")
    value = getattr(message, last)
    if _repeated(descriptor):
        return [_name(descriptor.enum_type, v) for v in value]
    return _name(descriptor.enum_type, value)


def _name(enum: EnumDescriptor, number: int) -> str:
    value = enum.values_by_number.get(number)
    return value.name if value is not None else str(number)
