"""`gpu-advisor-rules`: the rule authors' toolchain.

check DIR   every problem at once, as `path:line:col [rule-id] message`, then the rule tests, as the server
            vets a version before serving it; exit 1 on any error, warning or failed test (`--no-tests`: check only)
test DIR    run DIR/tests/*.yaml in-process; coverage of rules no case fires; `--format json|junit`
facts       the facts (and their fields) rules can test
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import date
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from ..rulebook.folder import load_rulebook


def _check(args: argparse.Namespace) -> int:
    """What the server does before it serves a version: load and check it, then run its rule tests (a version
    whose tests fail is rejected there, so it fails here too). `--no-tests` checks only."""
    today = date.fromisoformat(args.today) if args.today else None
    book, problems = load_rulebook(args.dir, today=today, max_price_age_days=args.max_price_age_days)
    errors = [p for p in problems if p.severity == "error"]
    warnings = [p for p in problems if p.severity != "error"]
    report = _rule_tests(book, Path(args.dir)) if book is not None and not errors and not args.no_tests else None
    failed = report is not None and (report.failed > 0 or bool(report.problems))
    if args.format == "json":
        out = {"ok": not errors and not failed and (args.allow_warnings or not warnings),
               "problems": [p.__dict__ for p in problems]}
        if report is not None:
            out["tests"] = report.to_dict()
        print(json.dumps(out, indent=2, ensure_ascii=False))
    else:
        for p in problems:
            print(p)
        tested = ""
        if report is not None:
            for p in report.problems:
                print(p)
            for r in report.results:
                if not r.passed:
                    # Where the author looks: the case's file:line, as the server's rejection names it.
                    print(f"{r.location} [rule test] {r.name}: {'; '.join(r.failures)}")
            tested = f"; rule tests: {report.passed} passed, {report.failed} failed"
        if book is not None:
            counts = book.counts()
            print(
                f"{args.dir}: {counts['rules']} rules, {counts['gpus']} GPUs, {counts['files']} files; "
                f"{len(errors)} errors, {len(warnings)} warnings{tested}",
                file=sys.stderr,
            )
        else:
            print(f"{args.dir}: {len(errors)} errors, {len(warnings)} warnings", file=sys.stderr)
    if errors or failed or (warnings and not args.allow_warnings):
        return 1
    return 0


def _rule_tests(book, root: Path):  # noqa: ANN001, ANN202 - Rulebook -> ruletests.Report
    from ..rulebook import ruletests
    from ..rulebook.version import Bundle

    bundle = Bundle(book, loaded_at=None)  # type: ignore[arg-type]
    try:
        return ruletests.run(bundle, root)
    finally:
        bundle.retire(None)


def _test(args: argparse.Namespace) -> int:
    from ..rulebook import ruletests
    from ..rulebook.version import Bundle

    root = Path(args.dir)
    book, problems = load_rulebook(root)
    if book is None:
        for p in problems:
            print(p)
        print("0 passed, 1 failed")
        return 1
    bundle = Bundle(book, loaded_at=None)  # type: ignore[arg-type]
    try:
        report = ruletests.run(bundle, root)
    finally:
        bundle.retire(None)
    if args.format == "json":
        print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
    elif args.format == "junit":
        print(_junit(report))
    else:
        for p in report.problems:
            print(f"ERROR {p}")
        for r in report.results:
            print(f"{'PASS' if r.passed else 'FAIL'} {r.location} {r.name}")
            for f in r.failures:
                print(f"     - {f}")
        cov = report.to_dict()["coverage"]
        print(f"coverage: {cov['covered']}/{cov['rules']} rules fired by at least one case")
        for rid in cov["uncovered"]:
            rule = book.program.by_id()[rid]
            print(f"  not covered: {rid} ({rule.location})")
        print(f"rules: {report.passed} passed, {report.failed} failed")
    if report.failed or (args.require_coverage and report.uncovered):
        return 1
    return 0


def _junit(report) -> str:  # noqa: ANN001 - ruletests.Report
    cases = []
    for r in report.results:
        body = "".join(f"<failure message={quoteattr(f)}/>" for f in r.failures)
        cases.append(
            f"<testcase classname={quoteattr(r.location)} name={quoteattr(r.name)}>{body}</testcase>"
        )
    for p in report.problems:
        cases.append(
            f'<testcase classname="rules" name={quoteattr(str(p))}><error message='
            f"{quoteattr(escape(str(p)))}/></testcase>"
        )
    return (
        f'<?xml version="1.0" encoding="utf-8"?>\n<testsuite name="rules" tests="{len(cases)}" '
        f'failures="{report.failed}">' + "".join(cases) + "</testsuite>"
    )


def _facts(args: argparse.Namespace) -> int:
    from ..decide.facts import SCHEMA

    for fact, fields in SCHEMA.items():
        if args.fact and fact != args.fact:
            continue
        print(f"{fact}:")
        for name, spec in fields.items():
            values = f" ({', '.join(spec.values)})" if spec.values else ""
            print(f"  {name:28} {spec.type}{values}: {spec.doc}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="gpu-advisor-rules", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check", help="validate a rules folder")
    c.add_argument("dir", nargs="?", default="rules")
    c.add_argument("--format", choices=("text", "json"), default="text")
    c.add_argument(
        "--max-price-age-days",
        type=int,
        default=None,
        help="prices older than this are reported (default: assumptions max_price_age_days)",
    )
    c.add_argument("--today", help="judge price dates as of this day (YYYY-MM-DD)")
    c.add_argument("--allow-warnings", action="store_true", help="exit 0 when there are only warnings")
    c.add_argument("--no-tests", action="store_true",
                   help="only check; by default the rule tests run too, as the server runs them before serving")
    c.set_defaults(func=_check)
    t = sub.add_parser("test", help="run the rules folder's own cases")
    t.add_argument("dir", nargs="?", default="rules")
    t.add_argument("--format", choices=("text", "json", "junit"), default="text")
    t.add_argument("--require-coverage", action="store_true", help="fail when a rule is fired by no case")
    t.set_defaults(func=_test)
    f = sub.add_parser("facts", help="list the facts rules can test")
    f.add_argument("fact", nargs="?", choices=("brief", "candidate", "plan", "outcome", "offer"))
    f.set_defaults(func=_facts)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
