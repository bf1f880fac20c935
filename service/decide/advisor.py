"""The decision for one request, in the order `advise` reads: the named model's registry fields -> size every GPU
-> facts -> brief rules -> candidate rules -> rank -> plan and outcome rules (the route) -> render. One call, no
I/O, no shared mutable state.

The engine decides which rules match which fact; hit policies, scoring and ranking are plain Python over the
matches, so they read the same whatever engine sits behind `Evaluator`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import date
from typing import Any

from ..domain.advice import (
    Advice,
    Exclusion,
    Metric,
    Question,
    Reason,
    Route,
    RulesetRef,
)
from ..domain.assumptions import Assumptions
from ..domain.brief import TRAINING_WORKLOADS, AdviceRequest, Brief, Traffic
from ..domain.frozen import build
from ..domain.models import find
from ..engine.ir import Action, Rule
from ..memo import IdentityMemo, keep
from ..physics.memory import MemoryBreakdown
from ..render.messages import compact, unit_key
from ..render.summary import render_summary
from . import facts as F
from . import tables as tb
from .accuracy import mark_near_misses, unmeasured_note
from .answer import benchmark, candidate_of, checklist, dedupe_warnings, once, said_texts
from .api_leg import plan_fields, price
from .book import Rulebook
from .cancel import StillWanted, checkpoint
from .charts import charts_of
from .freshness import freshness
from .host_ram import host_ram_ok
from .models import filled_fields, resolve
from .month import cost_months, with_volume_rate
from .placement import (
    ByScope,
    Scope,
    allowed_ids,
    brief_key,
    by_scope,
    leaders_of,
    markets_of,
    offer_fact,
    place,
    reserve_term,
    scopes_of,
)
from .provisional import route_depends_on
from .rank import placed_first, rank, rentable
from .route_money import money_facts
from .run import Evaluator, Run, Scored
from .shape_notes import shape_notes
from .sizing.common import Sizing, compared_tier
from .sizing.inference import prefill_batch_sequences
from .sizing.per_gpu import latency_of, size, size_all
from .sizing.per_request import without_economics
from .sizing.shape import Shape, shape_of
from .targets import unmet_targets

# An estimated KV cache is described as the kind of attention it assumed (never as exact).
_KV_NOTE = {"MLA": "note.kv_estimated_mla", "MHA": "note.kv_estimated_mha", "MQA": "note.kv_estimated_mqa"}
DEFAULT_MAX_CANDIDATES = 5
DEFAULT_ROUTE = "RENT_ON_DEMAND"  # when no routing row matches
LATENCY_BRIEFS = 256  # briefs whose missed-target latencies a rules version keeps; all are dropped past it


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
        # one model copy's need: the whole configuration's over its copies (a sentence never sums copies)
        copy_need_gb=(s.memory.total_gb if s.memory else 0.0) / max(1, s.replicas),
        per_replica=s.per_replica,
        replicas=s.replicas,
        compute_count=s.compute_count,
        memory_count=s.memory_count,
        usd_per_tflop_hour=s.usd_per_tflop_hour,
        break_even_hours=s.break_even_hours,
        owned_usd_per_hour=s.owned_usd_per_hour,
        interconnect_gbs=s.gpu.interconnect_gbs,
        scale_out_gbs=s.gpu.scale_out_gbs,
        domain_gpus=max(1, s.gpu.nvlink_domain if s.gpu.fast_interconnect else 1, s.gpu.gpus_per_node),
        tflops=s.tflops,
    )
    return p


def _params_of(c: Scored, run: Run, base: dict[str, Any]) -> dict[str, Any]:
    """What the candidate's messages are filled from, made on first use: only for a candidate whose texts are
    said (a warning or note of its rules, a shown or excluded candidate of the answer), not for those past
    max_candidates."""
    if not c.params:
        if c.fact["need_gb"] is None:  # made with its messages' figures left for later (F.SHOWN_ONLY)
            c.fact.update(F.shown_fields(c.sizing))
        p = c.params = _params(c.sizing, c.fact, run.name(f"unit.{c.sizing.unit}"))
        p["rent_tier_name"] = run.name(f"tier.{c.sizing.price_tier or 'UNSPECIFIED'}")
        p["price_tier_name"] = run.name(f"tier.{c.sizing.compared_tier}")
        if run.latency_targets is None:
            run.latency_targets = _latency_targets(run, base)
        p["latency_targets"] = run.latency_targets
    return c.params


def _latency_targets(run: Run, base: dict[str, Any]) -> str:
    """The latency targets the brief set, in words: a message never names a target that was not given."""
    p95, ttft = base["p95_ms"] > 0, base["ttft_ms"] > 0
    if not (p95 or ttft):
        return ""
    key = "latency.target_both" if p95 and ttft else ("latency.target_p95" if p95 else "latency.target_ttft")
    return run.text(key, base)


def _defaults_stated(brief: Brief, shape: Shape, a: Any) -> dict[str, Any]:
    """The value assumed for each brief field the sizing had to default, so a note can state it."""
    # Embeddings are sized at what a server batches from its queue, not at one sequence: state that batch.
    batch = prefill_batch_sequences(brief, shape, a) if brief.workload == "EMBEDDING" else shape.sequences
    return {
        "model.precision": shape.precision,
        "model.kv_cache_precision": shape.kv_precision,
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
    """The decision in the order it is made, in one pass over every price tier the brief allows; `still_wanted`
    (optional) is asked between stages, and when it says no, `Cancelled` is raised."""
    req, said = _named_model(book, req)
    # A batch's volume is sized as the rate that finishes it in its window (decide/month.py).
    brief = with_volume_rate(req.brief, book.assumptions)
    if brief is not req.brief:  # most briefs state no volume: the request as it came, not a copy of it
        req = replace(req, brief=brief)
    run = Run(book, engine, req)
    run.notes += [Reason("models.registry", run.text("note.model_registry", said))] if said else []
    day = req.as_of or today or date.today()
    checkpoint(still_wanted, "sizing")
    a = book.assumptions
    shape, sizings = _size_every_gpu(book, req, day)
    _place_every_gpu(run, shape, sizings, day)
    cost_months(sizings, req.brief, a)
    base = F.brief_fact(req.brief, a.num("default_utilization"), shape, sizings, len(req.quotes),
                        (a.num("small_job_gpu_hours"), a.num("small_job_max_gpus")))
    asks = _brief_rules(run, base, shape)
    checkpoint(still_wanted, "candidates")
    scored = _candidate_rules(run, base, sizings)
    ranked = _ranked(scored, req, book.assumptions)
    checkpoint(still_wanted, "plan")
    asked = {q.field for q in asks.questions}
    planned = _route(run, base, shape, ranked, day)
    route = _outcome(run, *planned, asked)
    checkpoint(still_wanted, "render")
    return _render(run, shape, asks, scored, ranked, route, base)


def _route(run: Run, base: dict[str, Any], shape: Shape | None, ranked: _Ranked,
           day: date) -> tuple[dict[str, Any], dict[str, Any], str, list[Reason]]:
    """The route (`_plan_route`); on every route but BUY, candidates an offer in the brief's scope prices (or the
    caller's quote) rank before every other, and the route is decided again on the new first pick."""
    mark = (len(run.trace), len(run.warnings), len(run.notes))
    plan, said, kind, rationale = _plan_route(run, base, shape, ranked, day)
    if kind not in F.OWN_ROUTES and placed_first(ranked):
        del run.trace[mark[0]:], run.warnings[mark[1]:], run.notes[mark[2]:]
        plan, said, kind, rationale = _plan_route(run, base, shape, ranked, day)
    return plan, said, kind, rationale


