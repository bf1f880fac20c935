"""No internal references in what users read (issue 25): no working-file names of the source documents ("seed
000_…", "neither seed's…", 两份种子文档), no paths to the project's private folders (`shared/…`, "via shared
offers-reference") and no `../` paths, in answers to every example brief in both locales, the CLI's tables, the
list RPCs, the catalog, the offer tables and the docs. Sources name the published document by title and date."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict

from service.frontends import cli
from service.frontends.brief_file import load_request
from service.gen.gpuadvisor.v1 import advisor_pb2 as pb

REPO = Path(__file__).parents[1]
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))
DOCS = [REPO / "README.md", REPO / "rules" / "README.md", REPO / "client" / "README.md",
        REPO / "deploy" / "README.md", *sorted((REPO / "docs").glob("*.md"))]

# "shared" alone is a word users may read (MoE shared experts, a shared namespace): the folder and the offer
# reference it held are what must not appear. A markdown link's target may climb (`](../rules/README.md)`): it
# resolves inside the repository.
INTERNAL = re.compile(
    r"seed 0|seed's|\bseeds?\b|种子|shared/|via shared|shared offers|offers-reference|(?<!\]\()\.\./", re.IGNORECASE
)


def internal(text: str) -> list[str]:
    return [text[max(0, m.start() - 40):m.end() + 40] for m in INTERNAL.finditer(text)]


def _offer_sources() -> list[str]:
    out = set()
    for table in sorted((REPO / "rules" / "offers").glob("*.csv")):
        with table.open(encoding="utf-8", newline="") as f:
            out |= {row.get("source") or "" for row in csv.DictReader(ln for ln in f if not ln.startswith("#"))}
    return sorted((s for s in out if s), key=len, reverse=True)


OFFER_SOURCES = _offer_sources()


def _strings(node: Any, skip_offer_source: bool) -> list[str]:
    """Every string in a JSON answer; offer rows' sources (also where a sentence quotes one) are left to the
    offer-table test below."""
    if isinstance(node, str):
        if skip_offer_source:
            for src in OFFER_SOURCES:
                node = node.replace(src, "")
        return [node]
    if isinstance(node, list):
        return [s for x in node for s in _strings(x, skip_offer_source)]
    if isinstance(node, dict):
        is_offer = "instance_type" in node and "provider" in node
        return [s for k, v in node.items() if not (skip_offer_source and is_offer and k == "source")
                for s in _strings(v, skip_offer_source)]
    return []


def test_the_pattern_finds_what_the_issue_found():
    for bad in ("seed 000_02169683c836b5ac.txt, cost-per-TFLOP table", "Neither seed's workload matrix",
                "两份种子文档的工作负载矩阵", "v7 gcp/vms.csv (via shared offers-reference)", "../shared/data"):
        assert internal(bad), bad
    for fine in ("MoE decode reads the shared weights", "see [rules/README.md](../rules/README.md)"):
        assert not internal(fine), fine


@pytest.mark.parametrize("locale", ["en", "zh-CN"])
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_answers_to_the_examples_name_nothing_internal(stub: Any, path: Path, locale: str):
    req = load_request(path)
    req.locale = locale
    req.max_candidates = 50
    answer = MessageToDict(stub.Recommend(req, timeout=30), preserving_proto_field_name=True)
    found = [hit for s in _strings(answer, skip_offer_source=True) for hit in internal(s)]
    assert not found, found


def test_list_gpus_and_offers_name_nothing_internal(stub: Any):
    gpus = MessageToDict(stub.ListGpus(pb.ListGpusRequest(), timeout=30), preserving_proto_field_name=True)
    offers = MessageToDict(stub.ListOffers(pb.ListOffersRequest(), timeout=30), preserving_proto_field_name=True)
    found = [hit for s in _strings(gpus, False) + _strings(offers, True) for hit in internal(s)]
    assert not found, found


def test_cli_gpus_table_names_nothing_internal(server: Any, capsys: pytest.CaptureFixture[str]):
    assert cli.main(["gpus", "--addr", server.addr]) == 0
    out = capsys.readouterr().out
    assert "h100-sxm" in out and not internal(out), internal(out)


def test_catalog_sources_name_published_documents():
    text = (REPO / "rules" / "catalog" / "gpus.yaml").read_text(encoding="utf-8")
    sources = re.findall(r'source: "([^"]*)"', text)
    assert len(sources) > 20
    found = [hit for s in sources for hit in internal(s)]
    assert not found, found


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_docs_name_nothing_internal(path: Path):
    found = internal(path.read_text(encoding="utf-8"))
    assert not found, found


def test_offer_sources_name_nothing_internal():
    found = []
    for table in sorted((REPO / "rules" / "offers").glob("*.csv")):
        with table.open(encoding="utf-8", newline="") as f:
            for row in csv.DictReader(ln for ln in f if not ln.startswith("#")):
                found += [f"{table.name}: {hit}" for hit in internal(json.dumps(row, ensure_ascii=False))]
    assert OFFER_SOURCES and not found, found[:5]
