"""Python client for GPU Advisor.

    from gpu_advisor_client import recommend
    answer = recommend("127.0.0.1:50051", {"workload": "WORKLOAD_TYPE_REALTIME_INFERENCE",
                                           "model": {"params_billion": 70, "precision": "PRECISION_FP8"}})
    print(answer.summary)

`pb` is the generated message module (gpuadvisor.v1), `pb_grpc` the generated stub module.
"""

from importlib.metadata import PackageNotFoundError, version

from ._client import DEFAULT_TIMEOUT_S, SERVICE, AdvisorError, Client, RetryPolicy, recommend, service_config
from .v1 import advisor_pb2 as pb
from .v1 import advisor_pb2_grpc as pb_grpc

try:
    __version__ = version("gpu-advisor-client")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0"

__all__ = ["DEFAULT_TIMEOUT_S", "SERVICE", "AdvisorError", "Client", "RetryPolicy", "pb", "pb_grpc", "recommend",
           "service_config", "__version__"]
