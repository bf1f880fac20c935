"""A target nobody meets is the answer's headline (issue 16, item 1): `unmet_targets` lists the brief paths, the
summary's first line after its title says the miss, the closest candidate and what would meet it, in the
request's language, and the CLI's first line says the same. Assertions are on structure and relations (the
headline names the closest candidate's own figure), never on catalog prices."""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path

import pytest

from service.domain.advice import Advice
from service.domain.brief import AdviceRequest, Brief, Economics, Model, Training
from service.frontends.cli import load_request, print_advice
from service.render.messages import format_number
from service.rulebook.version import Bundle
from service.wire import api

EXAMPLES = Path(__file__).parents[1] / "examples"
FLAGSHIP = EXAMPLES / "realtime-70b-fp8.yaml"
MISS = EXAMPLES / "realtime-70b-latency-miss.yaml"


def _advise(bundle: Bundle, path: Path, locale: str = "en") -> Advice:
    request = load_request(path)
    request.locale = locale
    return bundle.advise(api.request_from_proto(request))


def _headline(advice: Advice) -> str:
    return advice.summary.splitlines()[1]


def test_the_flagship_brief_is_one_the_service_meets(bundle: Bundle):
    advice = _advise(bundle, FLAGSHIP)
    assert advice.unmet == ()
    top = advice.candidates[0]
    assert 0 < top.performance.ttft_ms <= 500
    # Issue 37: a miss inside the class's measured error is kept, ranked on its cost and flagged at risk, as a
    # near hit is (with issue 36's 16-bit KV cache for a brief naming no engine, 8x H100 is 2.6% over 6 s).
    # Anything further over would be unmet, and the headline would say so.
    if top.performance.e2e_p95_ms > 6000:
        assert any(r.rule_id == "eligibility.latency-near-miss" for r in top.reasons)
        assert "At risk" in advice.summary and "6.0 s p95 target is missed by" in advice.summary
    assert top.performance.e2e_p95_ms > 0
    assert top.name in _headline(advice)  # no miss: the top pick comes first


@pytest.mark.parametrize(("locale", "words"), [("en", "Target missed"), ("zh-CN", "未达目标")])
def test_a_missed_p95_target_is_the_first_line_with_the_closest_candidate(bundle: Bundle, locale: str, words: str):
    advice = _advise(bundle, MISS, locale)
    assert [u.field for u in advice.unmet] == ["latency.p95_ms"]
    miss = advice.unmet[0]
    # The closest is the fastest candidate the rules kept, or one within closest_within (assumptions) of it that
    # is cheaper per hour (issue 25: 8x B200, not a 72-GPU rack 1.5% faster), and it misses.
    fastest = min((c for c in advice.candidates), key=lambda c: c.performance.e2e_p95_ms)
    assert miss.closest <= fastest.performance.e2e_p95_ms * 1.05 + 1e-6
    assert miss.closest > miss.target == 2000
    assert miss.would_meet >= miss.closest
    line = _headline(advice)
    assert words in line
    assert miss.name in line and f"{miss.count}x" in line
    assert format_number(miss.closest, ".0f") in line and format_number(miss.would_meet, ".0f") in line
    assert format_number(miss.target, ".0f") in line
    # The proto carries the path, for programs.
    assert list(api.advice_to_proto(advice).unmet_targets) == ["latency.p95_ms"]


def test_shorter_outputs_named_in_the_headline_would_meet_the_target(bundle: Bundle):
    advice = _advise(bundle, MISS)
    miss = advice.unmet[0]
    assert miss.output_tokens > 0 and str(miss.output_tokens) in _headline(advice)
    request = load_request(MISS)
    request.brief.traffic.avg_output_tokens = miss.output_tokens
    shorter = bundle.advise(api.request_from_proto(request))
    # Fewer output tokens can only shorten every candidate's response: the closest one now meets 2 s.
    assert "latency.p95_ms" not in [u.field for u in shorter.unmet]


def _brief(**kw: object) -> Brief:
    base = Brief(workload="REALTIME_INFERENCE", model=Model(params_billion=8, precision="BF16"))
    return replace(base, **kw)


