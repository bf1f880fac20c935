"""`gpu-advisor`: a terminal client for a running GPU Advisor server.

    gpu-advisor recommend BRIEF.yaml [--json] [--locale zh-CN] [--trace] [--max N] [--view summary]
                                     [--plot] [--chart FILE.png|FILE.svg]   # the break-even and cost/latency charts
    gpu-advisor explain BRIEF.yaml [--rule GLOB] [--gpu ID] [--fired | --not-fired]
                                         # the answer, each candidate's score, which rules fired (file:line)
    gpu-advisor gpus                     # the catalog with dated prices
    gpu-advisor ruleset                  # the active rules version and the last reload attempt
    gpu-advisor reload [--token-file F]  # admin: reload the rules now (or the token in GPU_ADVISOR_ADMIN_TOKEN)
    gpu-advisor mcp [--transport http]   # serve chat assistants over MCP (stdio, or streamable HTTP at /mcp)

A brief file is YAML in protobuf's JSON form: a whole RecommendRequest (with a `brief:` key) or the brief; enum
values may be written short, as rules write them (`workload: realtime_inference`, `precision: fp8`).
Exit codes: 0 OK, 2 the input was rejected (file or INVALID_ARGUMENT), 1 any other failure.
TLS: `--tls` (system roots) or `--tls-ca`; `--tls-client-cert/--tls-client-key` for a server that wants mTLS.
"""

from __future__ import annotations

import argparse
import os
import sys
import unicodedata
from collections.abc import Sequence
from typing import Any, TextIO

import grpc
from google.protobuf.json_format import MessageToJson
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from ..serving.credentials import ConfigError, admin_token, channel_credentials
from ..wire.api import enum_name, pb, pb_grpc
from .api_offers_cli import add_parser as add_api_offers_parser
from .brief_file import InputError, load_request
from .chart_files import ChartError, format_of, write_chart
from .cli_text import words
from .explain import Filters, print_explanation
from .models_cli import add_parser as add_models_parser
from .offers_cli import add_parser as add_offers_parser
from .plots import print_plots

DEFAULT_ADDR = "127.0.0.1:50051"
EXIT_OK, EXIT_FAIL, EXIT_INPUT = 0, 1, 2
MAX_EXPLAIN_CANDIDATES = 50  # validate.py's limit
HOURS_PER_MONTH = 730  # a month around the clock, when the brief gives no hours


def bad_request_violations(err: grpc.RpcError) -> list[tuple[str, str]]:
    """(field, description) pairs of the google.rpc.BadRequest in an error's status details."""
    status = rpc_status.from_call(err) if isinstance(err, grpc.Call) else None
    out: list[tuple[str, str]] = []
    for detail in status.details if status else []:
        bad = error_details_pb2.BadRequest()
        if detail.Unpack(bad):
            out += [(v.field, v.description) for v in bad.field_violations]
    return out


# -- rendering ----------------------------------------------------------------------------------------------


def _width(text: str) -> int:
    """Columns a terminal gives `text`: a CJK character takes two."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _pad(text: str, width: int, right: bool) -> str:
    fill = " " * (width - _width(text))
    return fill + text if right else text + fill


def _table(rows: list[list[str]], out: TextIO, right: Sequence[int] = ()) -> None:
    """Plain aligned columns: the first row is the header. No third-party table library for one function."""
    if len(rows) <= 1:
        return
    widths = [max(_width(r[i]) for r in rows) for i in range(len(rows[0]))]
    for n, row in enumerate(rows):
        cells = [_pad(c, w, i in right) for i, (c, w) in enumerate(zip(row, widths, strict=True))]
        print("  ".join(cells).rstrip(), file=out)
        if n == 0:
            print("  ".join("-" * w for w in widths), file=out)


def _money(v: float, digits: int = 2) -> str:
    return f"${v:,.{digits}f}" if v > 0 else "-"


def _unit_cost(v: float) -> str:
    # Per-unit costs span from fractions of a cent (a token) to thousands (a training run).
    if v <= 0:
        return "-"
    return f"${v:,.2f}" if v >= 1 else f"${v:.3g}"


def _tier(number: int, w: dict[str, str] | None = None) -> str:
    if not number:
        return "-"
    name = enum_name("PriceTier", number)
    return (w or {}).get(f"tier.{name}") or name.lower().replace("_", "-")


def _months(v: float, w: dict[str, str]) -> str:
    if v < 0:
        return w["never"]
    return f"{v:,.1f}" if v > 0 else "-"


def _against(value: float, target: float, digits: int = 0) -> str:
    """A figure beside its target: a check when it meets it, a cross when it misses."""
    if value <= 0:
        return "-"
    text = f"{value:,.{digits}f}"
    return text if target <= 0 else f"{text} {'✓' if value <= target else '✗'}"


def _speed_column(resp: pb.RecommendResponse, brief: pb.WorkloadBrief, w: dict[str, str]) -> tuple[str, list[str]]:
    """The figure a brief's target is about, per candidate: training days, else p95 latency; ("", []) if none."""
    if any(c.performance.training_days > 0 for c in resp.candidates):
        target = brief.training.target_days
        head = w["col.days_target"].format(target=f"{target:g}") if target > 0 else w["col.days"]
        return head, [_against(c.performance.training_days, target, 1) for c in resp.candidates]
    if any(c.performance.e2e_p95_ms > 0 for c in resp.candidates):
        target = brief.latency.p95_ms
        head = w["col.latency_target"].format(target=f"{target:,.0f}") if target > 0 else w["col.latency"]
        return head, [_against(c.performance.e2e_p95_ms, target) for c in resp.candidates]
    return "", []


