"""Rule tests judge the rules' own text, not data quoted into it (issue 38 item 2): `summary_readable` refused a
50,000-offer table whose instance names end in 5-digit suffixes (`-v19592`) for "digits without thousands
separators", so a refresh would have been refused whole the day a provider names an instance that way."""

from __future__ import annotations

import csv
import io
from datetime import date
from pathlib import Path

from service.rulebook import ruletests
from service.rulebook.expectations import check, echoed_strings, summary_problems
from service.rulebook.folder import load_rulebook
from service.rulebook.version import Bundle


def test_a_quoted_instance_name_is_not_the_rules_text() -> None:
    response = {"summary": "Top pick: **8x H100** on lambda gpu-8x-h100-v19592 (us-east-19001) at $23.92/h",
                "candidates": [{"gpu": "h100-sxm", "placements": [{"offer": {
                    "provider": "lambda", "instance_type": "gpu-8x-h100-v19592", "region": "us-east-19001"}}]}]}
    assert echoed_strings(response) == {"lambda", "gpu-8x-h100-v19592", "us-east-19001"}
    assert check({"summary_readable": True}, "OK", response) == []
    assert summary_problems(response["summary"])  # unmasked, the data would have been judged
    # the rules' own figures are still judged, beside the quoted data
    response["summary"] += ", 93960000 tokens a month"
    [why] = check({"summary_readable": True}, "OK", response)
    assert why.startswith("summary has digits without thousands separators") and "93960000" in why


def _suffixed(text: str, start: int) -> tuple[str, int]:
    rows = list(csv.reader(io.StringIO(text, newline="")))
    at = rows[0].index("instance_type")
    for row in rows[1:]:
        if len(row) > at and row[at]:
            row[at] = f"{row[at]}-v{start}"
            start += 1
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue(), start


def test_the_shipped_rule_tests_pass_on_instance_names_with_5_digit_suffixes(rules_copy: Path) -> None:
    n = 19_000
    for path in sorted((rules_copy / "offers").glob("*.csv")):
        if path.name != "accelerators.csv":
            text, n = _suffixed(path.read_text(encoding="utf-8"), n)
            path.write_text(text, encoding="utf-8")
    book, problems = load_rulebook(rules_copy, today=date(2026, 12, 1))
    assert book is not None, [str(p) for p in problems if p.severity == "error"][:3]
    bundle = Bundle(book, loaded_at=None)  # type: ignore[arg-type]
    report = ruletests.run(bundle, rules_copy)
    readable = [f for r in report.results for f in r.failures if f.startswith("summary has")]
    assert readable == []
    # the suffixes do reach the summaries these tests judge: without the masking they would fail
    quoted = []
    for _name, _loc, case in ruletests.load_cases(rules_copy / "tests", rules_copy.name)[0]:
        if case["expect"].get("summary_readable") and case.get("request", {}).get("locale", "en") == "en":
            from google.protobuf.json_format import ParseDict

            from service.wire import api

            request = ParseDict(case["request"], api.pb.RecommendRequest())
            advice = bundle.advise(api.request_from_proto(request))
            if "-v1" in advice.summary:
                quoted.append(summary_problems(advice.summary))
    assert quoted and any(quoted), "no readable-checked summary quotes a suffixed instance name"
