"""Error words name what the caller can act on (issue 38 item 6): the over-cap trace error names only real request
fields (it suggested `trace_fired_only`, an internal flag); a context beyond the window quotes the registry id,
not the caller's raw spelling with its stray spaces ("beyond  QWEN2.5-7B-Instruct 's")."""

from __future__ import annotations

import re
from typing import Any

import grpc
import pytest

from service.serving import server as server_module
from service.wire.api import pb
from tests.conftest import call


def _request_fields(desc: Any, seen: set[str] | None = None) -> set[str]:  # noqa: ANN401
    """Every field name a RecommendRequest can carry, at any depth."""
    out: set[str] = set()
    seen = seen if seen is not None else set()
    if desc.full_name in seen:
        return out
    seen.add(desc.full_name)
    for f in desc.fields:
        out.add(f.name)
        if f.message_type is not None:
            out |= _request_fields(f.message_type, seen)
    return out


class _Abort(Exception):
    pass


class _Context:
    status: Any = None

    def abort_with_status(self, status: Any) -> None:  # noqa: ANN401
        self.status = status
        raise _Abort


@pytest.mark.parametrize("with_trace", [True, False])
def test_the_over_cap_error_names_only_real_request_fields(with_trace: bool) -> None:
    context = _Context()
    with pytest.raises(_Abort):
        server_module._too_large(context, 300_000, with_trace, "abc123")  # type: ignore[arg-type]
    details = context.status.details
    named = set(re.findall(r"\b[a-z]+(?:_[a-z]+)+\b", details))
    assert named <= _request_fields(pb.RecommendRequest.DESCRIPTOR), (named, details)
    if with_trace:
        assert "include_trace" in named


def test_a_context_beyond_the_window_quotes_the_registry_id(stub: Any) -> None:
    request = pb.RecommendRequest(brief=pb.WorkloadBrief(
        workload=pb.WORKLOAD_TYPE_REALTIME_INFERENCE,
        model=pb.Model(name="  QWEN2.5-7B-Instruct ", context_tokens=10_000_000)))
    out = call(stub.Recommend, request)
    assert out.code == grpc.StatusCode.INVALID_ARGUMENT and out.fields == ("brief.model.context_tokens",)
    assert "10,000,000 tokens is beyond the context window of qwen2.5-7b-instruct (" in out.details, out.details
    assert "QWEN" not in out.details and "  " not in out.details and " '" not in out.details
