"""request → facts → rules → rank → route → render. One call, no I/O, no shared mutable state.

The engine decides which rules match which fact; hit policies, scoring and ranking are plain Python over the
matches, so they read the same whatever engine sits behind `Evaluator`.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date
from typing import Any, Protocol, TypeVar

from ..advice import (
    Advice,
    BenchmarkStage,
    Candidate,
    ChecklistSection,
    Cost,
    Exclusion,
    MemoryFit,
    Metric,
    Ownership,
    Performance,
    Question,
    Reason,
    Route,
    RulesetRef,
    ScoreBreakdown,
    TraceEntry,
    Warning,
)
from ..assumptions import Assumptions
from ..brief import AdviceRequest, Brief
from ..engine.ir import Action, Rule, apply_hit_policies
from ..render.messages import Messages, compact
from ..render.summary import render_summary
from ..rulebook import Rulebook
from . import facts as F
from .cancel import StillWanted, checkpoint
from .provisional import route_depends_on
from .sizing import Shape, Sizing, compared_tier, prefill_batch_sequences, shape_of, size_all

SEVERITY_ORDER = {"CRITICAL": 0, "WARNING": 1, "INFO": 2}
# An estimated KV cache is described as the kind of attention it assumed (never as exact).
_KV_NOTE = {"MLA": "note.kv_estimated_mla", "MHA": "note.kv_estimated_mha", "MQA": "note.kv_estimated_mqa"}
DEFAULT_MAX_CANDIDATES = 5
DEFAULT_ROUTE = "RENT_ON_DEMAND"  # when no routing row matches


class Evaluator(Protocol):
    def evaluate(self, fact_type: str, facts: list[dict[str, Any]]) -> dict[str, set[str]]: ...


# A rule's message for one candidate, rendered only if the answer shows it: (rule id, message key), or None
# for an action without a message. Survivors past max_candidates are listed by id alone.
_Said = tuple[str, str] | None

# What a candidate rule does, read from its actions once per rules version: whether it has an action
# `_Run.common` handles (warn, note), and its (kind, message, points) for exclude, score, caveat and note.
_Effects = tuple[bool, tuple[tuple[str, _Said, float], ...]]
_CANDIDATE_KINDS = ("exclude", "score", "caveat", "note")


@dataclass
class _Scored:
    sizing: Sizing
    fact: dict[str, Any]
    points: float = 0.0
    reasons: list[_Said] = field(default_factory=list)
    caveats: list[_Said] = field(default_factory=list)
    exclusions: list[_Said] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)  # what its messages are filled from
    score: float = 0.0
    basis: float = 0.0
    basis_kind: str = ""
    best: float = 0.0
    cost_points: float = 0.0
    parts: list[tuple[str, float]] = field(default_factory=list)


class _Run:
    def __init__(self, book: Rulebook, engine: Evaluator, req: AdviceRequest):
        self.book, self.engine, self.req = book, engine, req
        self.shared = _compiled(book)
        self.msgs = self.shared.msgs
        self.locale = req.locale or "en"
        # text(key, params): the message `key` in this request's locale, filled from `params`.
        self.text: Callable[[str, Mapping[str, Any]], str] = self.msgs.table(self.locale).text
        self.trace: list[TraceEntry] = []
        self.warnings: list[Warning] = []
        self.notes: list[Reason] = []
        self._names: dict[str, str] = {}

    def name(self, key: str) -> str:
        """A message without placeholders (a tier's or unit's name), looked up once per request."""
        if key not in self._names:
            self._names[key] = self.text(key, {})
        return self._names[key]

    def title(self, code: str) -> str:
        """A warning's name (`warning.<code>`); rules-check requires one for every code, "" keeps a gap silent."""
        key = f"warning.{code}"
        return self.text(key, {}) if self.msgs.has(key, self.locale) or self.msgs.has(key, "en") else ""

    def fire(self, fact_type: str, facts: list[dict[str, Any]]) -> dict[str, list[Rule]]:
        """Rules in effect per fact id, after hit policies; records the trace when asked."""
        rules = self.book.program.for_fact(fact_type)
        matched = self.engine.evaluate(fact_type, facts) if rules else {str(f["id"]): set() for f in facts}
        out: dict[str, list[Rule]] = {}
        for fact in facts:
            fid = str(fact["id"])
            winners = apply_hit_policies(rules, matched.get(fid, set()))
            out[fid] = winners
            if self.req.include_trace:
                won = {r.id for r in winners}
                for r in rules:
                    if self.req.trace_fired_only and r.id not in won:
                        continue
                    if r.id in won:
                        detail = "fired"
                    elif r.id in matched.get(fid, set()):
                        detail = f"matched, but a higher-priority row of {r.group} took effect (hit policy first)"
                    else:
                        detail = r.first_failure(fact)
                    self.trace.append(TraceEntry(r.id, r.location, fid, r.id in won, detail))
        return out

    def common(self, rule: Rule, fact: dict[str, Any]) -> None:
        """Actions that mean the same on every fact: warn and brief-level notes."""
        for act in rule.actions:
            if act.kind == "warn":
                self.warnings.append(
                    Warning(
                        act.get("code"),
                        act.get("severity", "WARNING"),
                        self.text(act.get("message"), fact),
                        rule.id,
                        self.title(act.get("code")),
                    )
                )
            elif act.kind == "note" and fact["id"] in ("brief", "plan", "outcome"):
                self.notes.append(Reason(rule.id, self.text(act.get("message"), fact)))


