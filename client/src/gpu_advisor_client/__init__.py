"""Python client for GPU Advisor.

    from gpu_advisor_client import recommend
    answer = recommend("127.0.0.1:50051", {"workload": "WORKLOAD_TYPE_REALTIME_INFERENCE",
                                           "model": {"params_billion": 70, "precision": "PRECISION_FP8"}})
    print(answer.summary)

`Client` keeps one channel, `AsyncClient` is the same for asyncio. A failed call raises the GpuAdvisorError
subclass of its status (InvalidArgument, Unavailable, DeadlineExceeded, ...). `enum_name(answer, "route.kind")`
reads an enum field as its name. `pb` is the generated message module (gpuadvisor.v1), `pb_grpc` the stubs.
"""

from importlib.metadata import PackageNotFoundError, version

from ._aio import AsyncClient
from ._client import DEFAULT_TIMEOUT_S, SERVICE, AdvisorError, Client, RetryPolicy, recommend, service_config
from ._errors import (
    Aborted,
    AlreadyExists,
    Cancelled,
    DataLoss,
    DeadlineExceeded,
    FailedPrecondition,
    GpuAdvisorError,
    Internal,
    InvalidArgument,
    NotFound,
    OutOfRange,
    PermissionDenied,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
    Unimplemented,
    Unknown,
    Violation,
    Violations,
)
from ._messages import enum_name
from .v1 import advisor_pb2 as pb
from .v1 import advisor_pb2_grpc as pb_grpc

try:
    __version__ = version("gpu-advisor-client")  # the server's version: both come from one pyproject.toml
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0"

__all__ = [
    "DEFAULT_TIMEOUT_S", "SERVICE", "Aborted", "AdvisorError", "AlreadyExists", "AsyncClient", "Cancelled", "Client",
    "DataLoss", "DeadlineExceeded", "FailedPrecondition", "GpuAdvisorError", "Internal", "InvalidArgument",
    "NotFound", "OutOfRange", "PermissionDenied", "ResourceExhausted", "RetryPolicy", "Unauthenticated",
    "Unavailable", "Unimplemented", "Unknown", "Violation", "Violations", "__version__", "enum_name", "pb",
    "pb_grpc", "recommend", "service_config",
]
