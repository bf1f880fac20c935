"""The installed client covers the list calls (ListGpus, ListOffers, ListModels), sync and async, against a real
server, and client/README.md's examples run as written (issue 25), with the server's address for the README's."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

try:
    from gpu_advisor_client import AsyncClient, Client, InvalidArgument, enum_name
except ImportError as err:  # pragma: no cover - a setup problem, reported as such
    pytest.fail(f"gpu_advisor_client is not installed ({err}): run `make client` (make test does)", pytrace=False)

README = Path(__file__).parents[1] / "client" / "README.md"
README_ADDR = "127.0.0.1:50051"


def _python_blocks(heading: str) -> list[str]:
    """The ```python blocks of one section of client/README.md."""
    text = README.read_text(encoding="utf-8")
    section = text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_sync_lists(server: Any):
    with Client(server.addr, timeout=30) as advisor:
        gpus = advisor.list_gpus().gpus
        assert "h100-sxm" in {g.id for g in gpus}
        page = advisor.list_offers("h100-sxm", tier="on_demand", page_size=3)
        assert 0 < len(page.offers) <= 3 and page.total >= len(page.offers)
        assert {o.gpu for o in page.offers} == {"h100-sxm"}
        assert {enum_name(o, "tier") for o in page.offers} == {"PRICE_TIER_ON_DEMAND"}
        prices = [o.usd_per_gpu_hour for o in page.offers]
        assert prices == sorted(prices)  # cheapest first
        if page.next_page_token:  # the next page continues where this one stopped
            more = advisor.list_offers("h100-sxm", tier="PRICE_TIER_ON_DEMAND", page_size=3,
                                       page_token=page.next_page_token)
            assert more.offers and more.offers[0].usd_per_gpu_hour >= prices[-1]
        eu = advisor.list_offers(country="EU", page_size=50).offers
        assert eu and all(o.country for o in eu)
        models = advisor.list_models("llama", kind="llm").models
        assert models and all("llama" in (m.id + m.name + " ".join(m.aliases)).lower() for m in models)
        assert len(advisor.list_models().models) > len(models)


def test_api_offer_lists_sync_and_async(server: Any):
    with Client(server.addr, timeout=30) as advisor:
        page = advisor.list_api_offers("meta-llama/Llama-3.1-8B-Instruct", page_size=3)
        assert 0 < len(page.offers) <= 3 and page.total >= len(page.offers)
        assert {o.registry_model for o in page.offers} == {"llama-3.1-8b-instruct"}
        with pytest.raises(InvalidArgument) as err:
            advisor.list_api_offers("no-such-model")
        assert "model" in str(err.value)

    async def main() -> Any:
        async with AsyncClient(server.addr, timeout=30) as advisor:
            return await advisor.list_api_offers(country="US", page_size=5)

    us = asyncio.run(main())
    assert us.offers and all(o.country == "US" for o in us.offers)


def test_a_bad_tier_is_refused_before_sending(server: Any):
    with Client(server.addr, timeout=30) as advisor, pytest.raises(InvalidArgument) as err:
        advisor.list_offers(tier="cheapest")
    assert "tier" in str(err.value)


def test_async_lists(server: Any):
    async def main() -> tuple[Any, Any, Any]:
        async with AsyncClient(server.addr, timeout=30) as advisor:
            return await asyncio.gather(advisor.list_gpus(), advisor.list_offers("l4", page_size=2),
                                        advisor.list_models(kind="embedding"))

    gpus, offers, models = asyncio.run(main())
    assert len(gpus.gpus) >= 10
    assert offers.offers and {o.gpu for o in offers.offers} == {"l4"}
    assert models.models and {enum_name(m, "kind") for m in models.models} == {"MODEL_KIND_EMBEDDING"}


@pytest.mark.parametrize("heading", ["Async", "Sync"])
def test_readme_examples_run_as_written(server: Any, heading: str, tmp_path: Path):
    blocks = [b for b in _python_blocks(heading) if README_ADDR in b]
    assert blocks, f"no runnable example under '## {heading}'"
    for i, block in enumerate(blocks):
        script = tmp_path / f"example_{i}.py"
        script.write_text(block.replace(README_ADDR, server.addr), encoding="utf-8")
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                              cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.strip(), f"example {i} under '## {heading}' printed nothing"