class _Compiled:
    """What one rules version's answers share and compute once: its message tables, and each candidate rule's
    effects (`_effects_of`)."""

    def __init__(self, book: Rulebook):
        self.msgs = Messages(book.messages)
        self.effects: dict[int, _Effects] = {}  # id(rule) → effects; the rules live as long as the book


def _compiled(book: Rulebook) -> _Compiled:
    found = _COMPILED.get(id(book))
    if found is None:
        found = _Compiled(book)
        if _COMPILED.setdefault(id(book), found) is found:
            weakref.finalize(book, _COMPILED.pop, id(book), None)
    return found


def messages_of(book: Rulebook) -> Messages:
    """The rules' message tables, compiled once per rules version and dropped with it."""
    return _compiled(book).msgs


# Rulebook id → what its answers share. Not a field of the (frozen, hashed) Rulebook; each entry leaves when its
# Rulebook is freed, before that id can be reused.
_COMPILED: dict[int, _Compiled] = {}


def _params(s: Sizing, fact: dict[str, Any], unit_text: str) -> dict[str, Any]:
    """The candidate's fact with the figures its messages print added, in place: the rules have run on the fact
    and what is read from it afterwards (id, workload, is_training, utilization_given) is not among these keys;
    a copy of its ~80 keys per GPU would cost more than the update."""
    p = fact
    p.update(
        name=s.gpu.name,
        usd_per_unit=s.usd_per_unit,
        unit=unit_text,
        tokens_per_second=s.tokens_per_second,
        step_ms=s.step_ms,
        est_ttft_ms=s.est_ttft_ms,
        train_hours=s.train_hours,
        train_days=s.train_hours / 24,
        capacity_gb=s.capacity_gb,
        per_replica=s.per_replica,
        replicas=s.replicas,
        compute_count=s.compute_count,
        memory_count=s.memory_count,
        usd_per_tflop_hour=s.usd_per_tflop_hour,
        break_even_hours=s.break_even_hours,
        owned_usd_per_hour=s.owned_usd_per_hour,
        interconnect_gbs=s.gpu.interconnect_gbs,
        tflops=s.tflops,
    )
    return p


def _with_tiers(p: dict[str, Any], s: Sizing, run: _Run) -> dict[str, Any]:
    p["rent_tier_name"] = run.name(f"tier.{s.price_tier or 'UNSPECIFIED'}")
    p["price_tier_name"] = run.name(f"tier.{s.compared_tier}")
    return p


def cost_unit(unit: str) -> str:
    """The locale-independent CostUnit of a sizing's unit (a SUCCESS_UNIT name): tokens are per million."""
    return "MILLION_OUTPUT_TOKENS" if unit == "TOKEN" else unit


