"""The probe process's heartbeat comes through the server itself: a health Check made to the main gRPC server.

The probe process (probe.py) answers for the server from the statuses the server sends it. Sent from a timer
alone, they kept coming while the main port took no calls (every worker thread held by idle streams): the
probe said SERVING and Kubernetes neither restarted the pod nor took it out of the Service. So each beat is
sent only after a health Check through the same gRPC server answered: the same event loop, the same
server-wide call cap. When the server stops taking calls, the beats stop, and after the probe's stale time it
answers NOT_SERVING.

The Check goes over a Unix socket of the main server in a folder only this user can enter, plaintext: the
server's TLS (and mTLS, which would need a client certificate) stays on its TCP port, and the socket reaches no
one that could not already read the server's key files.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


class SelfCheck:
    """`address` is the `unix:` address to add to the main server; calling the object makes one health Check
    through it and says whether it answered (whatever the status: NOT_SERVING is the server's own answer)."""

    def __init__(self, timeout: float = 1.0):
        self._dir = Path(tempfile.mkdtemp(prefix="gpu-advisor-beat-"))  # mode 0700
        self.address = f"unix:{self._dir / 'beat.sock'}"
        self.timeout = timeout
        self._channel: grpc.Channel | None = None

    def __call__(self) -> bool:
        if self._channel is None:
            self._channel = grpc.insecure_channel(self.address)
        try:
            health_pb2_grpc.HealthStub(self._channel).Check(health_pb2.HealthCheckRequest(), timeout=self.timeout)
        except grpc.RpcError:
            return False
        return True

    def close(self) -> None:
        if self._channel is not None:
            with contextlib.suppress(Exception):
                self._channel.close()
        shutil.rmtree(self._dir, ignore_errors=True)
