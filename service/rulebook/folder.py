"""Load a rules folder into one immutable Rulebook, or report every problem with file:line:col.

A rules folder holds YAML documents of these kinds (the `kind:` key says which): catalog, assumptions, rules,
decision_table, benchmark_plan, checklist, messages, models, accuracy (the measured error answers cite, written by
`make accuracy`). `schema/` holds their JSON Schemas and `tests/` the rule authors' golden cases; neither is part
of the logic. Nothing in a rules folder is executed: actions are a fixed vocabulary and messages are templates
filled from facts.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import jsonschema

from ..decide.book import Rulebook, Section, Stage, Step
from ..decide.facts import SCHEMA
from ..domain.api_offers import ApiOffer, ApiOfferTable
from ..domain.assumptions import Assumptions, missing_keys
from ..domain.brief import ROUTE_KINDS
from ..domain.catalog import Gpu, Price
from ..domain.models import registry_of
from ..domain.offers import Offer, OfferTable
from ..engine.ir import Program
from ..engine.load import Doc, Problem, load_yaml, plain, pos
from ..engine.parse import compile_docs, did_you_mean
from ..engine.schema_errors import most_specific, readable
from .accelerators import read_accelerator_map
from .accuracy_file import accuracy_table
from .api_offer_files import check_api_offers, read_api_offers
from .checks import (
    format_spec_problems,
    lint_problems,
    logic_problems,
    message_problems,
    price_problems,
    question_problems,
)
from .files import RuleFile, read_folder, walk
from .limits import size_problems
from .model_files import model_entries
from .offer_checks import check_offers, supersede
from .offer_files import read_offers

KINDS = ("catalog", "assumptions", "rules", "decision_table", "benchmark_plan", "checklist", "messages", "models",
         "accuracy")
LOCALES = ("en", "zh-CN")
SKIP_DIRS = ("schema", "tests")
CHANGED_WHILE_CHECKED = "the folder changed while it was being checked: not loaded (the next reload reads it again)"


def _schemas(files: dict[str, bytes], shown_root: str) -> tuple[dict[str, dict[str, Any]], list[Problem]]:
    out, problems = {}, []
    for kind in KINDS:
        rel = f"schema/{kind}.schema.json"
        if rel in files:
            try:
                out[kind] = json.loads(files[rel].decode("utf-8"))
            except UnicodeDecodeError:
                problems.append(Problem(f"{shown_root}/{rel}", 1, 1, "", "not UTF-8 text"))
            except json.JSONDecodeError as exc:
                problems.append(Problem(f"{shown_root}/{rel}", exc.lineno, exc.colno, "", f"broken JSON: {exc.msg}"))
    return out, problems


def _jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_jsonable(x) for x in v]
    if isinstance(v, date | datetime):
        return v.isoformat()
    return v


def _node_at(data: Any, path: list[Any]) -> tuple[Any, Any]:
    """The deepest (container, key) along `path` that exists in the ruamel tree, for positions."""
    parent, key, node = data, None, data
    for step in path:
        try:
            child = node[step]
        except (KeyError, IndexError, TypeError):
            break
        parent, key, node = node, step, child
    return parent, key


def schema_problems(doc: Doc, schema: dict[str, Any]) -> list[Problem]:
    validator = jsonschema.Draft202012Validator(schema)
    out = []
    for raw in validator.iter_errors(_jsonable(plain(doc.data))):
        err = most_specific(raw)  # of a oneOf: the branch the author meant
        path = list(err.absolute_path)
        parent, key = _node_at(doc.data, path)
        line, col = pos(parent, key) if key is not None else pos(doc.data)
        rid = _rule_id_near(doc.data, path)
        where = "/".join(str(p) for p in path) or "(top)"
        message = f"{where}: {readable(err) or err.message}"
        if err.validator == "additionalProperties" and isinstance(err.instance, dict):
            # Point at the unknown key itself and suggest the nearest allowed one.
            allowed = list(err.schema.get("properties", {}))
            node = parent[key] if key is not None else doc.data
            for name in err.instance:
                if name not in allowed and not isinstance(err.schema.get("additionalProperties"), dict):
                    line, col = pos(node, name)
                    out.append(
                        Problem(
                            doc.path,
                            line,
                            col,
                            rid,
                            f"{where}: unknown key '{name}'{did_you_mean(name, allowed)}",
                        )
                    )
            continue
        out.append(Problem(doc.path, line, col, rid, message))
    return out


def _rule_id_near(data: Any, path: list[Any]) -> str:
    node, rid = data, ""
    for step in path:
        try:
            node = node[step]
        except (KeyError, IndexError, TypeError):
            break
        if isinstance(node, dict) and isinstance(node.get("id"), str):
            rid = node["id"]
    return rid


def _date(v: Any) -> date | None:
    if v is None or v == "":
        return None
    if isinstance(v, datetime):
        return v.date()
    if isinstance(v, date):
        return v
    return date.fromisoformat(str(v))


def _gpus(doc: Doc, problems: list[Problem]) -> list[Gpu]:
    out = []
    for i, g in enumerate(doc.data.get("gpus", [])):
        line, _ = pos(doc.data["gpus"], i)
        prices = []
        for j, p in enumerate(g.get("prices", [])):
            pl, pc = pos(g["prices"], j)
            missing = [k for k in ("kind", "tier", "as_of", "source") if not p.get(k)]
            if missing:  # the schema says so too; this keeps a folder without schemas honest
                problems.append(
                    Problem(doc.path, pl, pc, str(g.get("id", "")), f"price row without {', '.join(missing)}")
                )
                continue
            prices.append(
                Price(
                    kind=str(p["kind"]),
                    usd=float(p.get("usd_per_hour", p.get("usd", 0.0))),
                    as_of=_jsonable(p["as_of"]),
                    source=str(p["source"]),
                    valid_from=_date(p.get("valid_from")),
                    valid_until=_date(p.get("valid_until")),
                    location=f"{doc.path}:{pl}",
                    tier=str(p["tier"]).upper(),
                    sources=tuple((str(k).removeprefix("source_"), str(v)) for k, v in p.items()
                                  if str(k).startswith("source_") and v),
                )
            )
        ic = g.get("interconnect", {}) or {}
        out.append(
            Gpu(
                id=str(g["id"]),
                name=str(g["name"]),
                vendor=str(g["vendor"]),
                gpu_class=str(g["class"]),
                memory_gb=float(g["memory_gb"]),
                memory_type=str(g.get("memory_type", "")),
                bandwidth_tbs=float(g["bandwidth_tbs"]),
                tflops_bf16=float(g["tflops_bf16"]),
                tflops_fp8=float(g.get("tflops_fp8", 0) or 0),
                tflops_fp4=float(g.get("tflops_fp4", 0) or 0),
                tdp_w=float(g["tdp_w"]),
                interconnect_kind=str(ic.get("kind", "none")),
                interconnect_gbs=float(ic.get("gbs", 0) or 0),
                gpus_per_node=int(g.get("gpus_per_node", 8)),
                nvlink_domain=int(g.get("nvlink_domain", 1)),
                mig=int(g.get("mig", 0) or 0),
                matmul_efficiency=float(g.get("matmul_efficiency", 0.7)),
                software=str(g.get("software", "cuda")),
                notes=str(g.get("notes", "")),
                spec_source=str(g.get("spec_source", "")),
                spec_as_of=str(_jsonable(g.get("spec_as_of", ""))),
                prices=tuple(prices),
                location=f"{doc.path}:{line}",
                memory_reported_gb=float(g.get("memory_reported_gb", 0) or 0),
                node_power_kw=float(g.get("node_power_kw", 0) or 0),
                scale_out_gbs=float(g.get("scale_out_gbs", 0) or 0),
                rack_gpus=int(g.get("rack_gpus", 0) or 0),
            )
        )
    return out


def _steps(items: Any) -> tuple[Step, ...]:
    out = []
    for it in items or []:
        if isinstance(it, str):
            out.append(Step(it))
        else:
            out.append(Step(str(it["message"]), tuple(str(w) for w in it.get("workloads", []) or [])))
    return tuple(out)


def rule_files(root: Path) -> list[Path]:
    """Every regular file of a rules folder that `rulefiles.walk` accepts (links that stay inside the folder, as
    a Kubernetes ConfigMap mounts them through `..data`; hidden entries skipped)."""
    return [e.path for e in walk(root)[0]]


def _compiler_problems(docs: list[Doc], found: list[Problem]) -> list[Problem]:
    """What the rule compiler says of the rule files besides the structural problems already `found`: at other
    places only (the same place is the same mistake in other words). A document malformed past what the compiler
    can read adds nothing."""
    rule_docs = [d for d in docs if isinstance(d.data, dict) and d.data.get("kind") in ("rules", "decision_table")]
    try:
        _, more = compile_docs(rule_docs, SCHEMA, ROUTE_KINDS)
    except Exception:  # noqa: BLE001 - the structural problems already refuse the folder
        return []
    seen = {(p.path, p.line, p.col) for p in found}
    said = {(p.path, p.line, p.message.split(": ", 1)[-1]) for p in found}  # without the schema's JSON path
    return [p for p in more if (p.path, p.line, p.col) not in seen
            and not any(p.message.startswith(m) for path, line, m in said if (path, line) == (p.path, p.line))]


def content_hash(files: list[RuleFile]) -> str:
    h = hashlib.sha256()
    for f in files:
        h.update(f.rel.encode())
        h.update(b"\0")
        h.update(f.data)
        h.update(b"\0")
    return h.hexdigest()


def _content_file(by_kind: dict[str, list[Doc]], kind: str) -> str:
    return by_kind[kind][0].path if by_kind.get(kind) else kind


OFFERS_DIR = "offers/"
ACCELERATOR_MAP = "offers/accelerators.csv"  # the importers' name map, not offers


def _offers(
    files: list[RuleFile], shown_root: str, known_gpus: set[str], today: date, max_age_days: int
) -> tuple[OfferTable, list[Problem]]:
    """Every `offers/*.csv` table as one OfferTable, with each row's problems at path:line."""
    rows: list[Offer] = []
    problems: list[Problem] = []
    for f in files:
        if not (f.rel.startswith(OFFERS_DIR) and f.rel.endswith(".csv")):
            continue
        shown = f"{shown_root}/{f.rel}"
        try:
            text = f.data.decode("utf-8")
        except UnicodeDecodeError as exc:
            problems.append(Problem(shown, 1, 1, "", f"is not UTF-8 text (byte {exc.start})"))
            continue
        if f.rel == ACCELERATOR_MAP:
            problems += read_accelerator_map(shown, text, known_gpus)[1]
            continue
        got, errs = read_offers(shown, text, known_gpus)
        rows += got
        problems += errs
    rows, superseded = supersede(rows)
    problems += superseded
    problems += check_offers(rows, known_gpus, today, max_age_days)
    return OfferTable(rows), problems


