"""VIEW_SUMMARY made lean: a summary request's answer (AdviceRequest.summary_view) skips what the summary's cut
drops, and the reply the server sends, that answer cut by wire/views.summarize, is byte for byte the full answer
of the same request cut. Held over the golden cases, seeded realistic briefs (the oracle's) and hostile-value
requests (tests/fuzz_requests.py), in both locales, with the trace asked for and not."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from google.rpc import code_pb2, status_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from service.bench.oracle import fuzzer
from service.frontends.brief_file import load_request
from service.rulebook.version import Bundle
from service.serving.errors import invalid_status
from service.wire import views
from service.wire.api import advice_to_proto, pb, request_from_proto, request_to_proto
from service.wire.validate import validate
from tests.fuzz_requests import request_from_seed

REPO = Path(__file__).parents[1]
FOLDERS = (REPO / "examples", REPO / "tests" / "cases")
SHARED = REPO / ".." / "shared" / "cases"  # the shared golden cases, when this checkout sits beside them
MIXES = [(locale, trace) for locale in ("en", "zh-CN") for trace in (False, True)]


def _files(folders: tuple[Path, ...]) -> list[Path]:
    return [f for folder in folders for f in sorted(folder.glob("*.yaml"))]


def _mixes(request: pb.RecommendRequest) -> Iterator[tuple[str, pb.RecommendRequest, pb.RecommendRequest]]:
    """Per locale and trace: the request asked for the full view and for the summary."""
    for locale, trace in MIXES:
        full, summary = pb.RecommendRequest(), pb.RecommendRequest()
        for r, view in ((full, pb.VIEW_FULL), (summary, pb.VIEW_SUMMARY)):
            r.CopyFrom(request)
            r.locale, r.include_trace, r.view = locale, trace, view
        yield f"{locale}, trace {trace}", full, summary


def _refusal(bundle: Bundle, request: pb.RecommendRequest) -> bytes:
    """The INVALID_ARGUMENT status (BadRequest details) the server sends for `request`, b"" when it is valid."""
    violations = validate(request, bundle.known_gpu_ids(), bundle.known_model_names(), bundle.model_windows())
    return invalid_status(violations).SerializeToString() if violations else b""


def _same(bundle: Bundle, request: pb.RecommendRequest) -> bool:
    """Whether the request was answered. A valid one: the summary as the server makes it (the lean answer, cut)
    is byte for byte the full answer cut. A refused one: the summary request is refused with the same status
    and details as the full one. Every locale and trace; a mismatch fails."""
    answered = None
    for mix, full, summary in _mixes(request):
        refused = _refusal(bundle, full)
        assert _refusal(bundle, summary) == refused, (mix, request)
        assert answered is None or answered == (not refused), (mix, request)  # locale and trace refuse nothing
        answered = not refused
        if refused:
            assert status_pb2.Status.FromString(refused).code == code_pb2.INVALID_ARGUMENT
            continue
        lean = views.summarize(advice_to_proto(bundle.advise(request_from_proto(summary))))
        whole = views.summarize(advice_to_proto(bundle.advise(request_from_proto(full))))
        assert lean.SerializeToString() == whole.SerializeToString(), (mix, request)
    return bool(answered)


@pytest.mark.parametrize("path", _files(FOLDERS), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_lean_summary_is_the_full_answer_cut_on_every_golden_case(bundle: Bundle, path: Path):
    # An example is answered; a golden case is answered unless it expects a status other than OK.
    expect = (YAML(typ="safe", pure=True).load(path.read_text(encoding="utf-8")) or {}).get("expect") or {}
    assert _same(bundle, load_request(path)) == (expect.get("status", "OK") == "OK")


@pytest.mark.skipif(not SHARED.is_dir(), reason="the shared golden cases are not beside this checkout")
def test_a_lean_summary_is_the_full_answer_cut_on_the_shared_cases(bundle: Bundle):
    files = _files((SHARED,))
    assert files
    answered = [f.name for f in files if _same(bundle, load_request(f))]
    assert answered  # most shared cases are valid requests: a folder of refusals would test nothing


@settings(max_examples=120, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(min_value=0, max_value=2**32))
def test_a_lean_summary_is_the_full_answer_cut_on_seeded_briefs(bundle: Bundle, seed: int):
    # The oracle's realistic briefs: the rules' own models, GPUs, providers, regions and countries.
    draw = fuzzer(bundle.book, pb, seed)
    for _ in range(2):
        _same(bundle, draw())


@settings(max_examples=150, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(min_value=0, max_value=2**63))
def test_a_lean_summary_is_the_full_answer_cut_on_hostile_requests(bundle: Bundle, seed: int):
    _same(bundle, request_from_seed(seed))  # answered or refused, compared either way


def test_hostile_requests_are_compared_both_answered_and_refused(bundle: Bundle):
    answered = [_same(bundle, request_from_seed(seed * 7919 + 5)) for seed in range(40)]
    assert 0 < sum(answered) < len(answered), sum(answered)  # both sides of _same are exercised


def test_a_summary_request_makes_no_reason_caveat_plan_or_note_it_would_cut(bundle: Bundle):
    """The lean answer really is lean: what the cut drops and the headline does not read is not made."""
    request = load_request(REPO / "examples" / "realtime-70b-latency-miss.yaml")
    full = bundle.advise(request_from_proto(request))
    request.view = pb.VIEW_SUMMARY
    domain = request_from_proto(request)
    assert domain.summary_view and request_from_proto(request_to_proto(domain)) == domain
    lean = bundle.advise(domain)
    assert len(full.candidates) > 1 and all(c.reasons for c in full.candidates)
    assert any(c.caveats for c in full.candidates) and any(c.score_breakdown.rules for c in full.candidates)
    assert full.benchmark_plan and full.procurement_checklist and full.excluded
    assert [c.gpu for c in lean.candidates] == [c.gpu for c in full.candidates]
    assert not any(c.reasons or c.caveats or c.score_breakdown.rules for c in lean.candidates)
    assert not lean.benchmark_plan and not lean.procurement_checklist
    assert [x.gpu for x in lean.excluded] == [x.gpu for x in full.excluded]
    assert not any(x.reasons for x in lean.excluded)
    assert lean.summary == full.summary
