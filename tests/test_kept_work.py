"""Work kept per rules version between answers (the rules matched per fact, placement options per leaders, the
missed-target suggestion's latencies, the speeds) changes no answer: the same requests answered in one order on
one rules load and in the reverse order on another give the same bytes, and a reload starts with nothing kept."""

from __future__ import annotations

from dataclasses import replace

from google.protobuf.json_format import ParseDict
from ruamel.yaml import YAML

from service.decide import tables
from service.decide.run import compiled
from service.rulebook.folder import load_rulebook
from service.rulebook.version import Bundle
from service.wire.api import advice_to_proto, pb, request_from_proto
from service.wire.validate import validate
from tests.conftest import RULES, TODAY
from tests.fuzz_requests import request_from_seed
from tests.test_cases import REPO, SHARED_CASES


def _requests(bundle: Bundle) -> list[pb.RecommendRequest]:
    out = []
    for path in sorted((REPO / "tests" / "cases").glob("*.yaml")) + sorted(SHARED_CASES.glob("*.yaml")):
        case = YAML(typ="safe").load(path.read_text(encoding="utf-8"))
        if "status" not in case.get("expect", {}):
            out.append(ParseDict(case["request"], pb.RecommendRequest()))
    for seed in range(120):
        r = request_from_seed(seed * 7919 + 11)
        if not validate(r, bundle.known_gpu_ids()):
            out.append(r)
    return out


def test_answers_do_not_depend_on_what_was_kept(bundle: Bundle) -> None:
    reqs = [request_from_proto(r) for r in _requests(bundle)]
    reqs += [replace(r, include_trace=True) for r in reqs[:20]]
    first = [advice_to_proto(bundle.advise(r)).SerializeToString(deterministic=True) for r in reqs]
    again = [advice_to_proto(bundle.advise(r)).SerializeToString(deterministic=True) for r in reqs]
    assert again == first
    book, problems = load_rulebook(RULES, today=TODAY)
    assert book is not None, problems
    other = Bundle(book, loaded_at=None)  # type: ignore[arg-type]
    try:
        # a reload keeps nothing of the other version
        assert compiled(book).matches is not compiled(bundle.book).matches
        assert tables.tables(book.assumptions) is not tables.tables(bundle.book.assumptions)
        assert not tables.tables(book.assumptions).latencies
        reverse = [advice_to_proto(other.advise(r)).SerializeToString(deterministic=True) for r in reversed(reqs)]
    finally:
        other.retire(None)
    assert list(reversed(reverse)) == first


def test_oracle_answers_every_request_the_same_on_warm_caches() -> None:
    """The bench's answer oracle (python -m service.bench.oracle) runs and finds no reply that moved."""
    from service.bench import oracle

    got = oracle.hashes(oracle.REPO, fuzzed=12, hostile=0, seed=5)
    assert "!moved on warm caches" not in got
    assert sum(k.startswith("fuzz/") for k in got) == 12 * 4
    assert len(set(got.values())) > len(got) // 4  # distinct answers, not one refusal hashed again and again
