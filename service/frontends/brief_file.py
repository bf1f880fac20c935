"""A brief file (YAML) → RecommendRequest, written the way rule authors write: short enum names
(`workload: realtime_inference`, `precision: fp8`) as well as the proto's (`WORKLOAD_TYPE_REALTIME_INFERENCE`),
and a mistake reported as `file:line: path: what is wrong (did you mean ...?)`, never as a raw protobuf message.

The file holds a whole RecommendRequest (with `brief:`), only the brief, or a golden case (`request:`).
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor
from google.protobuf.json_format import ParseDict, ParseError
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError

from ..wire.api import pb


class InputError(Exception):
    """The brief file cannot become a request: reported as one line, exit 2."""


def load_request(path: str | Path) -> pb.RecommendRequest:
    """A RecommendRequest from a YAML file holding either the whole request or only the brief."""
    p = Path(path)
    try:
        data = YAML(typ="rt", pure=True).load(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"{p}: {exc.strerror or exc}") from exc
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{p}:{mark.line + 1}" if mark is not None else str(p)
        raise InputError(f"{where}: not valid YAML: {getattr(exc, 'problem', None) or exc}") from exc
    if data is None:
        data = CommentedMap()
    if not isinstance(data, dict):
        raise InputError(f"{p}: expected a mapping (a request or a brief), got {type(data).__name__}")
    # A golden case wraps the request in `request:`; a whole request has a `brief:` key; anything else is taken
    # to be the brief itself.
    if isinstance(data.get("request"), dict):
        data = data["request"]
    request_desc = pb.RecommendRequest.DESCRIPTOR
    if "brief" in data:
        body = _message(data, request_desc, "", p)
    else:
        body = {"brief": _message(data, request_desc.fields_by_name["brief"].message_type, "brief", p)}
    try:
        return ParseDict(body, pb.RecommendRequest())
    except ParseError as exc:  # a value of the wrong type: the path is in the parser's words
        raise InputError(f"{p}: {exc}") from exc


def _line(node: Any, key: Any, p: Path) -> str:  # noqa: ANN401 - a ruamel node
    """`file:line` of a mapping key or a sequence item, when the YAML says where it is."""
    try:
        if isinstance(node, CommentedMap):
            return f"{p}:{node.lc.key(key)[0] + 1}"
        if isinstance(node, CommentedSeq):
            return f"{p}:{node.lc.item(key)[0] + 1}"
    except (KeyError, IndexError, TypeError):
        pass
    return str(p)


def _did_you_mean(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word.lower(), [c.lower() for c in choices], n=1, cutoff=0.6)
    if not close:
        return ""
    return f" (did you mean '{next(c for c in choices if c.lower() == close[0])}'?)"


def _message(node: Any, desc: Descriptor, path: str, p: Path) -> dict[str, Any]:  # noqa: ANN401
    if not isinstance(node, dict):
        raise InputError(f"{p}: {path or 'the request'}: expected a mapping, got {type(node).__name__}")
    by_name = {**{f.json_name: f for f in desc.fields}, **{f.name: f for f in desc.fields}}
    out: dict[str, Any] = {}
    for key, value in node.items():
        fd = by_name.get(str(key))
        here = f"{path}.{key}" if path else str(key)
        if fd is None:
            names = [f.name for f in desc.fields]
            raise InputError(f"{_line(node, key, p)}: {here}: no such field{_did_you_mean(str(key), names)}; "
                             f"{path or 'a request'} has {', '.join(names)}")
        out[fd.name] = _value(node, key, value, fd, here, p)
    return out


def _value(parent: Any, key: Any, value: Any, fd: FieldDescriptor, path: str, p: Path) -> Any:  # noqa: ANN401
    if fd.is_repeated and not _is_map(fd):
        if value is None:
            return []
        if not isinstance(value, list):
            raise InputError(f"{_line(parent, key, p)}: {path}: expected a list, got {type(value).__name__}")
        return [_single(value, i, item, fd, f"{path}[{i}]", p) for i, item in enumerate(value)]
    return _single(parent, key, value, fd, path, p)


def _is_map(fd: FieldDescriptor) -> bool:
    return fd.type == FieldDescriptor.TYPE_MESSAGE and fd.message_type.GetOptions().map_entry


def _single(parent: Any, key: Any, value: Any, fd: FieldDescriptor, path: str, p: Path) -> Any:  # noqa: ANN401
    if fd.type == FieldDescriptor.TYPE_MESSAGE and not _is_map(fd) and isinstance(value, dict):
        return _message(value, fd.message_type, path, p)
    if fd.type == FieldDescriptor.TYPE_ENUM and isinstance(value, str):
        return _enum(parent, key, value, fd.enum_type, path, p)
    return _plain(value)


def _plain(value: Any) -> Any:  # noqa: ANN401
    """ruamel's round-trip types as the plain ones ParseDict knows."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    return str(value)


def enum_prefix(enum: EnumDescriptor) -> str:
    """`WORKLOAD_TYPE_` for WorkloadType: what every value starts with (buf's STANDARD lint requires it)."""
    zero = enum.values_by_number.get(0)
    return zero.name.removesuffix("UNSPECIFIED") if zero is not None and zero.name.endswith("UNSPECIFIED") else ""


def _enum(parent: Any, key: Any, value: str, enum: EnumDescriptor, path: str, p: Path) -> str:  # noqa: ANN401
    """The value's full name, from the full name or the short one rules use, in any case and with - or _."""
    prefix = enum_prefix(enum)
    wanted = value.strip().upper().replace("-", "_").replace(" ", "_")
    for name in (wanted, prefix + wanted):
        if name in enum.values_by_name:
            return name
    short = [v.name.removeprefix(prefix).lower() for v in enum.values if v.number != 0]
    raise InputError(f"{_line(parent, key, p)}: {path}: '{value}' is not a choice{_did_you_mean(value, short)}; "
                     f"one of {', '.join(short)}")