def print_advice(resp: pb.RecommendResponse, out: TextIO | None = None, request: pb.RecommendRequest | None = None,
                 locale: str = "") -> None:
    """The answer for a terminal: the summary first (so a missed target is the first line), then the ranked table
    with each score and the figure the brief's target is about, then why each excluded GPU is out."""
    out = out or sys.stdout  # looked up per call, so redirection (tests, contextlib) is honoured
    request = request or pb.RecommendRequest()
    w = words(locale or request.locale or "en")
    # The summary without its title: its first line is the headline (a missed target, else the top pick).
    for line in resp.summary.splitlines()[1:]:
        print(line.replace("**", ""), file=out)
    if resp.summary:
        print(file=out)
    hours = request.brief.economics.hours_per_month or HOURS_PER_MONTH
    # A training run with no hours a month given is priced for the run, not for a month it does not last.
    per_run = not request.brief.economics.hours_per_month and bool(resp.candidates) and all(
        c.performance.training_days > 0 for c in resp.candidates)
    speed_head, speed = _speed_column(resp, request.brief, w)
    head = [w["col.rank"], w["col.gpu"], w["col.count"], w["col.needed"], w["col.score"], w["col.usd_per_hour"],
            w["col.usd_per_run" if per_run else "col.usd_per_month"], w["col.tier"], w["col.where"],
            w["col.usd_per_unit"],
            *([speed_head] if speed_head else []), w["col.memory"], w["col.headroom"], w["col.break_even"]]
    placed_any = any(c.placements for c in resp.candidates)
    rows = [head]
    for i, c in enumerate(resp.candidates, 1):
        # A star marks a price from another tier than the one compared (no price in that tier).
        tier = _tier(c.cost.price_tier, w) + ("*" if c.cost.price_tier_fallback else "")
        rows.append([
            str(i), c.gpu, str(c.count), str(c.gpus_needed or c.count), f"{c.score:.1f}", _money(c.cost.usd_per_hour),
            # the candidate's month (a reserved term bills 730 h), else $/h x the run's or the month's hours
            _money(c.usd_per_month if c.usd_per_month > 0 and not per_run
                   else c.cost.usd_per_hour * (c.performance.training_days * 24 if per_run else hours), 0), tier,
            _where(c, w, placed_any), _unit_cost(c.cost.usd_per_unit),
            *([speed[i - 1]] if speed_head else []),
            f"{c.memory.need_gb:,.1f}/{c.memory.capacity_gb:,.0f}" + (
                w["per_copy"].format(replicas=c.performance.replicas) if c.performance.replicas > 1 else ""),
            f"{c.memory.headroom:.0%}",
            _months(c.ownership.break_even_months, w),
        ])
    if len(rows) > 1:
        unit = next((c.cost.unit for c in resp.candidates if c.cost.unit), "")
        print(w["candidates_per_unit"].format(unit=unit) if unit else w["candidates"], file=out)
        _table(rows, out, right=tuple(i for i in range(len(head)) if i not in (1, 7, 8)))
        print(w["score_note"], file=out)
        print(w["run_total"] if per_run else w["month_hours"].format(hours=f"{hours:,.0f}"), file=out)
        print(w["tiers"].format(tier=_tier(resp.price_tier, w)), file=out)
        if resp.not_shown_count:
            print(w["not_shown"].format(limit=len(resp.candidates), count=resp.not_shown_count,
                                        gpus=", ".join(resp.not_shown)), file=out)
    else:
        print(w["no_candidates"], file=out)
    if resp.HasField("api"):
        a = resp.api
        unit = next((c.cost.unit for c in resp.candidates if c.cost.unit), a.unit.lower())
        print("\n" + w["api_row"].format(
            provider=a.offer.provider, model=a.offer.model, input=a.offer.usd_per_million_input,
            output=a.offer.usd_per_million_output, per_unit=_unit_cost(a.usd_per_unit), unit=unit,
            month=a.usd_per_month, self_month=a.self_usd_per_month, providers=a.providers,
            dearest=_unit_cost(a.max_usd_per_unit)), file=out)
    if resp.excluded:
        print(f"\n{w['excluded']}", file=out)
        for x in resp.excluded:
            more = w["more_reasons"].format(count=len(x.reasons) - 1) if len(x.reasons) > 1 else ""
            print(f"  {x.gpu}: {x.reasons[0].text if x.reasons else ''}{more}", file=out)
    if resp.HasField("ruleset"):
        print(f"\n{_ruleset_ref(resp.ruleset)}", file=out)


