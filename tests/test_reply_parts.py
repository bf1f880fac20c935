"""Replies made from kept parts (a placement's bytes, a band's and a spread's fields, a candidate's price and
break-even texts) are the replies made from scratch: compared on realistic briefs, in both locales, with the trace
on and off and in both views, answered in turn so that later answers read what earlier ones kept."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from service.bench.loadgen import distinct_briefs
from service.decide import answer
from service.render import messages
from service.rulebook.folder import load_rulebook
from service.rulebook.version import Bundle
from service.wire import views
from service.wire.api import advice_to_proto, pb, request_from_proto
from tests.test_fast_paths import reference_advice_to_proto

RULES = Path(__file__).parents[1] / "rules"
# The shipped Chinese templates that have placeholders (what a Chinese table fills straight).
_TEMPLATES = {k: t for k, t in YAML(typ="safe").load((RULES / "messages" / "zh-CN.yaml").read_text(
    encoding="utf-8"))["messages"].items() if isinstance(t, str) and "{" in t}


@pytest.fixture(scope="module")
def bundle():  # noqa: ANN201
    book, problems = load_rulebook(RULES)
    assert book is not None, problems
    b = Bundle(book, loaded_at=None)  # type: ignore[arg-type]
    yield b
    b.retire(None)


def _requests() -> list[pb.RecommendRequest]:
    out = []
    for body in distinct_briefs(24):
        for locale in ("en", "zh-CN"):
            for trace in (False, True):
                r = pb.RecommendRequest.FromString(body[5:])
                r.locale, r.include_trace = locale, trace
                out.append(r)
    return out


def test_bench_briefs_reply_as_built_from_scratch_in_both_views(bundle):  # noqa: ANN001
    requests = _requests()
    shown = banded = spread = 0
    for r in requests + requests[::-1]:
        advice = bundle.advise(request_from_proto(r))
        new, ref = advice_to_proto(advice), reference_advice_to_proto(advice)
        assert new.SerializeToString(deterministic=True) == ref.SerializeToString(deterministic=True)
        assert new.SerializeToString() == ref.SerializeToString()
        assert views.summarize(new).SerializeToString() == views.summarize(ref).SerializeToString()
        shown += sum(len(c.placements) for c in new.candidates)
        banded += sum(c.performance.HasField("accuracy") for c in new.candidates)
        spread += sum(c.HasField("market") for c in new.candidates)
    assert shown and banded and spread  # the briefs reach every part these replies read from what was kept


def _kept_stores() -> tuple[dict[Any, Any], ...]:
    return answer._offer_prices, answer._break_evens


def test_texts_kept_across_briefs_are_the_texts_made_afresh(bundle):  # noqa: ANN001
    requests = _requests()
    kept_replies = [advice_to_proto(bundle.advise(request_from_proto(r))).SerializeToString() for r in requests]
    assert all(_kept_stores())  # the briefs reach both kept texts
    for r, kept in zip(requests, kept_replies, strict=True):
        for store in _kept_stores():
            store.clear()
        afresh = advice_to_proto(bundle.advise(request_from_proto(r))).SerializeToString()
        assert afresh == kept


def test_kept_texts_follow_the_rules_version_that_says_them(tmp_path):  # noqa: ANN001
    # Two rules versions alive at once, one with other wording: each answer reads its own version's texts.
    rules = tmp_path / "rules"
    shutil.copytree(RULES, rules)
    en = rules / "messages" / "en.yaml"
    text = en.read_text(encoding="utf-8")
    for key in ("price.from_offer", "ownership.formula"):
        text = text.replace(f'  {key}: "', f'  {key}: "REWORDED ', 1)
    en.write_text(text, encoding="utf-8")
    bundles = []
    for folder in (RULES, rules):
        book, problems = load_rulebook(folder)
        assert book is not None, problems
        bundles.append(Bundle(book, loaded_at=None))  # type: ignore[arg-type]
    body = distinct_briefs(1)[0]
    seen = []
    for b in bundles + bundles[::-1]:
        reply = advice_to_proto(b.advise(request_from_proto(pb.RecommendRequest.FromString(body[5:]))))
        c = reply.candidates[0]
        texts = [c.cost.price_source, *(r.text for r in c.reasons if r.rule_id == "ownership.break-even")]
        seen.append(all(t.startswith("REWORDED ") for t in texts) if b is bundles[1] else
                    not any("REWORDED" in t for t in texts))
        assert len(texts) == 2 and c.placements
    for b in bundles:
        b.retire(None)
    assert all(seen)


_CJK_GAP = re.compile(rf"(?<=[{messages._CJK}{messages._FULLWIDTH}]) +(?=[{messages._CJK}{messages._FULLWIDTH}])")
_PUNCT_GAP = re.compile(rf" +(?=[{messages._FULLWIDTH}])|(?<=[{messages._FULLWIDTH}]) +")


@settings(max_examples=2000, deadline=None)
@given(text=st.text(alphabet=st.sampled_from("中文价格，。（）\u3000\uff01 a1-"), max_size=24))
def test_one_pass_tidy_removes_the_gaps_the_two_passes_removed(text: str) -> None:
    # The two passes tidy() made before its one-pass pattern: CJK-CJK gaps, then gaps by full-width characters.
    assert messages.tidy(text, "zh-CN") == _PUNCT_GAP.sub("", _CJK_GAP.sub("", text))


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_wide_straight_fillers_tell_what_the_loop_tells(data: st.DataObject) -> None:
    # A Chinese table's straight-line filler: the same text and the same "a wide value went in" as fill_wide.
    key = data.draw(st.sampled_from(sorted(_TEMPLATES)))
    compiled = messages._Compiled(messages._parsed(_TEMPLATES[key]))
    names = messages.placeholders(_TEMPLATES[key])
    values = st.one_of(st.text(alphabet=st.sampled_from("中，a 1"), max_size=4), st.floats(-2000, 2000),
                       st.integers(-5000, 5000), st.booleans(), st.none(), st.sampled_from((999.99, 1000.0, "按需")))
    params = data.draw(st.dictionaries(st.sampled_from(names), values) if names else st.just({}))
    got, want = compiled.wide(params), compiled.fill_wide(params)
    assert got[0] == want[0] and bool(got[1]) == bool(want[1])


def test_kept_questions_are_told_apart_by_their_assumed_values_type() -> None:
    # True == 1 == 1.0 as keys, but a reply says true, 1 and 1 (a whole float as an int) apart.
    from service.domain.advice import Question
    from service.wire import api

    for assumed in (True, 1, 1.0, 0.5, "x", None, True):
        q = Question("economics.has_platform_team", "Is there a platform team?", "ask.team", "", assumed, 3)
        kept = pb.RecommendResponse.FromString(api._question_field(q)).questions[0]
        assert kept == api.question_to_proto(q)
