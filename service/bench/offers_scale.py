"""How an answer's cost grows with the offer tables: the same briefs answered in-process on the rules with no
offers, with the 1,842-row reference table (../shared/data/offers-reference, imported as `gpu-advisor offers
import` would), and with 50,000 synthetic rows; rounds alternate so the machine's noise falls on all three alike.
Also the time to load 50,000 rows (a cold start and a live reload) and the memory they take.

Targets (issue 14): reference <= 1.3x and 50,000 rows <= 2x of no offers per Recommend; 50,000 rows load in
under 5 s.
"""

from __future__ import annotations

import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import date
from pathlib import Path
from typing import Any

REPO = Path(__file__).parents[2]
REFERENCE = REPO.parent / "shared" / "data" / "offers-reference"
SYNTHETIC_ROWS = 50_000
ROWS_PER_FILE = 5_000  # each file well under the 8 MB an offer table may take
TIERS = ("on_demand", "spot", "reserved", "marketplace")


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _rules_with(offers: Callable[[Path], str]) -> tuple[Path, str]:
    """A temporary copy of rules/ whose offers/ holds what `offers(folder)` writes; (root, what it holds)."""
    root = Path(tempfile.mkdtemp(prefix="bench-offers-")) / "rules"
    shutil.copytree(REPO / "rules", root, ignore=shutil.ignore_patterns("*.csv"))
    (root / "offers").mkdir(exist_ok=True)
    shutil.copy(REPO / "rules" / "offers" / "accelerators.csv", root / "offers" / "accelerators.csv")
    return root, offers(root / "offers")


def _none(_: Path) -> str:
    return "no offers"


def _reference(folder: Path) -> str:
    from ..market.importers.__main__ import catalog_memory
    from ..market.importers.common import write_offers_csv
    from ..market.importers.skypilot import import_skypilot
    from ..rulebook.accelerators import read_accelerator_map

    memory = catalog_memory()
    amap, _ = read_accelerator_map("accelerators.csv", (folder / "accelerators.csv").read_text(), set(memory))
    amap.catalog_gb = memory  # GPUs told apart by their memory too, as `offers import` does
    rows, report = import_skypilot(REFERENCE, amap, date(2026, 12, 1))
    write_offers_csv(rows, folder / "reference.csv")
    return f"reference: {report.rows_read:,} rows read, {len(rows):,} offers of catalog GPUs"


def synthetic_rows(n: int, seed: int = 14) -> list[dict[str, str]]:
    """`n` offers shaped like the market: 60 providers, 1/2/4/8-GPU shapes, 40 regions in 20 countries, four tiers,
    prices around each GPU's shipped on-demand median (x0.6-x2.5), so a few are cheaper than today's cheapest."""
    from ..rulebook.folder import load_rulebook

    book, _ = load_rulebook(REPO / "rules")
    assert book is not None
    day = date(2026, 12, 1)
    base = {g.id: (book.offers.market(g.id, "on_demand", day) or (3.0, 3.0, 3.0, 0, 0))[1] for g in book.catalog}
    rng = random.Random(seed)
    countries = ["US", "CA", "DE", "FR", "NL", "FI", "SE", "GB", "NO", "IE", "ES", "IT", "PL", "JP", "SG", "IN",
                 "AU", "BR", "KR", "CH"]
    out = []
    for i in range(n):
        gpu = rng.choice(sorted(base))
        gpi = rng.choice((1, 2, 4, 8))
        tier = rng.choice(TIERS)
        region = rng.randrange(40)
        out.append({
            "provider": f"synth{rng.randrange(60):02d}", "instance_type": f"{gpu}-{gpi}x-{i}", "gpu": gpu,
            "gpus_per_instance": str(gpi), "region": f"region-{region}", "country": countries[region % 20],
            "tier": tier, "usd_per_hour": f"{base[gpu] * gpi * rng.uniform(0.6, 2.5):.4f}", "as_of": "2026-12-01",
            "source": "synthetic (make bench)", "valid_from": "2026-12-01",
            "term_months": ("12" if i % 2 else "36") if tier == "reserved" else "",  # a reserved row has a term
        })
    return out


def _synthetic(folder: Path) -> str:
    from ..domain.offers import COLUMNS, EXTRA_COLUMNS

    columns = COLUMNS + EXTRA_COLUMNS
    rows = synthetic_rows(SYNTHETIC_ROWS)
    for start in range(0, len(rows), ROWS_PER_FILE):
        chunk = rows[start:start + ROWS_PER_FILE]
        text = "\n".join([",".join(columns)] + [",".join(r.get(c, "") for c in columns) for r in chunk]) + "\n"
        (folder / f"synthetic-{start // ROWS_PER_FILE:02d}.csv").write_text(text, encoding="utf-8")
    return f"synthetic: {len(rows):,} offers"


def run_offers_scale(requests: Sequence[Any], rounds: int = 12) -> None:
    from ..rulebook.folder import load_rulebook
    from ..rulebook.store import RuleStore
    from ..rulebook.version import Bundle

    print("6. Offers scale: the same briefs answered in-process with no offers, the reference table and 50,000 "
          "synthetic rows (rounds alternate)")
    tables: list[tuple[str, Path, str]] = []
    for name, make in (("none", _none), ("reference", _reference), ("50k", _synthetic)):
        if name == "reference" and not REFERENCE.is_dir():
            print(f"  (reference table skipped: {REFERENCE} is not here)")
            continue
        root, said = _rules_with(make)
        tables.append((name, root, said))
    bundles: dict[str, Any] = {}
    for name, root, said in tables:
        before = _rss_mb()
        started = time.perf_counter()
        book, problems = load_rulebook(root)
        took = time.perf_counter() - started
        assert book is not None, [str(p) for p in problems if p.severity == "error"][:5]
        bundles[name] = Bundle(book, loaded_at=None)  # type: ignore[arg-type]
        print(f"  {name:9} {said}: loaded in {took:.2f} s (cold, with lints), RSS {_rss_mb() - before:+.1f} MB, "
              f"{len(book.offers):,} offers")
    plain = [replace(r, include_trace=False) for r in requests]
    for b in bundles.values():  # warm: per-rules tables, placement verdicts, offer indexes for the day
        for r in plain:
            b.advise(r)
    samples: dict[str, list[float]] = {name: [] for name in bundles}
    for _ in range(rounds):
        for name, b in bundles.items():
            t = time.process_time()
            for r in plain:
                b.advise(r)
            samples[name].append((time.process_time() - t) * 1000 / len(plain))
    base = statistics.median(samples["none"])
    for name, values in samples.items():
        med = statistics.median(values)
        print(f"  {name:9} CPU per answer median {med:6.2f} ms  ({med / base:.2f}x of no offers)")
    if "50k" in bundles:
        root = next(r for n, r, _ in tables if n == "50k")
        store = RuleStore(root)
        store.load()
        target = root / "offers" / "synthetic-00.csv"
        target.write_text(target.read_text(encoding="utf-8").replace("synthetic (make bench)", "synthetic (edit)",
                                                                      1), encoding="utf-8")
        started = time.perf_counter()
        result = store.reload()
        took = time.perf_counter() - started
        assert result.ok and result.changed, result
        print(f"  live reload of the 50,000-row rules after a one-row edit: {took:.2f} s")
        store.close()
    for b in bundles.values():
        b.retire(None)
    for _, root, _ in tables:
        shutil.rmtree(root.parent, ignore_errors=True)
