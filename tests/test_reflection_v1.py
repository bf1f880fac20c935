"""Server reflection answers the v1 protocol as well as v1alpha: a v1-only client (buf curl pinned to grpc-v1)
lists the services and calls a method with no proto files, and the v1 method path answers a raw call."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from grpc_reflection.v1alpha import reflection_pb2

from service.serving.server import REFLECTION_V1
from tests.conftest import Running


def _buf() -> str:
    found = shutil.which("buf", path=str(Path(sys.executable).parent)) or shutil.which("buf")
    assert found, "buf is missing: it is a dev dependency (buf-bin); run `make dev`"
    return found


def _buf_curl(server: Running, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [_buf(), "curl", "--protocol", "grpc", "--http2-prior-knowledge", "--reflect-protocol", "grpc-v1", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def test_v1_path_answers_list_services(server: Running):
    info = server.channel.stream_stream(
        f"/{REFLECTION_V1}/ServerReflectionInfo",
        request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
        response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
    )
    replies = list(info(iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5))
    names = {s.name for reply in replies for s in reply.list_services_response.service}
    assert {"gpuadvisor.v1.GpuAdvisor", "grpc.health.v1.Health"} <= names


def test_buf_curl_over_v1_reflection_lists_and_calls(server: Running):
    listed = _buf_curl(server, "--list-services", f"http://{server.addr}")
    assert listed.returncode == 0, listed.stderr
    assert "gpuadvisor.v1.GpuAdvisor" in listed.stdout.split()
    # Calling a method needs the file descriptors, fetched here through v1 only.
    called = _buf_curl(server, f"http://{server.addr}/gpuadvisor.v1.GpuAdvisor/ListGpus", "-d", "{}")
    assert called.returncode == 0, called.stderr
    ids = {g["id"] for g in json.loads(called.stdout)["gpus"]}
    assert {"h100-sxm", "l4", "mi300x"} <= ids