API_OFFERS_DIR = "api_offers/"


def _api_offers(files: list[RuleFile], shown_root: str, models: set[str], today: date,
                max_age_days: int) -> tuple[ApiOfferTable, list[Problem]]:
    """Every `api_offers/*.csv` table as one ApiOfferTable, with each row's problems at path:line."""
    rows: list[ApiOffer] = []
    problems: list[Problem] = []
    for f in files:
        if not (f.rel.startswith(API_OFFERS_DIR) and f.rel.endswith(".csv")):
            continue
        shown = f"{shown_root}/{f.rel}"
        try:
            got, errs = read_api_offers(shown, f.data.decode("utf-8"))
        except UnicodeDecodeError as exc:
            problems.append(Problem(shown, 1, 1, "", f"is not UTF-8 text (byte {exc.start})"))
            continue
        rows += got
        problems += errs
    problems += check_api_offers(rows, models, today, max_age_days)
    return ApiOfferTable(rows), problems


def load_rulebook(
    root: str | Path, today: date | None = None, max_price_age_days: int | None = None,
    expect_hash: str | None = None,
) -> tuple[Rulebook | None, list[Problem]]:
    """Every problem at once; a Rulebook only when there are no errors (warnings ride along).

    `expect_hash`: parse nothing unless the folder's bytes are exactly these (the version a separate process
    has already checked: see service/rulebook/vetting.py)."""
    root = Path(root)
    if not root.is_dir():
        return None, [Problem(root.name or str(root), 1, 1, "", "rules folder does not exist")]
    files, problems = read_folder(root, root.name)
    if problems:
        return None, problems  # a folder with a hostile entry is refused whole, before any parsing
    digest = content_hash(files)
    if expect_hash is not None and digest != expect_hash:
        return None, [Problem(root.name, 1, 1, "", CHANGED_WHILE_CHECKED)]
    by_rel = {f.rel: f.data for f in files}
    schemas, problems = _schemas(by_rel, root.name)
    docs: list[Doc] = []
    yaml_files = [
        f for f in files if f.rel.endswith((".yaml", ".yml")) and f.rel.split("/")[0] not in SKIP_DIRS
    ]
    for f in yaml_files:
        shown = f"{root.name}/{f.rel}"
        doc, errs = load_yaml(f.data, shown)
        problems += errs
        if doc is None:
            continue
        if not isinstance(doc.data, dict) or doc.data.get("kind") not in KINDS:
            kind = doc.data.get("kind") if isinstance(doc.data, dict) else None
            problems.append(
                Problem(shown, 1, 1, "", f"'kind' must be one of {', '.join(KINDS)}; got {kind!r}")
            )
            continue
        if doc.data["kind"] in schemas:
            problems += schema_problems(doc, schemas[doc.data["kind"]])
        docs.append(doc)
    if problems:
        # Structural errors first: later stages assume well-formed documents. The rule compiler's own checks
        # (unknown facts, values a fact cannot take) are still added for the rule files, so one run reports a
        # misspelt field beside a bad operator in the same condition (issue 37), never one problem per run.
        return None, problems + _compiler_problems(docs, problems)

    by_kind: dict[str, list[Doc]] = {k: [] for k in KINDS}
    for d in docs:
        by_kind[d.data["kind"]].append(d)

    catalog: list[Gpu] = []
    for d in by_kind["catalog"]:
        catalog += _gpus(d, problems)
    ids = [g.id for g in catalog]
    for g in catalog:
        if ids.count(g.id) > 1:
            path, line = g.location.rsplit(":", 1)
            problems.append(Problem(path, int(line), 1, g.id, "GPU id defined more than once"))
    if not catalog:
        problems.append(Problem(root.name, 1, 1, "", "no GPU catalog (a file with kind: catalog)"))

    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for d in by_kind["assumptions"]:
        for k, v in d.data.get("values", {}).items():
            values[str(k)] = plain(v["value"])
            sources[str(k)] = str(v.get("source", ""))
    for k in missing_keys(values):
        where = by_kind["assumptions"][0].path if by_kind["assumptions"] else root.name
        problems.append(Problem(where, 1, 1, k, f"assumption '{k}' is missing"))

    messages: dict[str, dict[str, str]] = {}
    locations: dict[str, dict[str, str]] = {}
    for d in by_kind["messages"]:
        loc = str(d.data.get("locale"))
        table = d.data.get("messages", {})
        for k, v in table.items():
            line, _ = pos(table, k)
            if k in messages.get(loc, {}):
                problems.append(
                    Problem(d.path, line, 1, str(k), f"message defined twice (first at {locations[loc][k]})")
                )
            messages.setdefault(loc, {})[str(k)] = str(v)
            locations.setdefault(loc, {})[str(k)] = f"{d.path}:{line}"

    stages = tuple(
        Stage(str(s["id"]), str(s["name"]), _steps(s.get("steps")), _steps(s.get("record")))
        for d in by_kind["benchmark_plan"]
        for s in d.data.get("stages", [])
    )
    sections = tuple(
        Section(str(s["id"]), str(s["name"]), _steps(s.get("items")))
        for d in by_kind["checklist"]
        for s in d.data.get("sections", [])
    )

    models, model_problems = model_entries(by_kind["models"])
    problems += model_problems
    accuracy, accuracy_problems = accuracy_table(by_kind["accuracy"])
    problems += accuracy_problems

    rules, rule_problems = compile_docs(docs, SCHEMA, ROUTE_KINDS)
    problems += rule_problems
    content_keys = (
        [(st.name, "benchmark_plan") for st in stages]
        + [(x.message, "benchmark_plan") for st in stages for x in (*st.steps, *st.record)]
        + [(sec.name, "checklist") for sec in sections]
        + [(x.message, "checklist") for sec in sections for x in sec.items]
    )
    problems += message_problems(
        rules, messages, locations, [(k, f"{_content_file(by_kind, w)}:1") for k, w in content_keys], SCHEMA
    )
    problems += format_spec_problems(messages, locations)
    problems += size_problems(rules, messages, locations, sum(len(f.data) for f in yaml_files), root.name)
    problems += logic_problems(rules, SCHEMA)
    problems += question_problems(rules, values)
    problems += lint_problems(rules, tuple(catalog))
    max_age = int(
        max_price_age_days if max_price_age_days is not None else values.get("max_price_age_days", 540)
    )
    problems += price_problems(tuple(catalog), today or date.today(), max_age)
    offers, offer_problems = _offers(files, root.name, {g.id for g in catalog}, today or date.today(),
                                     int(values.get("max_offer_age_days", max_age)))
    problems += offer_problems
    api_offers, api_problems = _api_offers(files, root.name, {m.id for m in models}, today or date.today(),
                                           int(values.get("max_offer_age_days", max_age)))
    problems += api_problems
    if any(p.severity == "error" for p in problems):
        return None, problems
    book = Rulebook(
        source_dir=str(root),
        content_hash=digest,
        revision=digest[:12],
        catalog=tuple(catalog),
        assumptions=Assumptions(values, sources),
        program=Program(tuple(rules)),
        messages=messages,
        message_locations=locations,
        benchmark_plan=stages,
        checklist=sections,
        models=registry_of(models),
        files=tuple(f"{root.name}/{f.rel}" for f in yaml_files),
        warnings=tuple(p for p in problems if p.severity != "error"),
        offers=offers,
        accuracy=accuracy,
        api_offers=api_offers,
    )
    return book, problems


def now() -> datetime:
    return datetime.now(UTC)
