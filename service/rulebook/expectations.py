"""The `expect:` vocabulary of golden cases (shared/cases/README.md), checked against a Recommend answer.

Works on the response in protobuf's JSON form with proto field names, so the same checker serves the shared
cases (through a real server) and the rule authors' tests in rules/tests (in-process), plus `fired` /
`not_fired` for rule ids, which need the trace.
"""

from __future__ import annotations

import re
from typing import Any

from ..domain.offers import expand_countries

KEYS = (
    "status",
    "violations_include",
    "top1_in",
    "not_top1",
    "top3_any",
    "not_candidates",
    "count",
    "not_single",
    "memory_need_gb",
    "route_in",
    "route_not",
    "warnings_include",
    "warnings_exclude",
    "questions_include",
    "questions_nonempty",
    "cost_per_hour",
    "break_even_hours",
    "summary_has_cjk",
    "summary_readable",
    "summary_includes",
    "summary_excludes",
    "provisional",
    "route_depends_on",
    "not_shown_count",
    "unmet_targets",
    "first_question",
    "price_tier",
    "fired",
    "not_fired",
    "placements_whole_instances",
    "placement_countries_in",
    "placement_providers_in",
    "cost_tiers_not",
    "caveats_include",
    # h25
    "questions_exclude",
    "warnings_critical_exclude",
)
CJK = re.compile(r"[\u4e00-\u9fff]")
EXPONENT = re.compile(r"\d[eE][+-]?\d")
UNGROUPED = re.compile(r"(?<![\d.,])\d{5,}")  # 5+ digits in a row, not after a decimal point
RAW_CODE = re.compile(r"\b(?:MISTAKE|ROUTE_KIND|WORKLOAD_TYPE|PRICE_TIER|SUCCESS_UNIT)_[A-Z_]+")
_WIDE = "\u3400-\u4dbf\u4e00-\u9fff\u3000-\u303f\uff00-\uffef"
STRAY_SPACE = re.compile(rf"[{_WIDE}] +[{_WIDE}]|[\u3000-\u303f\uff00-\uffef] | [\u3000-\u303f\uff00-\uffef]")


def summary_problems(text: str) -> list[str]:
    """How a summary fails to read as people write numbers and Chinese: exponent notation, 5+ digits without
    thousands separators, raw enum or warning codes, spaces between CJK characters or beside full-width
    punctuation. Empty when it reads right."""
    out = []
    for name, pattern in (
        ("exponent notation", EXPONENT),
        ("digits without thousands separators", UNGROUPED),
        ("a raw code", RAW_CODE),
        ("a stray space in Chinese text", STRAY_SPACE),
    ):
        hit = pattern.search(text)
        if hit:
            start = max(0, hit.start() - 20)
            out.append(f"summary has {name}: ...{text[start:hit.end() + 20]}...")
    return out


def _in(v: float, rng: list[float]) -> bool:
    return rng[0] <= v <= rng[1]


_CATALOG_BOUND = re.compile(r"^catalog(?: *([-+]) *(\d+))?$")


def catalog_bounds(rng: list[Any], catalog_size: int) -> list[float] | None:
    """A range whose bounds may follow the catalog's size ("catalog - 2"), so adding a GPU breaks no test that
    only means "all but the two shown". None when a bound is neither a number nor such a phrase."""
    out: list[float] = []
    for bound in rng:
        if isinstance(bound, int | float) and not isinstance(bound, bool):
            out.append(float(bound))
            continue
        m = _CATALOG_BOUND.match(str(bound).strip())
        if m is None:
            return None
        sign, n = m.group(1), int(m.group(2) or 0)
        out.append(float(catalog_size - n if sign == "-" else catalog_size + n))
    return out