def _defaults_stated(brief: Brief, shape: Shape, a: Any) -> dict[str, Any]:
    """The value assumed for each brief field the sizing had to default, so a note can state it."""
    # Embeddings are sized at what a server batches from its queue, not at one sequence: state that batch.
    batch = prefill_batch_sequences(brief, shape, a) if brief.workload == "EMBEDDING" else shape.sequences
    return {
        "model.precision": shape.precision,
        "model.context_tokens": int(a.num("default_context_tokens")),
        "traffic.avg_input_tokens": shape.input_tokens,
        "traffic.avg_output_tokens": shape.output_tokens,
        "traffic.concurrent_sessions": shape.sequences,
        "traffic.batch_size": batch,
    }


def advise(
    book: Rulebook, engine: Evaluator, req: AdviceRequest, today: date | None = None,
    still_wanted: StillWanted | None = None,
) -> Advice:
    """`still_wanted` (optional) is asked between stages; when it says no, `Cancelled` is raised."""
    checkpoint(still_wanted, "sizing")
    run = _Run(book, engine, req)
    a = book.assumptions
    brief = req.brief
    day = req.as_of or today or date.today()
    shape = shape_of(brief, a)
    sizings = size_all(book.catalog, brief, shape, a, req.quotes, day) if shape else []
    base = F.brief_fact(brief, a.num("default_utilization"), shape, sizings, len(req.quotes))

    # 1. brief rules: questions, the metric, brief-level mistakes
    questions: list[Question] = []
    metric: Metric | None = None
    for rule in run.fire("brief", [base])["brief"]:
        run.common(rule, base)
        for act in rule.actions:
            if act.kind == "ask" and all(q.field != act.get("field") for q in questions):
                questions.append(Question(act.get("field"), run.text(act.get("message"), base), rule.id,
                                          unit=act.get("unit", ""), assumed=_assumed(act, a),
                                          priority=rule.priority))
            elif act.kind == "metric" and metric is None:
                metric = Metric(
                    run.text(act.get("name"), base),
                    run.text(act.get("message"), base),
                    rule.id,
                    act.get("kind", ""),
                )
    assumed: list[tuple[str, str]] = []
    if shape:
        stated = _defaults_stated(brief, shape, a)
        asked = {q.field for q in questions}
        # Only defaults the rules still ask about count: the others do not matter for this workload.
        assumed = [(f, compact(stated[f])) for f in shape.defaults_used if f in asked and f in stated]
        for f in shape.defaults_used:
            key, params = "note.assumed_default", {"field": f}
            if f in stated:
                key, params = "note.assumed_value", {"field": f, "value": stated[f]}
            run.notes.append(Reason("sizing.defaults", run.text(key, params)))
        if not shape.arch.exact:
            run.notes.append(
                Reason(
                    "sizing.architecture",
                    run.text(
                        _KV_NOTE.get(shape.arch.kind, "note.kv_estimated"),
                        {
                            "layers": shape.arch.layers,
                            "kv_heads": shape.arch.kv_heads,
                            "head_dim": shape.arch.head_dim,
                            "kv_latent": shape.arch.kv_latent,
                            "params_billion": shape.params_billion,
                        },
                    ),
                )
            )

    # 2. candidate rules: eligibility, the workload matrix, scoring
    checkpoint(still_wanted, "candidates")
    scored = [_Scored(s, F.candidate_fact(base, s)) for s in sizings]
    fired = run.fire("candidate", [c.fact for c in scored])
    effects = run.shared.effects
    for c in scored:
        params = c.params = _with_tiers(_params(c.sizing, c.fact, run.name(f"unit.{c.sizing.unit}")), c.sizing, run)
        for rule in fired[c.fact["id"]]:
            common, acts = effects.get(id(rule)) or _effects_of(effects, rule)
            if common:
                run.common(rule, params)
            for kind, reason, points in acts:
                if kind == "exclude":
                    c.exclusions.append(reason)
                elif kind == "score":
                    c.points += points
                    c.parts.append((rule.id, points))
                    c.reasons.append(reason)
                elif kind == "caveat":
                    c.caveats.append(reason)
                else:  # note
                    c.reasons.append(reason)
    survivors = [c for c in scored if not c.exclusions]
    _rank(survivors)
    limit = req.max_candidates or int(a.values.get("max_candidates_default", DEFAULT_MAX_CANDIDATES))
    shown = survivors[:limit]

    # 3. plan rules: the route (hit policy first), plan-level mistakes
    checkpoint(still_wanted, "plan")
    top = shown[0].sizing if shown else None
    ratio = (shape.input_tokens + shape.output_tokens) / shape.output_tokens if shape else 1.0
    plan = F.plan_fact(
        base, top, len(survivors), brief.economics.hours_per_month, a.num("model_api_usd_per_million_tokens"), ratio
    )
    route_kind, rationale = DEFAULT_ROUTE, []
    # A utilization the brief did not give is the rules' default: a message that prints it says so.
    said = {**plan, "utilization_basis": "" if plan["utilization_given"] else run.name("note.utilization_assumed")}
    for rule in run.fire("plan", [plan])["plan"]:
        run.common(rule, said)
        for act in rule.actions:
            if act.kind == "route" and not rationale:
                route_kind = act.get("kind")
                rationale.append(Reason(rule.id, run.text(act.get("message"), said)))
    depends_on = route_depends_on(book.program.for_fact("plan"), plan, route_kind, DEFAULT_ROUTE)

    # 4. outcome rules: mistakes that depend on the route
    outcome = F.outcome_fact(plan, route_kind)
    for rule in run.fire("outcome", [outcome])["outcome"]:
        run.common(rule, {**outcome, "utilization_basis": said["utilization_basis"]})

    checkpoint(still_wanted, "render")
    candidates = tuple(_candidate(c, run) for c in shown)
    excluded = tuple(Exclusion(c.sizing.gpu.id, _said(c.exclusions, c, run)) for c in scored if c.exclusions)
    warnings = _dedupe_warnings(run.warnings)
    advice = Advice(
        candidates=candidates,
        excluded=excluded,
        route=Route(route_kind, tuple(rationale), bool(depends_on), depends_on),
        warnings=warnings,
        questions=tuple(questions),
        metric=metric,
        benchmark_plan=_once(book, run, "benchmark", brief.workload, _benchmark),
        procurement_checklist=_once(book, run, "checklist", brief.workload, _checklist),
        ruleset=RulesetRef(book.revision, book.content_hash),
        trace=tuple(run.trace),
        notes=tuple(run.notes),
        # Nothing sized or classified, or a missing field could change the route: ask before acting on it.
        provisional=shape is None or brief.workload == "UNSPECIFIED" or bool(depends_on) or bool(assumed),
        assumed=tuple(assumed),
        not_shown=tuple(c.sizing.gpu.id for c in survivors[limit:]),
        price_tier=compared_tier(brief),
    )
    # The summary is rendered from the otherwise finished answer, which nobody else holds yet: set in place
    # rather than copied field by field through the frozen constructor.
    advice.__dict__["summary"] = render_summary(advice, run.msgs, run.locale, base, shape is not None)
    return advice