@pytest.mark.parametrize(("locale", "words"), [("en", "Over budget"), ("zh-CN", "超出预算")])
def test_a_budget_no_configuration_fits_names_the_cheapest(bundle: Bundle, locale: str, words: str):
    advice = bundle.advise(AdviceRequest(brief=_brief(economics=Economics(budget_usd_per_hour=0.01)), locale=locale))
    assert [u.field for u in advice.unmet] == ["economics.budget_usd_per_hour"]
    miss = advice.unmet[0]
    assert miss.closest > 0.01 and miss.would_meet >= miss.closest
    line = _headline(advice)
    assert words in line and miss.name in line and format_number(miss.closest, ".2f") in line


def test_a_deadline_no_cluster_meets_is_the_headline(bundle: Bundle):
    brief = Brief(workload="PRETRAINING", model=Model(params_billion=70, precision="BF16"),
                  training=Training(tokens_billion=100_000, target_days=0.01))
    advice = bundle.advise(AdviceRequest(brief=brief))
    fields = [u.field for u in advice.unmet]
    assert fields == ["training.target_days"], advice.summary
    miss = advice.unmet[0]
    assert miss.closest > 0.01 and miss.would_meet >= miss.closest
    assert "Deadline missed" in _headline(advice) and miss.name in _headline(advice)


def test_a_met_target_is_not_listed(bundle: Bundle):
    roomy = _brief(economics=Economics(budget_usd_per_hour=10_000))
    assert bundle.advise(AdviceRequest(brief=roomy)).unmet == ()


@pytest.mark.parametrize("locale", ["en", "zh-CN"])
def test_the_cli_says_the_miss_on_its_first_line(bundle: Bundle, locale: str):
    advice = _advise(bundle, MISS, locale)
    out = io.StringIO()
    print_advice(api.advice_to_proto(advice), out)
    first = out.getvalue().splitlines()[0]
    assert first == _headline(advice).replace("**", "")


def test_the_cli_table_says_why_each_rank_and_each_exclusion(bundle: Bundle):
    # Issue 16, item 4: the score, the latency figure against its target, a reason per exclusion, the summary once.
    request = load_request(MISS)
    advice = bundle.advise(api.request_from_proto(request))
    resp = api.advice_to_proto(advice)
    out = io.StringIO()
    print_advice(resp, out, request=request)
    text = out.getvalue()
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("#  gpu"))
    assert "score" in header and "p95 ms (target 2,000)" in header and "$/month" in header
    for c in resp.candidates:
        row = next(line for line in lines if line.split()[1:2] == [c.gpu])
        assert f"{c.score:.1f}" in row and f"{c.performance.e2e_p95_ms:,.0f} ✗" in row
    assert resp.excluded
    for x in resp.excluded:
        assert f"  {x.gpu}: {x.reasons[0].text}" in lines
    top_line = advice.summary.splitlines()[2].replace("**", "")
    assert text.count(top_line) == 1  # the summary is printed once


def test_the_cli_speaks_the_request_language(bundle: Bundle):
    request = load_request(MISS)
    request.locale = "zh-CN"
    resp = api.advice_to_proto(bundle.advise(api.request_from_proto(request)))
    out = io.StringIO()
    print_advice(resp, out, request=request)
    text = out.getvalue()
    assert "得分" in text and "已排除" in text and "Excluded" not in text and "score" not in text


@pytest.mark.parametrize(("locale", "words"), [("en", "Nothing fits"), ("zh-CN", "没有合适的配置")])
def test_nothing_fitting_is_the_headline_with_the_usual_reason(bundle: Bundle, locale: str, words: str):
    # 100k-billion parameters in FP32 fit nowhere we would size: every GPU is excluded.
    brief = Brief(workload="REALTIME_INFERENCE", model=Model(params_billion=100_000, precision="FP32"))
    advice = bundle.advise(AdviceRequest(brief=brief, locale=locale))
    assert advice.candidates == () and advice.excluded
    line = _headline(advice)
    assert words in line
    assert any(x.reasons[0].text in line for x in advice.excluded)  # one GPU's own words for the reason
