"""A rules version as the decision reads it: catalog, assumptions, the compiled rules program, message tables,
benchmark plan and checklist. Built by the rules toolchain (service/rulebook/folder.py), immutable once built."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..domain.accuracy import EMPTY as EMPTY_ACCURACY
from ..domain.accuracy import AccuracyTable
from ..domain.api_offers import EMPTY_API_OFFERS, ApiOfferTable
from ..domain.assumptions import Assumptions
from ..domain.catalog import Gpu
from ..domain.models import EMPTY, Registry
from ..domain.offers import OfferTable
from ..engine.ir import Program
from ..engine.load import Problem
from .facts import SCHEMA


@dataclass(frozen=True)
class Step:
    message: str
    workloads: tuple[str, ...] = ()  # empty = every workload


@dataclass(frozen=True)
class Stage:
    id: str
    name: str  # message key
    steps: tuple[Step, ...]
    record: tuple[Step, ...]


@dataclass(frozen=True)
class Section:
    id: str
    name: str  # message key
    items: tuple[Step, ...]


@dataclass(frozen=True)
class Rulebook:
    source_dir: str
    content_hash: str
    revision: str
    catalog: tuple[Gpu, ...]
    assumptions: Assumptions
    program: Program
    messages: dict[str, dict[str, str]]  # locale → key → template
    message_locations: dict[str, dict[str, str]]  # locale → key → path:line
    benchmark_plan: tuple[Stage, ...]
    checklist: tuple[Section, ...]
    files: tuple[str, ...]
    # The model registry: id → entry (rules/models/*.yaml).
    models: Registry = field(default_factory=lambda: EMPTY, compare=False)
    warnings: tuple[Problem, ...] = field(default_factory=tuple)
    # What a team can rent (rules/offers/*.csv), indexed by GPU and instance shape.
    offers: OfferTable = field(default_factory=lambda: OfferTable(()), compare=False, repr=False)
    # Answers' parts that depend only on these rules, the locale and the workload (the benchmark plan and the
    # checklist), kept once rendered: (kind, locale, workload) → parts. Bounded by locales x workloads.
    rendered: dict[tuple[str, str, str], Any] = field(default_factory=dict, compare=False, repr=False)
    # Measured error per class (rules/accuracy/results.yaml, written by `make accuracy`), cited by each candidate.
    accuracy: AccuracyTable = field(default_factory=lambda: EMPTY_ACCURACY, compare=False, repr=False)
    # What hosted model APIs charge per million tokens (rules/api_offers/*.csv), by registry model.
    api_offers: ApiOfferTable = field(default_factory=lambda: EMPTY_API_OFFERS, compare=False, repr=False)

    def counts(self) -> dict[str, int]:
        out = {"gpus": len(self.catalog), "rules": len(self.program.rules), "files": len(self.files),
               "offers": len(self.offers), "api_offers": len(self.api_offers)}
        for fact in SCHEMA:
            out[f"rules_{fact}"] = len(self.program.for_fact(fact))
        out["messages_en"] = len(self.messages.get("en", {}))
        out["messages_zh_CN"] = len(self.messages.get("zh-CN", {}))
        out["benchmark_stages"] = len(self.benchmark_plan)
        out["checklist_sections"] = len(self.checklist)
        out["models"] = len(self.models)
        return out