def _effects_of(table: dict[int, _Effects], rule: Rule) -> _Effects:
    acts = tuple(
        (act.kind, (rule.id, act.get("message")) if act.get("message") else None,
         float(act.get("points")) if act.kind == "score" else 0.0)
        for act in rule.actions if act.kind in _CANDIDATE_KINDS
    )
    found = (any(act.kind in ("warn", "note") for act in rule.actions), acts)
    table[id(rule)] = found
    return found


def _assumed(act: Action, a: Assumptions) -> str | int | float | bool | None:
    """What an answer assumes while a question is open: a literal in the rule, or a named assumption (checked to
    exist by rules-check)."""
    name = act.get("assumes_from")
    if name is not None:
        return a.values.get(name)
    return act.get("assumes")


def _rank(items: list[_Scored]) -> None:
    """Score = 100 x (best cost / own cost) + rule points. The cost compared is the first that every candidate
    has: per accepted unit of work; else per million output tokens (inference); else dollars per effective
    TFLOP-hour of the configuration (peak x utilization this work can reach: the seeds' price/performance)."""
    if not items:
        return
    if all(c.sizing.usd_per_unit > 0 for c in items):
        kind = "usd_per_unit"

        def basis(s: Sizing) -> float:
            return s.usd_per_unit
    elif all(c.sizing.tokens_per_second > 0 for c in items):
        kind = "usd_per_million_output_tokens"

        def basis(s: Sizing) -> float:
            return s.usd_per_hour / (s.tokens_per_second * s.replicas * 3600) * 1e6
    else:
        kind = "usd_per_effective_tflop_hour"

        def basis(s: Sizing) -> float:
            delivered = s.count * s.effective_tflops
            return s.usd_per_hour / delivered if delivered > 0 and s.usd_per_hour > 0 else math.inf

    for c in items:
        c.basis = basis(c.sizing)
    best = min(c.basis for c in items)
    for c in items:
        c.basis_kind, c.best = kind, best
        relative = 100.0 * best / c.basis if math.isfinite(c.basis) and c.basis > 0 else 0.0
        c.score = round(relative + c.points, 2)
        c.cost_points = round(relative, 2)
    items.sort(key=lambda c: (-c.score, c.sizing.usd_per_hour, c.sizing.gpu.id))