def _where(c: pb.Candidate, w: dict[str, str], offers_shown: bool) -> str:
    """The offer the candidate is priced on: provider and instance, region (country), tier and term; "no offer
    in scope" when others are placed and it is not; "-" when no candidate is (no offer tables, or quotes)."""
    if not c.placements:
        return w["no_offer"] if offers_shown else "-"
    o = c.placements[0].offer
    place = f"{o.region} ({o.country})" if o.country and o.country != o.region else o.region
    tier = _tier(o.tier, w)
    if o.term_months:
        tier += " " + w["term"].format(months=o.term_months)
    return f"{o.provider} {o.instance_type}, {place}, {tier}"


def _ruleset_ref(ref: pb.RulesetRef) -> str:
    # The revision is often the hash's prefix; print the hash only when it adds something.
    if ref.content_hash.startswith(ref.revision):
        return f"(rules {ref.revision})"
    return f"(rules {ref.revision}, hash {ref.content_hash[:12]})"


def print_trace(resp: pb.RecommendResponse, out: TextIO | None = None) -> None:
    out = out or sys.stdout  # looked up per call, so redirection (tests, contextlib) is honoured
    fired = [t for t in resp.trace if t.fired]
    idle = [t for t in resp.trace if not t.fired]
    print(f"Fired ({len(fired)}):", file=out)
    for t in fired:
        print(f"  {t.rule_id}  {t.location}  on {t.fact}", file=out)
    print(f"\nNot fired ({len(idle)}):", file=out)
    for t in idle:
        print(f"  {t.rule_id}  {t.location}" + (f"  on {t.fact}" if t.fact else "")
              + (f"  first failing: {t.detail}" if t.detail else ""), file=out)


def print_gpus(resp: pb.ListGpusResponse, out: TextIO | None = None) -> None:
    out = out or sys.stdout  # looked up per call, so redirection (tests, contextlib) is honoured
    rows = [["id", "name", "memory GB", "BF16 TF", "FP8 TF", "rent $/h", "rent tier", "$/TFLOP-h", "purchase $",
             "purchase tier", "price as of", "price source"]]
    for g in resp.gpus:
        current = [p for p in g.prices if p.current]
        # The on-demand row when there is one: the tier answers compare at by default.
        rents = sorted((p for p in current if p.kind == "rent"), key=lambda p: p.tier != pb.PRICE_TIER_ON_DEMAND)
        rent = rents[0] if rents else None
        buy = next((p for p in current if p.kind == "purchase"), None)
        rows.append([
            g.id, g.name, f"{g.memory_gb:g}", f"{g.tflops_bf16:g}",
            f"{g.tflops_fp8:g}" if g.tflops_fp8 else "-",
            _money(rent.usd) if rent else "-", _tier(rent.tier) if rent else "-",
            f"{g.usd_per_tflop_hour:.4f}" if g.usd_per_tflop_hour else "-",
            _money(buy.usd, 0) if buy else "-", _tier(buy.tier) if buy else "-",
            rent.as_of if rent else "-", rent.source if rent else "-",
        ])
    _table(rows, out, right=(2, 3, 4, 5, 7, 8))
    if resp.HasField("ruleset"):
        print(f"\n{_ruleset_ref(resp.ruleset)}", file=out)