@dataclass
class _Asks:
    """What the brief rules ask and measure: questions, the metric, and defaults still assumed."""

    questions: list[Question]
    metric: Metric | None
    assumed: list[tuple[str, str]]


@dataclass
class _Ranked:
    survivors: list[Scored]  # not excluded, best first
    shown: list[Scored]
    limit: int


@dataclass
class _Routed:
    route: Route
    depends_on: tuple[str, ...]


def _named_model(book: Rulebook, req: AdviceRequest) -> tuple[AdviceRequest, dict[str, str]]:
    """Stage 0: the registry's architecture for a brief that names a model; what the note says about it (empty
    when nothing came from the registry)."""
    entry = find(book.models, req.brief.model.name)
    filled = filled_fields(req.brief.model, entry) if entry else {}
    if not entry or not filled:
        return req, {}
    values = ", ".join(f"{k} {v:,}" if isinstance(v, int) else f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}"
                       for k, v in filled.items())
    said = {"model": entry.name, "source": entry.source, "as_of": entry.as_of, "filled": values}
    return replace(req, brief=resolve(req.brief, book.models)), said


def _size_every_gpu(book: Rulebook, req: AdviceRequest, day: date) -> tuple[Shape | None, list[Sizing]]:
    a = book.assumptions
    brief = req.brief
    shape = shape_of(brief, a)
    entry = find(book.models, req.brief.model.name) if req.brief.workload == "MEDIA_GENERATION" else None
    if shape and entry and entry.denoiser:  # the named model's denoiser: its VAE's latent and its architecture
        shape = replace(shape, denoiser=entry.denoiser)
    allowed = set(brief.gpus)
    # brief.gpus: a team that owns H100s asks about H100s; the others are not sized, ranked or excluded.
    gpus = [g for g in book.catalog if g.id in allowed] if allowed else book.catalog
    return shape, (size_all(gpus, brief, shape, a, req.quotes, day) if shape else [])


