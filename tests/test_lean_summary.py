"""VIEW_SUMMARY made lean: a summary request's answer (AdviceRequest.summary_view) skips what the summary's cut
drops, and the reply the server sends, that answer cut by wire/views.summarize, is byte for byte the full answer
of the same request cut. Held over the golden cases, seeded realistic briefs (the oracle's) and hostile-value
requests (tests/fuzz_requests.py), in both locales, with the trace asked for and not."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.bench.oracle import fuzzer
from service.frontends.brief_file import load_request
from service.rulebook.version import Bundle
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


def _replies(bundle: Bundle, request: pb.RecommendRequest) -> Iterator[tuple[str, bytes, bytes]]:
    """Per locale and trace: the summary as the server makes it (the lean answer, cut) and the full answer cut."""
    for locale, trace in MIXES:
        r = pb.RecommendRequest()
        r.CopyFrom(request)
        r.locale, r.include_trace = locale, trace
        r.view = pb.VIEW_FULL
        full = views.summarize(advice_to_proto(bundle.advise(request_from_proto(r))))
        r.view = pb.VIEW_SUMMARY
        lean = views.summarize(advice_to_proto(bundle.advise(request_from_proto(r))))
        yield f"{locale}, trace {trace}", lean.SerializeToString(), full.SerializeToString()


def _same(bundle: Bundle, request: pb.RecommendRequest) -> bool:
    """Whether the request was answered (validation passed) and its summaries matched; a mismatch fails."""
    if validate(request, bundle.known_gpu_ids(), bundle.known_model_names(), bundle.model_windows()):
        return False
    for mix, lean, full in _replies(bundle, request):
        assert lean == full, (mix, request)
    return True


@pytest.mark.parametrize("path", _files(FOLDERS), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_lean_summary_is_the_full_answer_cut_on_every_golden_case(bundle: Bundle, path: Path):
    _same(bundle, load_request(path))


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
    _same(bundle, request_from_seed(seed))


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
