"""INVALID_ARGUMENT as the API sends it: a google.rpc.BadRequest naming the bad fields, bounded in size."""

from __future__ import annotations

from typing import NoReturn

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

MAX_VIOLATIONS = 20  # the first ones name the problem; all of them could exceed gRPC's 16 KB metadata limit
MAX_FIELD = 120
MAX_DESCRIPTION = 240
MAX_DETAIL_BYTES = 6 * 1024  # serialized BadRequest: base64 in the trailers makes it 8 KB
MAX_MESSAGE_BYTES = 1024  # UTF-8 of grpc-message, which is percent-encoded (up to 3 KB): 11 KB in all, of 16


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def invalid_status(violations: list[tuple[str, str]]) -> status_pb2.Status:
    """INVALID_ARGUMENT with a google.rpc.BadRequest naming the bad fields: at most MAX_VIOLATIONS, each clipped,
    within MAX_DETAIL_BYTES, because the status travels in response trailers (16 KB of metadata in all)."""
    field_violation = error_details_pb2.BadRequest.FieldViolation
    bad = error_details_pb2.BadRequest()
    for f, d in violations[:MAX_VIOLATIONS]:
        v = field_violation(field=_clip(f, MAX_FIELD), description=_clip(d, MAX_DESCRIPTION))
        if bad.ByteSize() + v.ByteSize() + 4 > MAX_DETAIL_BYTES:
            break
        bad.field_violations.append(v)
    detail = any_pb2.Any()
    detail.Pack(bad)
    shown = bad.field_violations[:5]
    message = "; ".join(f"{v.field}: {v.description}" for v in shown)
    if len(violations) > len(shown):
        message += f" (and {len(violations) - len(shown)} more"
        if len(violations) > len(bad.field_violations):
            message += f"; the details list the first {len(bad.field_violations)}"
        message += ")"
    if len(message.encode()) > MAX_MESSAGE_BYTES:
        message = message.encode()[: MAX_MESSAGE_BYTES - 3].decode(errors="ignore") + "…"
    return status_pb2.Status(code=code_pb2.INVALID_ARGUMENT, message=message, details=[detail])


def abort_invalid(context: grpc.ServicerContext, violations: list[tuple[str, str]]) -> NoReturn:
    """Abort the call with invalid_status (raises like context.abort)."""
    context.abort_with_status(rpc_status.to_status(invalid_status(violations)))
    raise AssertionError("unreachable: abort_with_status raises")