def print_ruleset(info: pb.RulesetInfo, out: TextIO | None = None) -> None:
    out = out or sys.stdout  # looked up per call, so redirection (tests, contextlib) is honoured
    attempt = f"{info.last_attempted_revision} at {info.last_attempted_at}" if info.last_attempted_at else ""
    for label, value in (
        ("revision", info.revision), ("content hash", info.content_hash), ("loaded at", info.loaded_at),
        ("source", info.source_dir), ("last attempt", attempt),
    ):
        print(f"{label:>13}: {value or '-'}", file=out)
    if info.counts:
        print(f"{'counts':>13}: " + ", ".join(f"{k}={v}" for k, v in sorted(info.counts.items())), file=out)
    if info.last_error:
        print(f"{'last error':>13}:", file=out)
        for line in info.last_error.splitlines():
            print(f"    {line}", file=out)


# -- commands -----------------------------------------------------------------------------------------------


def _stub(args: argparse.Namespace) -> tuple[grpc.Channel, pb_grpc.GpuAdvisorStub]:
    if args.tls or args.tls_ca or args.tls_client_cert or args.tls_client_key:
        creds = channel_credentials(args.tls_ca, args.tls_client_cert, args.tls_client_key)
        channel = grpc.secure_channel(args.addr, creds)
    else:
        channel = grpc.insecure_channel(args.addr)
    return channel, pb_grpc.GpuAdvisorStub(channel)


def _recommend(args: argparse.Namespace, explain: bool) -> int:
    request = load_request(args.brief)
    if args.locale:
        request.locale = args.locale
    if getattr(args, "max", None) is not None:
        request.max_candidates = args.max
    if getattr(args, "view", None):
        request.view = pb.VIEW_SUMMARY if args.view == "summary" else pb.VIEW_FULL
    if explain:
        request.view = pb.VIEW_FULL  # an explanation is the trace and the reasons a summary leaves out
    if explain or getattr(args, "trace", False):
        request.include_trace = True
    if getattr(args, "plot", False) or getattr(args, "chart", None):
        if args.chart:
            format_of(args.chart)  # a wrong extension is refused before the server is asked
        request.include_charts = True
    if explain and args.gpu and not request.max_candidates:
        request.max_candidates = MAX_EXPLAIN_CANDIDATES  # the GPU asked about is shown wherever it ranks
    channel, stub = _stub(args)
    with channel:
        resp = stub.Recommend(request, timeout=args.timeout)
    if args.json:
        print(MessageToJson(resp, preserving_proto_field_name=True, ensure_ascii=False))
    elif explain:
        fired = True if args.fired else (False if args.not_fired else None)
        print_explanation(resp, Filters(tuple(args.rule or ()), args.gpu or "", fired))
    else:
        print_advice(resp, request=request)
        if request.include_trace:
            print()
            print_trace(resp)
    if not explain:
        return _pictures(args, resp, request.locale or "en")
    return EXIT_OK


def _pictures(args: argparse.Namespace, resp: pb.RecommendResponse, locale: str) -> int:
    """--plot (the terminal) and --chart FILE (a picture); either missing its library says what to install."""
    w = words(locale)
    if args.plot and not args.json:
        try:
            print_plots(resp, locale)
        except ImportError:
            print(w["plot.missing"], file=sys.stderr)
            return EXIT_FAIL
    if args.chart:
        try:
            notes = write_chart(resp, args.chart)
        except ImportError:
            print(w["chart.missing"], file=sys.stderr)
            return EXIT_FAIL
        for note in notes:
            print(w[f"chart.{note}"], file=sys.stderr)
        print(w["chart.written"].format(path=args.chart), file=sys.stderr)
    return EXIT_OK


def _gpus(args: argparse.Namespace) -> int:
    channel, stub = _stub(args)
    with channel:
        resp = stub.ListGpus(pb.ListGpusRequest(as_of=args.as_of or ""), timeout=args.timeout)
    if args.json:
        print(MessageToJson(resp, preserving_proto_field_name=True, ensure_ascii=False))
    else:
        print_gpus(resp)
    return EXIT_OK


