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
    "reasons_include",
    # issue 21: the offer a team should take
    "gpus_needed",
    "fills_rented_gpus",
    "spare_gpus",
    "top_placed",
    "placed_rank_first",
    "top_tier",
    "top_term_months_max",
    "headline_names_top_offer",
    # issue 25:
    "questions_exclude",
    "warnings_critical_exclude",
    # issue 37:
    "no_questions",
    # issue 41: a training run sized to the run
    "top1_count",
    "training_hours",
    # issue 35: the model-API leg
    "api_headline",
    "api_compared",
)
CJK = re.compile(r"[\u4e00-\u9fff]")
EXPONENT = re.compile(r"\d[eE][+-]?\d")
UNGROUPED = re.compile(r"(?<![\d.,])\d{5,}")  # 5+ digits in a row, not after a decimal point
RAW_CODE = re.compile(r"\b(?:MISTAKE|ROUTE_KIND|WORKLOAD_TYPE|PRICE_TIER|SUCCESS_UNIT)_[A-Z_]+")
_WIDE = "\u3400-\u4dbf\u4e00-\u9fff\u3000-\u303f\uff00-\uffef"
STRAY_SPACE = re.compile(rf"[{_WIDE}] +[{_WIDE}]|[\u3000-\u303f\uff00-\uffef] | [\u3000-\u303f\uff00-\uffef]")


# Response fields whose strings are data the summary may quote as they are (an offer table's instance names and
# regions, a price's source, a model id): what the rules write is checked, not what the data says. A 50,000-row
# table whose instance names end in `-v19592` was once refused whole for "digits without thousands separators".
ECHOED_KEYS = frozenset({"provider", "instance_type", "region", "country", "source", "model_id", "id"})
_MASK = "\u2026"  # what an echoed string reads as while the summary is checked: no digit, letter or space


def echoed_strings(response: Any) -> set[str]:
    """Every string the response carries under ECHOED_KEYS, at any depth."""
    out: set[str] = set()
    todo = [response]
    while todo:
        node = todo.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ECHOED_KEYS and isinstance(value, str) and value.strip():
                    out.add(value)
                elif isinstance(value, (dict, list)):
                    todo.append(value)
        elif isinstance(node, list):
            todo.extend(v for v in node if isinstance(v, (dict, list)))
    return out


