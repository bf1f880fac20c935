"""Registers the GpuAdvisor servicer as the generated `add_GpuAdvisorServicer_to_server` does, except that bytes
which do not decode as the request message get INVALID_ARGUMENT: grpc answers INTERNAL ("Exception
deserializing request!") when a deserializer raises, and a malformed request is the caller's error."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from ..wire.api import pb
from .errors import abort_invalid


class Undecodable:
    """Stands in for a request whose bytes are not a valid message of its type."""

    def __init__(self, type_name: str):
        self.type_name = type_name


def _tolerant(cls: Any) -> Callable[[bytes], Any]:
    def parse(data: bytes) -> Any:
        try:
            return cls.FromString(data)
        except DecodeError:
            return Undecodable(cls.DESCRIPTOR.full_name)

    return parse


def _guard(method: Callable[[Any, grpc.ServicerContext], Any]) -> Callable[[Any, grpc.ServicerContext], Any]:
    def call(request: Any, context: grpc.ServicerContext) -> Any:
        if isinstance(request, Undecodable):
            abort_invalid(context, [("request", f"is not a valid {request.type_name} (protobuf decoding failed)")])
        return method(request, context)

    return call


def add_servicer(servicer: Any, server: grpc.Server) -> None:
    service = pb.DESCRIPTOR.services_by_name["GpuAdvisor"]
    handlers = {
        m.name: grpc.unary_unary_rpc_method_handler(
            _guard(getattr(servicer, m.name)),
            request_deserializer=_tolerant(getattr(pb, m.input_type.name)),
            response_serializer=getattr(pb, m.output_type.name).SerializeToString,
        )
        for m in service.methods
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service.full_name, handlers),))
    server.add_registered_method_handlers(service.full_name, handlers)