def _ruleset(args: argparse.Namespace) -> int:
    channel, stub = _stub(args)
    with channel:
        info = stub.GetRuleset(pb.GetRulesetRequest(), timeout=args.timeout)
    if args.json:
        print(MessageToJson(info, preserving_proto_field_name=True, ensure_ascii=False))
    else:
        print_ruleset(info)
    return EXIT_OK


def _reload(args: argparse.Namespace) -> int:
    token = admin_token(os.environ, args.token_file)
    metadata = (("authorization", f"Bearer {token}"),) if token else ()
    channel, stub = _stub(args)
    with channel:
        result = stub.ReloadRules(pb.ReloadRulesRequest(), timeout=args.timeout, metadata=metadata)
    info = result.ruleset
    if args.json:
        print(MessageToJson(result, preserving_proto_field_name=True, ensure_ascii=False))
    else:
        print("reloaded: a new rules version is active" if result.reloaded else
              "not reloaded: " + ("the new version was rejected" if info.last_error else "nothing changed"))
        print_ruleset(info)
        print_other_workers(result.other_workers)
    # A rejected version, here or in another worker (or one not heard from), is a failure the operator must see
    # in the exit code (scripts, CI).
    failed = bool(info.last_error) or any(not w.ok for w in result.other_workers)
    return EXIT_FAIL if failed else EXIT_OK


def print_other_workers(workers: Sequence[pb.WorkerReload], out: TextIO | None = None) -> None:
    """`--processes N`: one line per other worker the server asked to reload (nothing with one process)."""
    out = out or sys.stdout
    for w in workers:
        if not w.answered:
            print(f"worker {w.pid}: asked to reload, no report in time (its outcome is not known)", file=out)
        elif w.ok:
            done = "reloaded" if w.reloaded else "nothing changed"
            print(f"worker {w.pid}: {done}, serving revision {w.revision or '-'}", file=out)
        else:
            print(f"worker {w.pid}: rejected the new version, serving revision {w.revision or '-'}", file=out)
            for line in w.error.splitlines():
                print(f"    {line}", file=out)


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--addr", default=os.environ.get("GPU_ADVISOR_ADDR", DEFAULT_ADDR),
                        help="server address (env GPU_ADVISOR_ADDR, default %(default)s)")
    common.add_argument("--timeout", type=float, default=30.0, help="seconds per call")
    common.add_argument("--json", action="store_true", help="print the response as protobuf JSON")
    env = os.environ.get
    common.add_argument("--tls", action="store_true", help="use TLS, trusting the system's CAs")
    common.add_argument("--tls-ca", metavar="PEM", default=env("GPU_ADVISOR_TLS_CA"),
                        help="use TLS, trusting this CA (env GPU_ADVISOR_TLS_CA)")
    common.add_argument("--tls-client-cert", metavar="PEM", default=env("GPU_ADVISOR_TLS_CLIENT_CERT"),
                        help="client certificate for mTLS (env GPU_ADVISOR_TLS_CLIENT_CERT)")
    common.add_argument("--tls-client-key", metavar="PEM", default=env("GPU_ADVISOR_TLS_CLIENT_KEY"),
                        help="its private key (env GPU_ADVISOR_TLS_CLIENT_KEY)")

    parser = argparse.ArgumentParser(prog="gpu-advisor", description="Ask a GPU Advisor server.")
    sub = parser.add_subparsers(dest="command", required=True)

    rec = sub.add_parser("recommend", parents=[common], help="rank GPUs (or a model API) for a brief")
    rec.add_argument("brief", help="YAML: a RecommendRequest or a WorkloadBrief in protobuf JSON form")
    rec.add_argument("--locale", choices=("en", "zh-CN"))
    rec.add_argument("--trace", action="store_true", help="also print which rules fired")
    rec.add_argument("--max", type=int, help="at most N candidates")
    rec.add_argument("--view", choices=("full", "summary"),
                     help="summary: the ranking, costs and headline only (no reasons, trace or extra placements)")
    rec.add_argument("--plot", action="store_true",
                     help="also draw the break-even and cost/latency charts in the terminal (plotext)")
    rec.add_argument("--chart", metavar="FILE",
                     help="write the charts to FILE, PNG or SVG by its extension (matplotlib)")
    rec.set_defaults(run=lambda a: _recommend(a, explain=False))

    exp = sub.add_parser("explain", parents=[common],
                         help="recommend, and show why: the answer, each score's parts, the rule trace")
    exp.add_argument("brief")
    exp.add_argument("--locale", choices=("en", "zh-CN"))
    exp.add_argument("--rule", action="append", metavar="GLOB",
                     help="only trace entries of rule ids matching this glob (e.g. 'matrix.*'); repeatable")
    exp.add_argument("--gpu", metavar="ID", help="only this GPU: its score, exclusion and candidate trace")
    only = exp.add_mutually_exclusive_group()
    only.add_argument("--fired", action="store_true", help="only rules that fired")
    only.add_argument("--not-fired", action="store_true", help="only rules that did not fire, and why")
    exp.set_defaults(run=lambda a: _recommend(a, explain=True))

    gpus = sub.add_parser("gpus", parents=[common], help="list the GPU catalog with dated prices")
    gpus.add_argument("--as-of", help="YYYY-MM-DD: the prices valid on that day (default today)")
    gpus.set_defaults(run=_gpus)

    add_models_parser(sub, common, _stub)
    add_offers_parser(sub, common, _stub)
    add_api_offers_parser(sub, common, _stub)

    rs = sub.add_parser("ruleset", parents=[common], help="show the active rules version")
    rs.set_defaults(run=_ruleset)

    rl = sub.add_parser("reload", parents=[common], help="admin: reload the rules folder now")
    # No --token VALUE: argv shows in `ps`. The token comes from the environment or a file, as on the server.
    rl.add_argument("--token-file", metavar="PATH", default=env("GPU_ADVISOR_ADMIN_TOKEN_FILE"),
                    help="file holding the admin bearer token (env GPU_ADVISOR_ADMIN_TOKEN_FILE; or the token "
                         "itself in env GPU_ADVISOR_ADMIN_TOKEN)")
    rl.set_defaults(run=_reload)

    # -- MCP: the way in for chat assistants (service/frontends/mcp_server.py; imported only when used) --
    mcp = sub.add_parser("mcp", parents=[common], help="serve chat assistants over MCP (stdio or streamable HTTP)")
    mcp.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    mcp.add_argument("--listen", default=os.environ.get("GPU_ADVISOR_MCP_LISTEN", "127.0.0.1:8765"),
                     help="host:port for --transport http, served at /mcp (env GPU_ADVISOR_MCP_LISTEN); off "
                          "loopback a bearer token is required")
    from .mcp_http import add_flags as add_mcp_http_flags

    add_mcp_http_flags(mcp)
    mcp.set_defaults(run=_mcp)
    return parser