def _place_every_gpu(run: Run, shape: Shape | None, sizings: list[Sizing], day: date) -> None:
    """Each sized GPU on the offers the brief and the placement rules allow (decide/placement.py)."""
    table = run.book.offers
    if shape is None or not len(table):
        return
    a, brief = run.book.assumptions, run.req.brief
    scopes = _allowed_scopes(run, day)
    p = brief.placement
    term = reserve_term(brief, a)
    key = (scopes, day, p.providers, p.regions, p.countries, term)

    def build() -> tuple[Any, Any, dict[Any, Any]]:
        allowed = allowed_ids(_offers_by_scope(run, day), scopes, term, brief)
        return leaders_of(table, day, allowed), markets_of(table, day, allowed), {}

    leaders, markets, kept = keep(run.shared.leaders, key, build, 64)
    max_age = int(a.values.get("max_offer_age_days", a.values.get("max_price_age_days", 540)))
    for s in sizings:
        place(s, brief, shape, a, table, day, leaders, max_age, markets, kept)


def _offers_by_scope(run: Run, day: date) -> ByScope:
    """The day's offers by scope, those on hosts too small for their GPUs left out; per rules version and day."""
    def build() -> ByScope:
        a = run.book.assumptions
        # Host RAM below the GPUs' memory cannot hold what they load and save (a 48 GB card on a 4 GB host).
        ratio = float(a.values.get("min_host_ram_per_gpu_memory", 0.0))
        gib = {g.id: g.capacity_gb * 1e9 / 2**30 for g in run.book.catalog}
        return by_scope(run.book.offers, day, lambda o: host_ram_ok(o, gib.get(o.gpu, 0.0), ratio))

    return keep(run.shared.by_scope, day, build, 4)  # a day holds a row per offer: few days at once