def check(
    expect: dict[str, Any],
    status: str,
    response: dict[str, Any] | None,
    violations: list[str] | None = None,
    catalog: dict[str, dict[str, float]] | None = None,
    catalog_size: int = 0,
) -> list[str]:
    """Every failed expectation, as a sentence; an empty list means the answer is right. `catalog` (GPU id →
    price kind → USD valid on the request's day) is needed only by ranges relative to the catalog."""
    fails: list[str] = []
    unknown = set(expect) - set(KEYS)
    if unknown:
        fails.append(f"unknown expect keys: {sorted(unknown)}")
    want_status = expect.get("status", "OK")
    if status != want_status:
        return fails + [f"status {status}, expected {want_status}"]
    if want_status != "OK":
        for path in expect.get("violations_include", []):
            if path not in (violations or []):
                fails.append(f"no field violation for {path} (got {violations})")
        return fails
    r = response or {}
    cands = r.get("candidates", [])
    ids = [c.get("gpu") for c in cands]
    by_id = {c.get("gpu"): c for c in cands}
    top = cands[0] if cands else None
    route = str(r.get("route", {}).get("kind", "ROUTE_KIND_UNSPECIFIED")).removeprefix("ROUTE_KIND_")
    codes = [w.get("code") for w in r.get("warnings", [])]
    fields = [q.get("field") for q in r.get("questions", [])]
    fired = {t.get("rule_id") for t in r.get("trace", []) if t.get("fired")}

    if "top1_in" in expect and (top is None or top["gpu"] not in expect["top1_in"]):
        fails.append(f"top candidate {top and top['gpu']} not in {expect['top1_in']}")
    if "not_top1" in expect and top is not None and top["gpu"] in expect["not_top1"]:
        fails.append(f"top candidate {top['gpu']} is one of {expect['not_top1']}")
    if "top3_any" in expect and not set(ids[:3]) & set(expect["top3_any"]):
        fails.append(f"none of {expect['top3_any']} in the first three {ids[:3]}")
    for gpu in expect.get("not_candidates", []):
        if gpu in by_id:
            fails.append(f"{gpu} is a candidate")
    for gpu, rng in expect.get("count", {}).items():
        if gpu not in by_id:
            fails.append(f"{gpu} is not a candidate (count expected in {rng})")
        elif not _in(int(by_id[gpu].get("count", 0)), rng):
            fails.append(f"{gpu} count {by_id[gpu].get('count')} not in {rng}")
    for gpu in expect.get("not_single", []):
        if gpu in by_id and int(by_id[gpu].get("count", 0)) == 1:
            fails.append(f"{gpu} is a candidate with count 1")
    if "memory_need_gb" in expect:
        need = top and top.get("memory", {}).get("need_gb", 0.0)
        if top is None or not _in(float(need), expect["memory_need_gb"]):
            fails.append(f"top memory.need_gb {need} not in {expect['memory_need_gb']}")
    if "route_in" in expect and route not in expect["route_in"]:
        fails.append(f"route {route} not in {expect['route_in']}")
    if "route_not" in expect and route in expect["route_not"]:
        fails.append(f"route {route} is one of {expect['route_not']}")
    for code in expect.get("warnings_include", []):
        if code not in codes:
            fails.append(f"warning {code} missing (got {codes})")
    for code in expect.get("warnings_exclude", []):
        if code in codes:
            fails.append(f"warning {code} present")
    for f in expect.get("questions_include", []):
        if f not in fields:
            fails.append(f"question about {f} missing (got {fields})")
    for f in expect.get("questions_exclude", []):
        if f in fields:
            fails.append(f"question about {f} asked")
    critical = [w.get("code") for w in r.get("warnings", []) if w.get("severity") in ("CRITICAL", "SEVERITY_CRITICAL")]
    for code in expect.get("warnings_critical_exclude", []):
        if code in critical:
            fails.append(f"warning {code} is CRITICAL")
    if expect.get("questions_nonempty") and not fields:
        fails.append("no questions")
    for key, attr in (
        ("cost_per_hour", ("cost", "usd_per_hour")),
        ("break_even_hours", ("ownership", "break_even_hours")),
    ):
        for gpu, rng in expect.get(key, {}).items():
            if gpu not in by_id:
                fails.append(f"{gpu} is not a candidate ({key} expected in {rng})")
                continue
            v = float(by_id[gpu].get(attr[0], {}).get(attr[1], 0.0))
            if isinstance(rng, dict):
                fails += relative_failures(gpu, ".".join(attr), v, rng, catalog)
            elif not _in(v, rng):
                fails.append(f"{gpu} {'.'.join(attr)} {v} not in {rng}")
    summary = r.get("summary", "")
    if expect.get("summary_has_cjk") and not CJK.search(summary):
        fails.append("summary has no Chinese characters")
    if expect.get("summary_readable"):
        fails += summary_problems(summary)
    for text in expect.get("summary_includes", []):
        if text not in summary:
            fails.append(f"summary lacks {text!r}")
    for text in expect.get("summary_excludes", []):
        if text in summary:
            fails.append(f"summary contains {text!r}")
    if "provisional" in expect and bool(r.get("provisional", False)) != expect["provisional"]:
        fails.append(f"provisional is {bool(r.get('provisional', False))}, expected {expect['provisional']}")
    depends = r.get("route", {}).get("depends_on", [])
    for path in expect.get("route_depends_on", []):
        if path not in depends:
            fails.append(f"route does not depend on {path} (depends on {depends})")
    if "not_shown_count" in expect:
        rng = catalog_bounds(expect["not_shown_count"], catalog_size)
        if rng is None:
            fails.append(f"not_shown_count {expect['not_shown_count']}: a bound is neither a number nor "
                         "'catalog', 'catalog - N' or 'catalog + N'")
        elif not _in(int(r.get("not_shown_count", 0)), rng):
            fails.append(f"not_shown_count {r.get('not_shown_count', 0)} not in {rng} ({expect['not_shown_count']} "
                         f"with {catalog_size} GPUs in the catalog)")
    if "unmet_targets" in expect and list(r.get("unmet_targets", [])) != list(expect["unmet_targets"]):
        fails.append(f"unmet_targets {r.get('unmet_targets', [])}, expected {expect['unmet_targets']}")
    if "first_question" in expect and (fields[:1] or [None])[0] != expect["first_question"]:
        fails.append(f"first question is about {fields[:1] or 'nothing'}, expected {expect['first_question']}")
    if "price_tier" in expect:
        tier = str(r.get("price_tier", "PRICE_TIER_UNSPECIFIED")).removeprefix("PRICE_TIER_")
        if tier != expect["price_tier"]:
            fails.append(f"price_tier {tier}, expected {expect['price_tier']}")
    fails += _placement_failures(expect, cands)
    for rid in expect.get("fired", []):
        if rid not in fired:
            fails.append(f"rule {rid} did not fire")
    for rid in expect.get("not_fired", []):
        if rid in fired:
            fails.append(f"rule {rid} fired")
    return fails


