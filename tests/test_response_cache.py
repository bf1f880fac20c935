"""The response cache: identical answers, keyed on the rules revision (and the day), on by default in a served
process, emptied by a new revision, bounded by count and bytes, counted in the metrics."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import grpc
import pytest

from service.serving.cache import ResponseCache
from service.wire.api import pb
from tests.test_server import good_request


def test_a_cached_server_answers_exactly_as_an_uncached_one(server, start_server, rules_copy: Path):
    cached = start_server(rules_copy, watch=False, response_cache=16)
    request = good_request()
    plain = server.stub.Recommend(request, timeout=30)
    first = cached.stub.Recommend(request, timeout=30)
    again = cached.stub.Recommend(request, timeout=30)
    assert plain.ruleset.content_hash == first.ruleset.content_hash  # same rules, so the same answer
    assert plain.SerializeToString(deterministic=True) == first.SerializeToString(deterministic=True)
    assert again.SerializeToString(deterministic=True) == first.SerializeToString(deterministic=True)


def test_a_new_rules_revision_is_never_answered_from_the_old_one(start_server, rules_copy: Path):
    running = start_server(rules_copy, watch=False, response_cache=16)
    request = good_request()
    before = running.stub.Recommend(request, timeout=30)
    assert running.stub.Recommend(request, timeout=30) == before  # now in the cache
    messages = rules_copy / "messages" / "en.yaml"
    text = messages.read_text(encoding="utf-8")
    assert 'summary.title: "**GPU Advisor: {workload}**"' in text
    messages.write_text(text.replace("**GPU Advisor: {workload}**", "**GPU Advisor (v2): {workload}**"),
                        encoding="utf-8")
    result = running.store.reload()
    assert result.ok and result.changed, result.problems
    after = running.stub.Recommend(request, timeout=30)
    assert after.ruleset.revision != before.ruleset.revision
    assert "(v2)" in after.summary and "(v2)" not in before.summary


def test_invalid_requests_are_not_cached(start_server, rules_copy: Path):
    running = start_server(rules_copy, watch=False, response_cache=16)
    bad = good_request()
    bad.brief.economics.utilization = 7
    for _ in range(2):
        with pytest.raises(grpc.RpcError) as err:
            running.stub.Recommend(bad, timeout=30)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


class _Bundle:
    def __init__(self, revision: str):
        self.revision = revision


class _Store:
    def __init__(self) -> None:
        self.bundle = _Bundle("r1")

    def active(self) -> _Bundle:
        return self.bundle


def test_hits_misses_lru_and_the_key():
    store, calls = _Store(), []

    def inner(request: pb.RecommendRequest, _context: object) -> pb.RecommendResponse:
        calls.append(store.bundle.revision)
        return pb.RecommendResponse(summary=f"{store.bundle.revision}:{request.locale}")

    cache = ResponseCache(2)
    handler = cache.wrap(store, inner)  # type: ignore[arg-type]
    en, zh = pb.RecommendRequest(locale="en"), pb.RecommendRequest(locale="zh-CN")
    assert handler(en, None).summary == "r1:en"
    assert handler(en, None).summary == "r1:en"
    assert calls == ["r1"] and cache.hits == 1
    handler(zh, None)
    handler(pb.RecommendRequest(locale="x"), None)  # evicts `en`, the least recently used
    assert len(cache) == 2
    handler(en, None)
    assert calls == ["r1", "r1", "r1", "r1"]
    store.bundle = _Bundle("r2")
    assert handler(en, None).summary == "r2:en"  # keyed on the revision
    hit = handler(en, None)
    hit.summary = "changed by a caller"
    assert handler(en, None).summary == "r2:en"  # a hit is a copy
    # An answer without as_of is for today only; with as_of it is for that day on any day.
    today, later = date(2026, 1, 1), date(2026, 1, 2)
    assert ResponseCache.key("r", en, today) != ResponseCache.key("r", en, later)
    dated = pb.RecommendRequest(locale="en", as_of="2025-06-01")
    assert ResponseCache.key("r", dated, today) == ResponseCache.key("r", dated, later)
    with pytest.raises(ValueError):
        ResponseCache(0)


def test_a_new_revision_empties_the_cache_and_hits_and_misses_are_counted():
    from service.serving import metrics

    def counted(result: str) -> float:
        return metrics.CACHE.labels(result=result)._value.get()

    store = _Store()
    cache = ResponseCache(8)
    handler = cache.wrap(store, lambda r, _c: pb.RecommendResponse(summary=store.bundle.revision + r.locale))  # type: ignore[arg-type]
    hits, misses = counted("hit"), counted("miss")
    for locale in ("en", "zh-CN", "en"):
        handler(pb.RecommendRequest(locale=locale), None)
    assert (counted("hit") - hits, counted("miss") - misses) == (1, 2)
    assert len(cache) == 2 and cache.bytes > 0
    store.bundle = _Bundle("r2")
    handler(pb.RecommendRequest(locale="en"), None)
    assert len(cache) == 1  # the two answers of r1 went with it, not as they aged out
    assert cache.bytes == len(pb.RecommendResponse(summary="r2en").SerializeToString())


def test_the_cache_is_bounded_by_bytes():
    store = _Store()
    cache = ResponseCache(100, max_bytes=250)
    handler = cache.wrap(store, lambda r, _c: pb.RecommendResponse(summary=r.locale * 100))  # type: ignore[arg-type]
    for locale in ("a", "b", "c"):
        handler(pb.RecommendRequest(locale=locale), None)
    assert len(cache) == 2 and cache.bytes <= 250  # a third 100-byte answer would pass the bound
    handler(pb.RecommendRequest(locale="z" * 3), None)  # 300 bytes: larger than the whole cache, never stored
    assert len(cache) == 2 and cache.bytes <= 250


def test_a_served_process_has_it_on_unless_turned_off(monkeypatch: pytest.MonkeyPatch):
    from service.serving import cache, flags

    monkeypatch.delenv(cache.ENV, raising=False)
    args, _ = flags.parse_args([])
    assert args.response_cache == cache.DEFAULT_SIZE > 0
    monkeypatch.setenv(cache.ENV, "0")
    args, _ = flags.parse_args([])
    assert args.response_cache == 0