def _allowed_scopes(run: Run, day: date) -> frozenset[Scope]:
    """The scopes no `fact: offer` rule excludes for this brief. The verdicts depend only on a few brief fields
    and the day's scopes, so they are kept per rules version (not when the answer carries a trace)."""
    brief = run.req.brief
    key = (brief_key(brief), day)
    cache = run.shared.scopes
    if not run.req.include_trace and key in cache:
        return cache[key]
    scopes = keep(run.shared.scope_list, day, lambda: scopes_of(run.book.offers, day), 8)  # per rules version
    facts = [offer_fact(brief, sc, i) for i, sc in enumerate(scopes)]
    fired = run.fire("offer", facts, summary=_scope_name)
    allowed = frozenset(
        sc for sc, f in zip(scopes, facts, strict=True)
        if not any(act.kind == "exclude" for rule in fired[f["id"]] for act in rule.actions)
    )
    if len(cache) >= 256:
        cache.clear()
    cache[key] = allowed
    return allowed


def _scope_name(fact: dict[str, Any]) -> str:
    """An offer fact's scope as a summarised trace names it: provider, country, tier."""
    return f"{fact['provider']} / {fact['country'] or 'country unknown'} / {fact['tier']}"


def _brief_rules(run: Run, base: dict[str, Any], shape: Shape | None) -> _Asks:
    """Stage 1, brief rules: questions, the metric, brief-level mistakes; notes on the defaults sizing assumed."""
    a, brief = run.book.assumptions, run.req.brief
    questions: list[Question] = []
    metric: Metric | None = None
    for rule in run.fire("brief", [base])["brief"]:
        run.common(rule, base)
        for act in rule.actions:
            if act.kind == "ask" and all(q.field != act.get("field") for q in questions):
                questions.append(Question(act.get("field"), run.text(act.get("message"), base), rule.id,
                                          unit=run.name(unit_key(act.get("unit"))) if act.get("unit") else "",
                                          assumed=_assumed(act, a),
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
            # The field as a person calls it (its brief path stays in the answer's `assumed`).
            key, params = "note.assumed_default", {"field": run.name(f"field.{f}")}
            if f in stated:
                key, params = "note.assumed_value", {**params, "value": stated[f]}
            run.notes.append(Reason("sizing.defaults", run.text(key, params)))
        if not shape.arch.exact and brief.workload != "MEDIA_GENERATION":  # a denoiser keeps no KV cache
            run.notes.append(
                Reason(
                    "sizing.architecture",
                    run.text(
                        # a training run keeps no KV cache: its estimate is of the activations
                        "note.arch_estimated_training" if brief.workload in TRAINING_WORKLOADS
                        else _KV_NOTE.get(shape.arch.kind, "note.kv_estimated"),
                        {
                            "hidden_size": shape.arch.hidden_size,
                            "layers": shape.arch.layers,
                            "kv_heads": shape.arch.kv_heads,
                            "head_dim": shape.arch.head_dim,
                            "kv_latent": shape.arch.kv_latent,
                            "params_billion": shape.params_billion,
                        },
                    ),
                )
            )
        for rule_id, key, params in shape_notes(brief, shape, a):
            run.notes.append(Reason(rule_id, run.text(key, params)))
    return _Asks(questions, metric, assumed)


def _candidate_rules(run: Run, base: dict[str, Any], sizings: list[Sizing]) -> list[Scored]:
    """Stage 2, candidate rules: eligibility, the workload matrix, scoring; one fact per sized GPU."""
    later = F.fills_later(run.book.program.for_fact("candidate"))
    scored = [Scored(s, F.candidate_fact(base, s, later)) for s in sizings]
    mark_near_misses(scored, run)
    fired = run.fire("candidate", [c.fact for c in scored])
    for c in scored:
        said, c.points, exclusions, parts, reasons, caveats = run.effects(fired[c.fact["id"]])
        for rule in said:
            run.common(rule, _params_of(c, run, base))
        c.exclusions, c.parts, c.reasons, c.caveats = list(exclusions), list(parts), list(reasons), list(caveats)
    return scored


def _ranked(scored: list[Scored], req: AdviceRequest, a: Assumptions) -> _Ranked:
    """Rank the candidates no rule excluded; the first `max_candidates` are shown."""
    survivors = [c for c in scored if not c.exclusions]
    rank(survivors)
    limit = req.max_candidates or int(a.values.get("max_candidates_default", DEFAULT_MAX_CANDIDATES))
    return _Ranked(survivors, survivors[:limit], limit)


def _plan_route(
    run: Run, base: dict[str, Any], shape: Shape | None, ranked: _Ranked, day: date
) -> tuple[dict[str, Any], dict[str, Any], str, list[Reason]]:
    """Stage 3, plan rules: the plan fact of the first pick, the route (hit policy first) and its rationale, and
    plan-level mistakes."""
    a, brief = run.book.assumptions, run.req.brief
    top = ranked.shown[0].sizing if ranked.shown else None
    plan = F.plan_fact(
        base, top, len(ranked.survivors), brief.economics.hours_per_month, _run_fit(run, top),
        sum(1 for c in ranked.survivors if rentable(c.sizing)),
    )
    plan.update(freshness([c.sizing for c in ranked.shown], day, int(a.values.get("stale_price_days", 45))))
    plan.update(money_facts(top, brief, a))  # the first pick's months by tier (decide/route_money.py)
    # The model-API leg on the brief's token mix against this first pick (decide/api_leg.py).
    run.api = price(run.book.api_offers, run.book.models, brief, shape, top, a)
    plan.update(plan_fields(run.api, top, brief.economics.hours_per_month or a.num("hours_per_month"), day,
                            int(a.values.get("stale_price_days", 45))))
    route_kind, rationale = DEFAULT_ROUTE, []
    # A utilization the brief did not give is the rules' default: a message that prints it says so.
    said = {**plan, "utilization_basis": "" if plan["utilization_given"] else run.name("note.utilization_assumed"),
            "api_unit": run.name(f"api.units.{top.unit}") if top and top.unit else "",
            "top_name": top.gpu.name if top else ""}
    for rule in run.fire("plan", [plan])["plan"]:
        run.common(rule, said)
        for act in rule.actions:
            if act.kind == "route" and not rationale:
                route_kind = act.get("kind")
                rationale.append(Reason(rule.id, run.text(act.get("message"), said)))
    return plan, said, route_kind, rationale


def _depends_on(run: Run, plan: dict[str, Any], route_kind: str, asked: set[str] | None) -> tuple[str, ...]:
    """The missing brief fields that could change the route (and the caller's), without the outcome rules."""
    depends_on = route_depends_on(run.book.program.for_fact("plan"), plan, route_kind, DEFAULT_ROUTE)
    if asked is not None:
        askable = _askable(run.book.program.for_fact("brief"))
        depends_on = tuple(f for f in depends_on if f in asked or f not in askable)
    return depends_on


def _outcome(run: Run, plan: dict[str, Any], said: dict[str, Any], route_kind: str,
             rationale: list[Reason], asked: set[str] | None = None) -> _Routed:
    """Which missing brief fields could change the route; stage 4, the outcome rules on the chosen route.
    `asked`: the fields the questions ask; a route input some rule could ask about but that the rules left
    unasked for this brief (a single run's hours a month) is not one the route waits on."""
    depends_on = _depends_on(run, plan, route_kind, asked)
    outcome = F.outcome_fact(plan, route_kind)
    for rule in run.fire("outcome", [outcome])["outcome"]:
        run.common(rule, {**said, **outcome})
    return _Routed(Route(route_kind, tuple(rationale), bool(depends_on), depends_on), depends_on)


def _askable_fields(rules: tuple[Rule, ...]) -> frozenset[str]:
    return frozenset(act.get("field") for r in rules for act in r.actions if act.kind == "ask")


# The brief fields some ask rule can ask about, per rules version (the program's rule tuple, by identity).
_askable: IdentityMemo[tuple[Rule, ...], frozenset[str]] = IdentityMemo(_askable_fields, limit=8)


def _render(
    run: Run, shape: Shape | None, asks: _Asks, scored: list[Scored], ranked: _Ranked, routed: _Routed,
    base: dict[str, Any],
) -> Advice:
    """The answer: shown candidates with their texts, exclusions, warnings, plans and the summary."""
    # A summary (VIEW_SUMMARY) is this answer cut by wire/views.summarize: what the cut drops and the headline does
    # not read is not made (the candidates' reasons, caveats and rule points, the exclusions' reasons while a
    # candidate is shown, the unmeasured-class note, the plan and checklist). What the headline reads stays.
    book, brief, lean = run.book, run.req.brief, run.req.summary_view
    candidates = tuple(candidate_of(c, run, lean) for c in ranked.shown if _params_of(c, run, base))
    unmeasured = None if lean else unmeasured_note(ranked.shown, candidates, run)
    if unmeasured:
        run.notes.append(unmeasured)
    said = not (lean and candidates)  # a summary's headline quotes an exclusion only when nothing is shown
    excluded = tuple(Exclusion(c.sizing.gpu.id, said_texts(c.exclusions, c, run) if said and _params_of(c, run, base)
                               else ()) for c in scored if c.exclusions)
    warnings = dedupe_warnings(run.warnings)
    advice = Advice(
        candidates=candidates,
        excluded=excluded,
        route=routed.route,
        warnings=warnings,
        questions=tuple(asks.questions),
        metric=asks.metric,
        benchmark_plan=() if lean else once(book, run, "benchmark", brief.workload, benchmark),
        procurement_checklist=() if lean else once(book, run, "checklist", brief.workload, checklist),
        ruleset=RulesetRef(book.revision, book.content_hash),
        trace=tuple(run.trace),
        notes=tuple(run.notes),
        # Nothing sized or classified, or a missing field could change the route: ask before acting on it.
        provisional=(shape is None or brief.workload == "UNSPECIFIED" or bool(routed.depends_on)
                     or bool(asks.assumed)),
        assumed=tuple(asks.assumed),
        not_shown=tuple(c.sizing.gpu.id for c in ranked.survivors[ranked.limit:]),
        price_tier=compared_tier(brief),
        unmet=unmet_targets(brief, [c.sizing for c in ranked.survivors], [c.sizing for c in scored],
                            _Resizer(run, shape), shape.output_tokens if shape else 0,
                            run.book.assumptions.num("closest_within")),
        offers_loaded=any(c.sizing.offers_loaded for c in scored),
        api=run.api.leg if run.api is not None and run.api.leg is not None and run.api.leg.in_scope else None,
    )
    # The summary is rendered from the otherwise finished answer, which nobody else holds yet: set in place
    # rather than copied field by field through the frozen constructor.
    points = {c.sizing.gpu.id: tuple(c.parts) for c in ranked.shown}
    advice.__dict__["summary"] = render_summary(advice, run.msgs, run.locale, base, shape is not None, points)
    if run.req.include_charts:  # pictures of the finished answer's own figures (decide/charts.py)
        advice.__dict__["charts"] = charts_of(advice, run)
    return advice


def _run_fit(run: Run, top: Sizing | None) -> F.RunFit | None:
    """For a training run with no deadline: the days it should fit in (the brief's horizon, else the rules'
    `long_training_run_days`) and the GPUs of the top pick's type that finish it in them, sized as a deadline
    would be (None when not training, or when the brief's own deadline already sized the count)."""
    brief, a = run.req.brief, run.book.assumptions
    if top is None or top.train_hours <= 0 or brief.training.target_days > 0:
        return None
    horizon = brief.economics.horizon_months
    days = horizon * a.num("hours_per_month") / 24 if horizon > 0 else a.num("long_training_run_days")
    if top.train_hours / 24 <= days:
        return F.RunFit(days, top.count)
    timed = replace(brief, training=replace(brief.training, target_days=days))
    shape = shape_of(timed, a)
    again = size(top.gpu, timed, shape, a, run.req.quotes, run.req.as_of or date.today()) if shape else None
    return F.RunFit(days, again.count if again and again.fits else 0)


class _Resizer:
    """Sizes one GPU again for this request with another average output length (the headline's suggestion): its
    fit and latency only, on the model architecture the answer's shape already resolved. Each GPU's and length's
    result, and each search's answer (`searched`), is kept per rules version, brief and day (the economics left
    out unless training: the speed never reads them), so a repeated brief does not search again."""

    def __init__(self, run: Run, sized: Shape | None) -> None:
        self.book, self.req = run.book, run.req
        self.day = self.req.as_of or date.today()
        self.arch = sized.arch if sized else None
        # The memory a width needs reads the output length only through the context it sizes (tokens per
        # sequence): lengths tried at the same context share their breakdowns.
        self.needs: dict[tuple[int, int], dict[tuple[int, int], MemoryBreakdown]] = {}
        self.prefills: dict[Any, Any] = {}  # a prefill step reads no output length: shared by every length tried
        self._kept: dict[Any, tuple[object, Any]] | None = None  # this brief's entry of the rules' table

    def kept(self) -> dict[Any, tuple[object, Any]]:
        if self._kept is None:
            brief = self.req.brief
            key = (brief if brief.workload in TRAINING_WORKLOADS else without_economics(brief), self.day)
            self._kept = keep(tb.tables(self.book.assumptions).latencies, key, dict, LATENCY_BRIEFS)
        return self._kept

    def __call__(self, s: Sizing, output_tokens: int) -> tuple[bool, float]:
        kept = self._kept if self._kept is not None else self.kept()
        hit = kept.get((id(s.gpu), output_tokens))
        if hit is not None and hit[0] is s.gpu:
            return hit[1]  # type: ignore[no-any-return]
        brief = with_output_tokens(self.req.brief, output_tokens)
        shape = shape_of(brief, self.book.assumptions, self.arch)
        assert shape is not None  # the same brief sized before; only the output length differs
        shared = self.needs.setdefault((shape.tokens_per_sequence, shape.sequences), {})
        got = latency_of(s.gpu, brief, shape, self.book.assumptions, self.day, shared, self.prefills)
        kept[(id(s.gpu), output_tokens)] = (s.gpu, got)
        return got

    def searched(self, s: Sizing, figures: tuple[float, ...], search: Callable[[], int]) -> int:
        """`search()`, the suggested length for GPU `s.gpu` and the search's other inputs `figures` (the target,
        the length sized and the closest sizing's own latency figures), kept beside the lengths it sized."""
        kept = self.kept()
        key = ("search", id(s.gpu), *figures)
        hit = kept.get(key)
        if hit is not None and hit[0] is s.gpu:
            return hit[1]  # type: ignore[no-any-return]
        found = search()
        kept[key] = (s.gpu, found)
        return found


def with_output_tokens(brief: Brief, n: int) -> Brief:
    """`replace(brief, traffic=replace(brief.traffic, avg_output_tokens=n))` without the frozen constructors'
    guarded setattr per field: the same brief (equal, same repr and hash) at a tenth of the cost, ~5 per answer
    that suggests shorter outputs. tests/test_lean_paths.py holds the two equal."""
    traffic = build(Traffic, **{**brief.traffic.__dict__, "avg_output_tokens": n})
    return build(Brief, **{**brief.__dict__, "traffic": traffic})


def _assumed(act: Action, a: Assumptions) -> str | int | float | bool | None:
    """What an answer assumes while a question is open: a literal in the rule, or a named assumption (checked to
    exist by rules-check)."""
    name = act.get("assumes_from")
    if name is not None:
        return a.values.get(name)
    return act.get("assumes")