def _candidate(c: _Scored, run: _Run) -> Candidate:
    s = c.sizing
    mem = s.memory
    need = mem.total_gb if mem else 0.0
    params = c.params
    price_src = (
        run.text("price.from_quote", {"provider": s.quote.provider or "-", "as_of": s.quote.as_of or "-"})
        if s.quote
        else (run.text("price.from_catalog", {"source": s.price.source, "as_of": s.price.as_of}) if s.price else "")
    )
    interconnect = ""
    if s.count > 1:
        key = "interconnect.training" if c.fact["is_training"] else "interconnect.inference"
        interconnect = run.text(key, params)
    throughput = ""
    if s.train_hours > 0:
        throughput = run.text("throughput.training", params)
    elif s.tokens_per_second > 0:
        key = "throughput.embedding" if c.fact["workload"] == "EMBEDDING" else "throughput.inference"
        throughput = run.text(key, params)
    formula = run.text("score.formula", {"score": c.score, "points": c.points, "basis": c.basis})
    return _build(
        Candidate,
        gpu=s.gpu.id,
        name=s.gpu.name,
        count=s.count,
        score=c.score,
        memory=_build(
            MemoryFit,
            need_gb=round(need, 2),
            capacity_gb=round(s.capacity_gb, 2),
            headroom=round(s.headroom, 4),
            breakdown=tuple([(n, round(v, 2)) for n, v in mem.components]) if mem else (),
        ),
        cost=_build(
            Cost,
            usd_per_hour=round(s.usd_per_hour, 4),
            usd_per_tflop_hour=_sig(s.usd_per_tflop_hour),
            usd_per_unit=_sig(s.usd_per_unit),
            unit=run.name(f"unit.{s.unit}"),
            price_source=price_src,
            price_as_of=s.quote.as_of if s.quote else (s.price.as_of if s.price else ""),
            unit_kind=cost_unit(s.unit),
            price_tier=s.price_tier,
            price_tier_fallback=s.price_tier_fallback,
        ),
        ownership=_build(
            Ownership,
            annual_power_usd=round(s.annual_power_usd, 2),
            owned_usd_per_hour=round(s.owned_usd_per_hour, 4),
            break_even_hours=round(s.break_even_hours, 1) if math.isfinite(s.break_even_hours) else -1.0,
            break_even_months=round(s.break_even_months, 2) if math.isfinite(s.break_even_months) else -1.0,
            purchase_usd=round(s.purchase.usd * s.count, 2) if s.purchase else 0.0,
        ),
        reasons=(_build(Reason, rule_id="rank.score", text=formula),
                 *_ownership_reason(s, run, c.fact["utilization_given"]), *_said(c.reasons, c, run)),
        caveats=_said(c.caveats, c, run),
        interconnect=interconnect,
        throughput=throughput,
        score_breakdown=_build(
            ScoreBreakdown, basis=c.basis_kind, cost=_sig(c.basis), best_cost=_sig(c.best),
            cost_points=c.cost_points, rules=tuple(c.parts),
        ),
        performance=performance(s),
    )


_T = TypeVar("_T")


def _build(cls: type[_T], **fields: Any) -> _T:  # noqa: ANN401
    """`cls(**fields)` for a frozen answer type given EVERY field, without the frozen __init__'s guarded
    setattr per field: the same object (equal, same repr and hash), ~3x cheaper. An answer builds ~60 such
    objects per candidate shown; tests/test_fast_paths.py rebuilds answers through the real constructors."""
    obj = object.__new__(cls)
    obj.__dict__.update(fields)
    return obj