def _mcp(args: argparse.Namespace) -> int:
    from .mcp_http import access_from_args
    from .mcp_server import main as serve_mcp

    creds = None
    if args.tls or args.tls_ca or args.tls_client_cert or args.tls_client_key:  # as the other commands do
        creds = channel_credentials(args.tls_ca, args.tls_client_cert, args.tls_client_key)
    return serve_mcp(args.addr, args.transport, args.listen, args.timeout, access_from_args(args), creds)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args))
    except BrokenPipeError:
        # `gpu-advisor explain x.yaml | head`: the reader left; stop quietly instead of a traceback.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except (InputError, ConfigError, ChartError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except grpc.RpcError as err:
        code = err.code() if isinstance(err, grpc.Call) else grpc.StatusCode.UNKNOWN
        if code == grpc.StatusCode.INVALID_ARGUMENT:
            violations = bad_request_violations(err)
            print("error: the request was rejected:", file=sys.stderr)
            for field, description in violations or [("", err.details() or "")]:
                print(f"  {field}: {description}" if field else f"  {description}", file=sys.stderr)
            return EXIT_INPUT
        if code == grpc.StatusCode.UNAVAILABLE:
            print(f"error: no GPU Advisor server at {args.addr} ({err.details()})", file=sys.stderr)
            return EXIT_FAIL
        print(f"error: {code.name}: {err.details()}", file=sys.stderr)
        return EXIT_FAIL


def _entry() -> Any:  # pragma: no cover - `python -m service.frontends.cli`
    sys.exit(main())


if __name__ == "__main__":
    _entry()