def summary_problems(text: str, echoed: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """How a summary fails to read as people write numbers and Chinese: exponent notation, 5+ digits without
    thousands separators, raw enum or warning codes, spaces between CJK characters or beside full-width
    punctuation. Empty when it reads right. The `echoed` strings (data quoted as it is: an instance name, a
    region) are left out first: the rules' own text is what is judged."""
    for data in sorted(echoed, key=len, reverse=True):
        text = text.replace(data, _MASK)
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


def _training_run(expect: dict[str, Any], top: dict[str, Any] | None, by_id: dict[Any, Any]) -> list[str]:
    """top1_count: the first candidate's GPUs; training_hours: {gpu: [min, max]} of a candidate's run, in hours."""
    fails = []
    if "top1_count" in expect:
        n = int((top or {}).get("count", 0))
        if not _in(n, expect["top1_count"]):
            fails.append(f"top pick has {n} GPUs, expected {expect['top1_count']}")
    for gpu, rng in expect.get("training_hours", {}).items():
        c = by_id.get(gpu)
        hours = float((c or {}).get("performance", {}).get("training_days", 0.0)) * 24
        if c is None or not _in(hours, rng):
            fails.append(f"{gpu} training hours {hours:.2f} not in {rng}")
    return fails


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
    fails += _training_run(expect, top, by_id)
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
    if expect.get("no_questions") and fields:
        fails.append(f"questions left open: {fields}")
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
                fails += relative_failures(gpu, ".".join(attr), v, rng, catalog, by_id[gpu])
            elif not _in(v, rng):
                fails.append(f"{gpu} {'.'.join(attr)} {v} not in {rng}")
    summary = r.get("summary", "")
    if expect.get("summary_has_cjk") and not CJK.search(summary):
        fails.append("summary has no Chinese characters")
    if expect.get("summary_readable"):
        fails += summary_problems(summary, echoed_strings(r))
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
    fails += offer_failures(expect, cands, summary)
    fails += _api_fails(expect, r, summary)
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
    for key, field in (("caveats_include", "caveats"), ("reasons_include", "reasons")):
        what = field.removesuffix("s")
        for gpu, rules in expect.get(key, {}).items():
            got = {x.get("rule_id") for x in by_id.get(gpu, {}).get(field, [])}
            if gpu not in by_id:
                fails.append(f"{gpu} is not a candidate ({field} {rules} expected)")
            for rid in rules:
                if gpu in by_id and rid not in got:
                    fails.append(f"{gpu} has no {what} from {rid} (got {sorted(got)})")
    return fails


# Ranges relative to the catalog, so a price edit does not need a hand edit of every golden range it moves:
# the figure divided by a basis computed from the catalog prices valid on the request's day.
RELATIVE = {
    # $/h of the whole configuration ÷ the GPU's rent $/GPU-hour = the GPU count (a catalog-priced candidate)
    "catalog_rent_x": lambda p: p["rent"],
    # break-even hours ÷ (purchase $ ÷ rent $/h), the break-even before running costs: ≥ 1 with them
    "catalog_purchase_over_rent_x": lambda p: p["purchase"] / p["rent"],
    # $/h ÷ the $/GPU-hour that prices the candidate (its offer when placed, else the catalog's rent) = the GPUs
    # rented, whatever today's offer rows are
    "priced_rent_x": lambda p: p["priced"],
}


def _offer_of(candidate: dict[str, Any]) -> dict[str, Any] | None:
    """The offer that prices a placed candidate (its first placement, whose $/h is the candidate's), else None."""
    placements = candidate.get("placements", [])
    if not placements:
        return None
    first = placements[0]
    cost = float(candidate.get("cost", {}).get("usd_per_hour", 0.0))
    if abs(float(first.get("usd_per_hour", 0.0)) - cost) > 1e-3:
        return None
    offer = first.get("offer", {})
    return offer if offer.get("instance_type") != "quote" else None


def relative_failures(
    gpu: str, what: str, value: float, spec: dict[str, Any], catalog: dict[str, dict[str, float]] | None,
    candidate: dict[str, Any] | None = None,
) -> list[str]:
    fails = []
    offer = _offer_of(candidate or {})
    for basis, rng in spec.items():
        if basis not in RELATIVE:
            fails.append(f"{gpu} {what}: unknown relative range '{basis}' (known: {', '.join(RELATIVE)})")
            continue
        prices = dict((catalog or {}).get(gpu, {}))
        if "rent" in prices:
            prices["priced"] = prices["rent"]
        if offer is not None and float(offer.get("usd_per_gpu_hour", 0.0)) > 0:
            prices["priced"] = float(offer["usd_per_gpu_hour"])
        try:
            base = float(RELATIVE[basis](prices))
        except (KeyError, ZeroDivisionError):
            fails.append(f"{gpu} {what}: {basis} needs the catalog's prices for {gpu} (got {prices or 'none'})")
            continue
        ratio = value / base if base else float("inf")
        if _in(ratio, rng):
            continue
        from_where = "the catalog"
        if basis == "priced_rent_x" and offer is not None:
            from_where = f"the offer {offer.get('provider')} {offer.get('instance_type')} that prices it"
        msg = (f"{gpu} {what} {value} is {ratio:.4g} x {basis.removesuffix('_x')} ({base:.4g} from {from_where}), "
               f"not in {rng}")
        if basis.startswith("catalog_") and offer is not None:
            # The range follows the catalog while an offer prices the candidate: an offer refresh moves the figure
            # and no catalog edit moves it back. Say so, and what to write instead.
            msg += (f"; {gpu} is priced from an offer ({offer.get('provider')} {offer.get('instance_type')}, "
                    f"${float(offer.get('usd_per_gpu_hour', 0.0)):.4g}/GPU-h), not the catalog: write the range "
                    "relative to the price in use (priced_rent_x: GPUs rented), or test the rule's effect "
                    "(fired, reasons_include) instead of today's prices")
        fails.append(msg)
    return fails


def _placed(c: dict[str, Any]) -> bool:
    return any(p.get("offer", {}).get("instance_type") != "quote" for p in c.get("placements", []))


def offer_failures(expect: dict[str, Any], cands: list[dict[str, Any]], summary: str) -> list[str]:
    """The offer a candidate is rented on: GPUs needed against rented, spare or put to work, rentable ones
    first, the tier and term of the first pick, and a headline that names where it is rented."""
    fails: list[str] = []
    by_id = {c.get("gpu"): c for c in cands}
    for key in ("gpus_needed", "spare_gpus"):
        for gpu, rng in expect.get(key, {}).items():
            c = by_id.get(gpu)
            if c is None:
                fails.append(f"{gpu} is not a candidate ({key} expected in {rng})")
                continue
            count, needed = int(c.get("count", 0)), int(c.get("gpus_needed", 0))
            perf = c.get("performance", {})
            used = int(perf.get("replicas", 0)) * int(perf.get("tensor_parallel", 0)) or count
            v = needed if key == "gpus_needed" else count - used
            if not _in(v, rng):
                fails.append(f"{gpu} {key} {v} not in {rng} (count {count}, needs {needed}, in use {used})")
    for gpu in expect.get("fills_rented_gpus", []):
        c = by_id.get(gpu)
        perf = (c or {}).get("performance", {})
        used = int(perf.get("replicas", 0)) * int(perf.get("tensor_parallel", 0))
        if c is None or used != int(c.get("count", 0)):
            fails.append(f"{gpu} does not run copies on every rented GPU ({used} of {c and c.get('count')})")
    top = cands[0] if cands else None
    if "top_placed" in expect and (top is not None and _placed(top)) != expect["top_placed"]:
        fails.append(f"top candidate placed is {top is not None and _placed(top)}, expected {expect['top_placed']}")
    if expect.get("placed_rank_first"):
        flags = [_placed(c) for c in cands]
        if True in flags and False in flags and flags.index(False) < len(flags) - 1 - flags[::-1].index(True):
            fails.append(f"an unplaced candidate ranks before a placed one: {[c.get('gpu') for c in cands]} "
                         f"placed {flags}")
    if "top_tier" in expect:
        tier = str((top or {}).get("cost", {}).get("price_tier", "")).removeprefix("PRICE_TIER_")
        if tier != expect["top_tier"]:
            fails.append(f"top candidate priced at {tier or 'no'} tier, expected {expect['top_tier']}")
    if "top_term_months_max" in expect:
        offer = ((top or {}).get("placements") or [{}])[0].get("offer", {})
        term = int(offer.get("term_months", 0))
        if not 0 < term <= expect["top_term_months_max"]:
            fails.append(f"top candidate's term is {term} months, expected 1..{expect['top_term_months_max']}")
    if expect.get("headline_names_top_offer"):
        offer = ((top or {}).get("placements") or [{}])[0].get("offer", {})
        line = next((x for x in summary.splitlines() if x.startswith(("Top pick", "首选"))), "")
        for part in ("provider", "instance_type", "region", "country"):  # runpod's region is its country
            if not offer.get(part) or str(offer[part]) not in line:
                fails.append(f"the headline does not name the top offer's {part} {offer.get(part)!r}: {line!r}")
    return fails


def _api_fails(expect: dict[str, Any], r: dict[str, Any], summary: str) -> list[str]:
    """`api_compared`: whether the answer carries the model-API leg (`api`); `api_headline`: the summary's first line
    after its title names the leg's provider and its monthly cost as printed ($1,234)."""
    fails: list[str] = []
    api = r.get("api")
    if "api_compared" in expect and bool(api) != bool(expect["api_compared"]):
        want = "present" if expect["api_compared"] else "absent"
        fails.append(f"api leg {'present' if api else 'absent'}, expected {want}")
    if expect.get("api_headline"):
        lines = summary.splitlines()
        head = lines[1] if len(lines) > 1 else ""
        if not api:
            fails.append("no api leg to name in the headline")
        else:
            month = f"${float(api.get('usd_per_month', 0)):,.0f}"
            for part in (api.get("offer", {}).get("provider", "?"), month):
                if part not in head:
                    fails.append(f"the headline does not name the API's {part!r}: {head!r}")
    return fails