def _said(items: list[_Said], c: _Scored, run: _Run) -> tuple[Reason, ...]:
    text, params = run.text, c.params
    return tuple([_build(Reason, rule_id=item[0], text=text(item[1], params)) if item else None  # type: ignore[misc]
                  for item in items])


def performance(s: Sizing) -> Performance:
    """The estimates a program needs, as numbers (their units are in the proto's Performance comments)."""
    training = s.train_hours > 0
    return _build(
        Performance,
        ttft_ms=round(s.est_ttft_ms, 1),
        itl_ms=round(s.itl_ms, 2),
        e2e_p95_ms=round(s.est_latency_ms, 1),
        tokens_per_second_per_replica=round(s.tokens_per_second, 1),
        # A training cluster is one data/tensor/pipeline-parallel job: GPUs per model copy do not apply.
        tensor_parallel=0 if training else s.per_replica,
        replicas=0 if training else s.replicas,
        nodes=s.nodes,
        training_days=round(s.train_hours / 24, 2) if training else 0.0,
        gpu_hours=round(s.gpu_hours, 1) if training else 0.0,
        cost_per_run_usd=round(s.usd_per_run, 2) if training else 0.0,
    )


def _ownership_reason(s: Sizing, run: _Run, utilization_given: bool) -> tuple[Reason, ...]:
    """The break-even arithmetic, so a reader can redo it from the printed figures."""
    if s.purchase is None or s.usd_per_hour <= 0:
        return ()
    params = {
        "purchase_usd": s.purchase.usd * s.count,
        "usd_per_hour": s.usd_per_hour,
        "running_usd_per_hour": s.running_usd_per_busy_hour,
        "break_even_hours": s.break_even_hours,
        "break_even_months": s.break_even_months,
        "utilization": s.ownership_utilization,
        "utilization_basis": "" if utilization_given else run.name("note.utilization_assumed"),
        "purchase_source": s.purchase.source,
    }
    key = "ownership.formula" if math.isfinite(s.break_even_hours) else "ownership.never"
    return (_build(Reason, rule_id="ownership.break-even", text=run.text(key, params)),)


def _sig(x: float, digits: int = 6) -> float:
    """Round to significant digits: a cost per embedding record can be a few millionths of a dollar."""
    # A constant spec for the default: building ".6g" per call cost as much as the formatting (~40 per answer).
    spec = ".6g" if digits == 6 else f".{digits}g"
    return float(format(x, spec)) if x and math.isfinite(x) else 0.0


def _dedupe_warnings(items: list[Warning]) -> tuple[Warning, ...]:
    best: dict[str, Warning] = {}
    for w in items:
        cur = best.get(w.code)
        if cur is None or SEVERITY_ORDER.get(w.severity, 9) < SEVERITY_ORDER.get(cur.severity, 9):
            best[w.code] = w
    return tuple(sorted(best.values(), key=lambda w: (SEVERITY_ORDER.get(w.severity, 9), w.code)))


def _applies(step_workloads: tuple[str, ...], workload: str) -> bool:
    return not step_workloads or workload in step_workloads


def _once(book: Rulebook, run: _Run, kind: str, workload: str, render: Any) -> Any:  # noqa: ANN401
    """`render(book, run, workload)` once per rules, locale and workload: its texts have no placeholders."""
    # A locale without a table of its own reads the fallback's (Messages.text), so it shares its entry.
    locale = run.locale if run.locale in book.messages else run.msgs.fallback
    key = (kind, locale, workload)
    if key not in book.rendered:
        book.rendered[key] = render(book, run, workload)
    return book.rendered[key]


def _benchmark(book: Rulebook, run: _Run, workload: str) -> tuple[BenchmarkStage, ...]:
    return tuple(
        BenchmarkStage(
            run.text(st.name, {}),
            tuple(run.text(x.message, {}) for x in st.steps if _applies(x.workloads, workload)),
            tuple(run.text(x.message, {}) for x in st.record if _applies(x.workloads, workload)),
        )
        for st in book.benchmark_plan
    )


def _checklist(book: Rulebook, run: _Run, workload: str) -> tuple[ChecklistSection, ...]:
    return tuple(
        ChecklistSection(
            run.text(sec.name, {}),
            tuple(run.text(x.message, {}) for x in sec.items if _applies(x.workloads, workload)),
        )
        for sec in book.checklist
    )
