"""Registers the GpuAdvisor servicer on the asyncio server through the dispatcher (service/serving/dispatch.py):
each method admitted by its limiter, its answer run in a worker thread, and bytes which do not decode as the
request message answered with INVALID_ARGUMENT (grpc would answer INTERNAL, "Exception deserializing request!",
and a malformed request is the caller's error)."""

from __future__ import annotations

from typing import Any

import grpc

from ..wire.api import pb
from .dispatch import Dispatcher, guard, tolerant
from .interceptors import AdmissionControl


def add_servicer(servicer: Any, server: grpc.aio.Server, dispatcher: Dispatcher, admission: AdmissionControl) -> None:
    service = pb.DESCRIPTOR.services_by_name["GpuAdvisor"]
    handlers = {}
    for m in service.methods:
        path = f"/{service.full_name}/{m.name}"
        handlers[m.name] = dispatcher.unary(
            path, guard(getattr(servicer, m.name)), tolerant(getattr(pb, m.input_type.name)),
            getattr(pb, m.output_type.name).SerializeToString, admission.limiters.get(path),
        )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service.full_name, handlers),))
