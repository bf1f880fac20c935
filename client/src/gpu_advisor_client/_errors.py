"""One exception class per gRPC status, raised by both clients, with the bad fields of an INVALID_ARGUMENT."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

import grpc
from google.rpc import error_details_pb2, status_pb2

# Where gRPC carries a google.rpc.Status with details (the server sends a BadRequest there). Read from the
# trailers directly: grpc_status.rpc_status.from_call only takes sync calls, and this serves grpc.aio too.
STATUS_DETAILS_KEY = "grpc-status-details-bin"


class Violation(NamedTuple):
    """One bad field: its path in the request (`brief.economics.utilization`, `quotes[0].gpu`) and what is wrong."""

    field: str
    description: str


class Violations(list[Violation]):
    """The bad fields of an INVALID_ARGUMENT in the server's order, as (field, description) pairs.

    A list, so a field named twice keeps both descriptions; `"brief.model" in violations` also asks whether a
    field is among them, and `dict(violations)` gives field → description.
    """

    def __init__(self, pairs: Iterable[tuple[str, str]] | Mapping[str, str] = ()):
        items = pairs.items() if isinstance(pairs, Mapping) else pairs
        super().__init__(Violation(str(f), str(d)) for f, d in items)

    def __contains__(self, item: object) -> bool:
        if isinstance(item, str):
            return any(v.field == item for v in self)
        return super().__contains__(item)

    @property
    def fields(self) -> list[str]:
        return [v.field for v in self]


class GpuAdvisorError(Exception):
    """A call that did not succeed: `code` (grpc.StatusCode), the server's `message`, and `violations`.

    Catch a subclass for one status (InvalidArgument, Unavailable, DeadlineExceeded, ...) or this for all.
    `violations` is empty except for InvalidArgument. The grpc.RpcError it came from is `__cause__`.
    """

    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN  # each subclass's own; the base keeps what it is given

    def __init__(self, code: grpc.StatusCode | None = None, message: str = "",
                 violations: Iterable[tuple[str, str]] | Mapping[str, str] = ()):
        if code is not None:
            self.code = code
        self.message = message
        self.violations = Violations(violations)
        super().__init__(f"{self.code.name}: {message}")

    @classmethod
    def from_rpc_error(cls, err: grpc.RpcError) -> GpuAdvisorError:
        """The exception for a failed call (sync or grpc.aio): the subclass of its status code."""
        if not isinstance(err, grpc.Call | grpc.aio.AioRpcError):
            return Unknown(grpc.StatusCode.UNKNOWN, str(err))
        code = err.code() or grpc.StatusCode.UNKNOWN
        violations = bad_request(err.trailing_metadata()) if code == grpc.StatusCode.INVALID_ARGUMENT else []
        return error_for(code, err.details() or code.name, violations)


def bad_request(trailing_metadata: Any) -> list[tuple[str, str]]:
    """(field, description) of each google.rpc.BadRequest in a call's status details, in order."""
    out: list[tuple[str, str]] = []
    for key, value in trailing_metadata or ():
        if key != STATUS_DETAILS_KEY or not isinstance(value, bytes):
            continue
        try:
            status = status_pb2.Status.FromString(value)
        except Exception:  # noqa: BLE001 - a malformed detail must not hide the status itself
            continue
        for detail in status.details:
            bad = error_details_pb2.BadRequest()
            if detail.Unpack(bad):
                out += [(v.field, v.description) for v in bad.field_violations]
    return out


# One class per status a call can end with; the docstrings say when GPU Advisor answers so.


class Cancelled(GpuAdvisorError):
    code = grpc.StatusCode.CANCELLED


class Unknown(GpuAdvisorError):
    code = grpc.StatusCode.UNKNOWN


class InvalidArgument(GpuAdvisorError, ValueError):
    """The request is wrong; `violations` names each bad field. Also raised before any call for a dict brief or
    quote that names a field or enum value the proto does not have. Not worth retrying unchanged."""

    code = grpc.StatusCode.INVALID_ARGUMENT


class DeadlineExceeded(GpuAdvisorError):
    """The call's deadline (`timeout`) passed before an answer; deadlines are not retried."""

    code = grpc.StatusCode.DEADLINE_EXCEEDED


class NotFound(GpuAdvisorError):
    code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(GpuAdvisorError):
    code = grpc.StatusCode.ALREADY_EXISTS


class PermissionDenied(GpuAdvisorError):
    code = grpc.StatusCode.PERMISSION_DENIED


class ResourceExhausted(GpuAdvisorError):
    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class FailedPrecondition(GpuAdvisorError):
    code = grpc.StatusCode.FAILED_PRECONDITION


class Aborted(GpuAdvisorError):
    code = grpc.StatusCode.ABORTED


class OutOfRange(GpuAdvisorError):
    code = grpc.StatusCode.OUT_OF_RANGE


class Unimplemented(GpuAdvisorError):
    code = grpc.StatusCode.UNIMPLEMENTED


class Internal(GpuAdvisorError):
    code = grpc.StatusCode.INTERNAL


class Unavailable(GpuAdvisorError):
    """Unreachable, draining, or no valid rules loaded yet; the clients have already retried (RetryPolicy)."""

    code = grpc.StatusCode.UNAVAILABLE


class DataLoss(GpuAdvisorError):
    code = grpc.StatusCode.DATA_LOSS


class Unauthenticated(GpuAdvisorError):
    code = grpc.StatusCode.UNAUTHENTICATED


BY_CODE: dict[grpc.StatusCode, type[GpuAdvisorError]] = {
    c.code: c for c in (Cancelled, Unknown, InvalidArgument, DeadlineExceeded, NotFound, AlreadyExists,
                        PermissionDenied, ResourceExhausted, FailedPrecondition, Aborted, OutOfRange,
                        Unimplemented, Internal, Unavailable, DataLoss, Unauthenticated)
}


def error_for(code: grpc.StatusCode, message: str,
              violations: Iterable[tuple[str, str]] | Mapping[str, str] = ()) -> GpuAdvisorError:
    """The exception of status `code` (GpuAdvisorError itself for a code without a class, e.g. OK)."""
    return BY_CODE.get(code, GpuAdvisorError)(code, message, violations)