def _placement_failures(expect: dict[str, Any], cands: list[dict[str, Any]]) -> list[str]:
    """Where the candidates are placed: whole instances, inside the countries and providers allowed, never
    priced in a tier the case rules out, with the caveats it names."""
    fails: list[str] = []
    countries = expand_countries(expect.get("placement_countries_in", []))
    providers = {p.lower() for p in expect.get("placement_providers_in", [])}
    for c in cands:
        gpu, placements = c.get("gpu"), c.get("placements", [])
        offers = [p.get("offer", {}) for p in placements if p.get("offer", {}).get("instance_type") != "quote"]
        if expect.get("placements_whole_instances") and placements:
            first = placements[0]
            whole = int(first.get("instances", 0)) * int(first.get("offer", {}).get("gpus_per_instance", 0))
            if whole != int(c.get("count", 0)):
                fails.append(f"{gpu} count {c.get('count')} is not whole instances of its first placement ({whole})")
            if abs(float(first.get("usd_per_hour", 0)) - float(c.get("cost", {}).get("usd_per_hour", 0))) > 1e-3:
                fails.append(f"{gpu} cost.usd_per_hour is not its first placement's")
        for o in offers:
            if countries and o.get("country", "") not in countries:
                fails.append(f"{gpu} placed in {o.get('country') or 'an unknown country'} ({o.get('provider')} "
                             f"{o.get('region')}), outside {sorted(expect['placement_countries_in'])}")
            if providers and str(o.get("provider", "")).lower() not in providers:
                fails.append(f"{gpu} placed at {o.get('provider')}, outside {expect['placement_providers_in']}")
        tier = str(c.get("cost", {}).get("price_tier", "")).removeprefix("PRICE_TIER_")
        if tier in expect.get("cost_tiers_not", []):
            fails.append(f"{gpu} is priced at a {tier} rate")
    by_id = {c.get("gpu"): c for c in cands}
    for gpu, rules in expect.get("caveats_include", {}).items():
        got = {x.get("rule_id") for x in by_id.get(gpu, {}).get("caveats", [])}
        if gpu not in by_id:
            fails.append(f"{gpu} is not a candidate (caveats {rules} expected)")
        for rid in rules:
            if gpu in by_id and rid not in got:
                fails.append(f"{gpu} has no caveat from {rid} (got {sorted(got)})")
    return fails


# Ranges relative to the catalog, so a price edit does not need a hand edit of every golden range it moves:
# the figure divided by a basis computed from the catalog prices valid on the request's day.
RELATIVE = {
    # $/h of the whole configuration ÷ the GPU's rent $/GPU-hour = the GPU count (a catalog-priced candidate)
    "catalog_rent_x": lambda p: p["rent"],
    # break-even hours ÷ (purchase $ ÷ rent $/h), the break-even before running costs: ≥ 1 with them
    "catalog_purchase_over_rent_x": lambda p: p["purchase"] / p["rent"],
}


def relative_failures(
    gpu: str, what: str, value: float, spec: dict[str, Any], catalog: dict[str, dict[str, float]] | None
) -> list[str]:
    fails = []
    for basis, rng in spec.items():
        if basis not in RELATIVE:
            fails.append(f"{gpu} {what}: unknown relative range '{basis}' (known: {', '.join(RELATIVE)})")
            continue
        prices = (catalog or {}).get(gpu, {})
        try:
            base = float(RELATIVE[basis](prices))
        except (KeyError, ZeroDivisionError):
            fails.append(f"{gpu} {what}: {basis} needs the catalog's prices for {gpu} (got {prices or 'none'})")
            continue
        ratio = value / base if base else float("inf")
        if not _in(ratio, rng):
            fails.append(f"{gpu} {what} {value} is {ratio:.4g} x {basis.removeprefix('catalog_').removesuffix('_x')}"
                         f" ({base:.4g} from the catalog), not in {rng}")
    return fails
