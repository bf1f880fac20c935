"""The measured datasets in calibration/, read into briefs the product can answer, each with what was measured.

- aiconfigurator-silicon_refs.csv: AIConfigurator's measured ("silicon") serving points, copied verbatim
  (Apache-2.0; calibration/README.md). A row the API cannot express (a disaggregated prefill/decode split, a
  GPU or a model the rules do not have) is kept with why: that list is the harness's to-do.
- aiconfigurator-silicon_sample-fp4.csv (issue 36, seventh pass): the FP4 rows of AIConfigurator's full measurement
  file that the selection rule of calibration/README.md takes, copied verbatim (Apache-2.0), read the same way.
- inferencex-deployments.csv (issue 36, ninth pass): per InferenceX campaign, the engine settings its launch script
  ran with (KV cache dtype, tokens per step, memory share, running-request cap, speculative decoding), each with the
  InferenceX commit and script it was read from; applied to every row of the campaign (`Deployment`); and (twelfth
  pass) its benchmark client: requests per session, warm-up, and the length spread, whose mean lengths size the rows.
- published.csv: published tables the tests already cite, one row per measurement with its source.
- published-serving.csv (issue 36): published serving measurements found for calibration, each with its source
  URL and the deployment as measured; `group` names the source its rows move with in source-held-out folds.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..domain.brief import PRECISIONS as BRIEF_PRECISIONS
from ..domain.brief import Brief, Media, Model, Traffic, Training

AICONFIGURATOR = "aiconfigurator-silicon_refs.csv"
AICONFIGURATOR_SAMPLE = "aiconfigurator-silicon_sample-fp4.csv"
INFERENCEX_DEPLOYMENTS = "inferencex-deployments.csv"
PUBLISHED = "published.csv"
PUBLISHED_SERVING = "published-serving.csv"
DATA = Path("calibration")  # the measured datasets, beside rules/ (calibration/README.md)
DATASETS = {
    "aiconfigurator": (AICONFIGURATOR, "ai-dynamo/aiconfigurator tools/accuracy_tracking/silicon_refs.csv "
                                       "(commit 68fc4519)", "Apache-2.0"),
    "aiconfigurator-sample": (AICONFIGURATOR_SAMPLE, "ai-dynamo/aiconfigurator aic-core/src/aiconfigurator_core/"
                              "systems/silicon_sample.csv (snapshot 095f58a5): its FP4 rows by the selection rule of "
                              "calibration/README.md", "Apache-2.0"),
    "published": (PUBLISHED, "published tables cited by tests/ (source per row)", "facts cited per row"),
    # issue 41: read by service/accuracy/training.py, not here
    "training": ("training.csv", "published training and fine-tuning runs (source per row: calibration/README.md)",
                 "facts cited per row"),
    "published-serving": (PUBLISHED_SERVING, "published serving measurements (engine docs, vendor and engine "
                          "benchmarks, blogs; source URL per row)", "facts cited per row"),
}
# AIConfigurator's system names → catalog ids; a system missing here is not in the catalog.
SYSTEMS = {"h100_sxm": "h100-sxm", "h200_sxm": "h200", "b200_sxm": "b200", "b300_sxm": "b300", "gb200": "gb200",
           "gb300": "gb300"}
# Its quantisation → the API's precision (the GEMM's; "" = the checkpoint's BF16).
PRECISIONS = {"fp8": "FP8", "fp8_block": "FP8", "nvfp4": "FP4", "": "BF16"}
# Its backend names → the toolchain names a brief uses for the serving engine.
ENGINES = {"trtllm": "tensorrt-llm", "vllm": "vllm", "sglang": "sglang"}
# InferenceX's exports in AIConfigurator's files (silicon_data_source's first field). The 2026-04-06 export and the
# 2026-04-27 database dump file a run of InferenceX `tp` T, `ep` E with the GPUs counted as T x E: tp_size T x E and
# moe_tp_size T (SGLang, TensorRT-LLM), attention_dp_size T x E (TensorRT-LLM with attention DP), attention_dp_size E
# and moe_ep_size T x E (vLLM); the same measured figures sit in the 2026-03-25 export as tp_size T (or
# attention_dp_size T), and InferenceX's configurations of those dates run T GPUs (calibration/README.md).
INFERENCEX_EXPORTS = ("source_file=2026-03-25.csv", "source_file=2026-04-06.csv", "db-dump/2026-04-27")
GPUS_AS_TP_X_EP = INFERENCEX_EXPORTS[1:]
SUCCESS_UNITS = {"BATCH_INFERENCE": "TOKEN", "PRETRAINING": "TRAINING_RUN", "MEDIA_GENERATION": "IMAGE"}


@dataclass(frozen=True)
class Deployment:
    """Engine settings a measurement ran with that the brief does not carry (inferencex-deployments.csv); 0 / "" =
    the engine's default as the product assumes it."""

    token_budget: int = 0  # most tokens one engine step runs (vLLM max-num-batched-tokens, SGLang
    # chunked-prefill-size, TensorRT-LLM max_num_tokens)
    memory_fraction: float = 0.0  # share of each GPU's memory the engine takes (vLLM gpu-memory-utilization: weights,
    # KV cache and activations; SGLang mem-fraction-static: weights and KV cache)
    max_running: int = 0  # most requests the engine runs at once (max-num-seqs, max-running-requests, max_batch_size)
    speculative: str = ""  # "mtp" = speculative decoding (multi-token prediction / EAGLE) as measured
    recv_interval: int = 0  # decode steps between the scheduler's polls for new requests (SGLang
    # --scheduler-recv-interval; 0 = the engine's default)
    cited: str = ""  # the InferenceX commit and script the settings were read from


@dataclass(frozen=True)
class Row:
    """One measured configuration: the brief that describes it, the GPU and GPUs per model copy it ran on (0 =
    the product's own count, for training), and the measured figures by estimate key."""

    id: str
    dataset: str
    brief: Brief
    gpu: str
    gpus: int
    measured: dict[str, float] = field(default_factory=dict)
    source: str = ""
    arrivals: str = ""  # how the measuring client sent its prompts (ARRIVALS); "" = as the product assumes
    group: str = ""  # the source the row moves with in source-held-out folds ("" = its own id)
    attention_dp: int = 1  # attention data-parallel width as measured (1 = attention tensor parallel over the GPUs)
    pipeline: int = 1  # pipeline stages as measured
    # why a stated rule keeps the row out of the comparison (harness.unexpressed); "" = compared
    unexpressed: str = ""
    deployment: Deployment = Deployment()  # engine settings as measured beyond the brief (default: the engine's)
    class_input_tokens: int = 0  # the nominal prompt length its class is read at (0 = the brief's; twelfth pass)


# How a measurement's client sent the prompts, as the share of the other sessions' prefill a prompt waits for
# (decide/sizing serving_speed's `synchrony`): "spread" = each on its own, "together" = every session's at once.
# A row says it only with evidence (published.csv `arrivals`, calibration/README.md).
ARRIVALS = {"spread": 0.0, "together": 1.0}


@dataclass(frozen=True)
class Skipped:
    id: str
    dataset: str
    why: str


def _num(text: str | None) -> float:
    return float(text) if text not in (None, "") else 0.0


def _int(text: str | None) -> int:
    return int(float(text)) if text not in (None, "") else 0


def read_aiconfigurator(path: Path, models: set[str], catalog: set[str], dataset: str = "aiconfigurator",
                        deployments: dict[tuple[str, str], dict[str, str]] | None = None,
                        ) -> tuple[list[Row], list[Skipped]]:
    """`models`: names the registry resolves (ids and aliases, lower case); `catalog`: GPU ids; `deployments`: the
    engine settings of InferenceX's campaigns by (group, gemm_quant_mode) (read_deployments)."""
    rows: list[Row] = []
    skipped: list[Skipped] = []
    with path.open(newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            rid = r["id"]

            def skip(why: str, rid: str = rid) -> None:
                skipped.append(Skipped(rid, dataset, why))

            gpu = SYSTEMS.get(r["system"], "")
            model = _model_name(r["model_path"], models)
            if r["mode"] != "agg":
                skip("disaggregated prefill/decode workers: the API sizes one aggregated copy")
            elif gpu not in catalog:
                skip(f"GPU {r['system']} is not in the catalog")
            elif not model:
                skip(f"model {r['model_path']} is not in the registry (gpu-advisor models import)")
            else:
                isl, osl = _int(r["isl"]), _int(r["osl"])
                concurrency = _concurrency(r)
                precision = PRECISIONS.get(r["gemm_quant_mode"], "BF16")
                group = _aic_group(r)
                settings = (deployments or {}).get((group, r["gemm_quant_mode"]), {})
                brief = Brief(
                    workload="REALTIME_INFERENCE",
                    model=Model(name=model, precision=precision, context_tokens=isl + osl,
                                kv_cache_precision=settings.get("kv_cache_precision") or "UNSPECIFIED"),
                    # the client's drawn lengths' mean (the script's nominal ISL sets the token budget)
                    traffic=Traffic(concurrent_sessions=concurrency, avg_input_tokens=mean_length(isl, settings),
                                    avg_output_tokens=mean_length(osl, settings)),
                    toolchain=(ENGINES.get(r["backend"], r["backend"]),),  # the engine it was measured on
                )
                gpus, attention_dp, pipeline = _deployment(r)
                rows.append(Row(rid, dataset, brief, gpu, gpus,
                                {"itl": _num(r["silicon_tpot_ms"]), "ttft": _num(r["silicon_ttft_ms"])},
                                f"{r['backend']} {r['backend_version']}".strip(), group=group,
                                attention_dp=attention_dp, pipeline=pipeline,
                                deployment=_settings(settings, isl, concurrency), class_input_tokens=isl))
    return rows, skipped


DEPLOYMENT_COLUMNS = ("group", "quant", "config_key", "commit", "script", "kv_cache_dtype", "kv_cache_precision",
                      "token_budget", "memory_fraction", "memory_fraction_of", "max_running", "speculative",
                      "scheduler_recv_interval", "num_prompts", "max_concurrency", "request_rate", "warmups",
                      "random_range_ratio", "client", "note")
_PER_CONC = re.compile(r"^(>=)?(\d+)xCONC$")


def read_deployments(path: Path) -> dict[tuple[str, str], dict[str, str]]:
    """inferencex-deployments.csv by (campaign group, gemm_quant_mode); each value checked as it is read."""
    out: dict[tuple[str, str], dict[str, str]] = {}
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        if tuple(reader.fieldnames or ()) != DEPLOYMENT_COLUMNS:
            raise ValueError(f"{path.name}: columns {reader.fieldnames} are not {DEPLOYMENT_COLUMNS}")
        for r in reader:
            where = f"{path.name} {r['group']}"
            if r["kv_cache_precision"] and r["kv_cache_precision"] not in BRIEF_PRECISIONS:
                raise ValueError(f"{where}: kv_cache_precision {r['kv_cache_precision']!r} is not one of "
                                 f"{BRIEF_PRECISIONS}")
            if r["memory_fraction_of"] not in ("", "gpu", "free") or bool(r["memory_fraction"]) != bool(
                    r["memory_fraction_of"]):
                raise ValueError(f"{where}: memory_fraction_of {r['memory_fraction_of']!r} must be gpu or free, "
                                 "given with memory_fraction")
            if r["speculative"] not in ("", "mtp", "unknown"):
                raise ValueError(f"{where}: speculative {r['speculative']!r} is not mtp or unknown")
            _budget(r["token_budget"], 1024, 1)  # raises on a form it does not know
            _recv_interval(r["scheduler_recv_interval"], 1)  # so does this
            _client(r, where)
            if (r["group"], r["quant"]) in out:
                raise ValueError(f"{where}: listed twice")
            out[(r["group"], r["quant"])] = r
    return out


def _client(r: dict[str, str], where: str) -> None:
    """The benchmark client's invocation as run (twelfth pass): all blank (not read) or every field in its form."""
    fields = ("num_prompts", "max_concurrency", "request_rate", "warmups", "random_range_ratio", "client")
    if not any(r[f] for f in fields):
        return
    ratio = _num(r["random_range_ratio"]) if r["random_range_ratio"] else -1.0
    if (not _PER_CONC.match(r["num_prompts"]) or r["max_concurrency"] != "CONC" or r["request_rate"] != "inf"
            or not (r["warmups"] == "none" or _PER_CONC.match(r["warmups"])) or not 0 < ratio <= 1
            or not r["client"]):
        raise ValueError(f"{where}: the client's invocation must give num_prompts NxCONC, max_concurrency CONC, "
                         "request_rate inf, warmups none or NxCONC, random_range_ratio in (0, 1] and where it was read")


def mean_length(nominal: int, r: dict[str, str]) -> int:
    """The mean of the lengths InferenceX's client drew (utils/bench_serving/benchmark_serving.py sample_uniform:
    uniform over [int(L x random_range_ratio), L], the nominal L the script passes); L when not read."""
    if not r.get("random_range_ratio"):
        return nominal
    low = int(nominal * float(r["random_range_ratio"]))
    return (low + nominal + 1) // 2


_BUDGET = re.compile(r"^(?:(\d+)|2xISL|CONC\+ISL(?:>=(\d+))?)$")


def _budget(text: str, isl: int, concurrency: int) -> int:
    """Tokens per step of a token_budget cell at a row's prompt length and concurrency: `N`; `2xISL` (InferenceX's
    vLLM scripts: --max-num-batched-tokens ISL*2); `CONC+ISL` (its TensorRT-LLM scripts: --max_num_tokens
    (CONC+ISL+64+63)/64*64), optionally `>=N` at least N; blank = the engine's default (0)."""
    if not text:
        return 0
    found = _BUDGET.match(text)
    if not found:
        raise ValueError(f"token_budget {text!r} is not N, 2xISL or CONC+ISL[>=N]")
    if found.group(1):
        return int(found.group(1))
    if text == "2xISL":
        return 2 * isl
    return max(int(found.group(2) or 0), (concurrency + isl + 64 + 63) // 64 * 64)


_RECV = re.compile(r"^(\d+)(?:,CONC>=(\d+):(\d+))?$")


def _recv_interval(text: str, concurrency: int) -> int:
    """Decode steps between SGLang's polls for new requests at a row's concurrency: `N`, or `N,CONC>=C:M` (InferenceX's
    SGLang scripts: --scheduler-recv-interval 10, 30 at 16 or more concurrent requests); blank = the engine's
    default (0)."""
    if not text:
        return 0
    found = _RECV.match(text)
    if not found or int(found.group(1)) < 1 or (found.group(3) is not None and int(found.group(3)) < 1):
        raise ValueError(f"scheduler_recv_interval {text!r} is not N or N,CONC>=C:M")
    if found.group(2) is not None and concurrency >= int(found.group(2)):
        return int(found.group(3))
    return int(found.group(1))


def _settings(r: dict[str, str], isl: int, concurrency: int) -> Deployment:
    """The settings the product can apply to one row: tokens per step, a memory share of the whole GPU (a share of
    the memory left after the weights, TensorRT-LLM's free_gpu_memory_fraction, is recorded and not applied), a cap
    on running requests, speculative decoding, the scheduler's poll interval."""
    if not r:
        return Deployment()
    return Deployment(token_budget=_budget(r["token_budget"], isl, concurrency),
                      memory_fraction=_num(r["memory_fraction"]) if r["memory_fraction_of"] == "gpu" else 0.0,
                      max_running=_int(r["max_running"]), speculative=r["speculative"],
                      recv_interval=_recv_interval(r["scheduler_recv_interval"], concurrency),
                      cited=f"InferenceX {r['commit']} {r['script']}" if r["commit"] else "")


def _deployment(r: dict[str, str]) -> tuple[int, int, int]:
    """(GPUs per model copy, attention data-parallel width, pipeline stages) as the row's measurement ran them."""
    tp, adp, pp = max(1, _int(r["tp_size"])), max(1, _int(r["attention_dp_size"])), max(1, _int(r["pp_size"]))
    if r.get("silicon_data_source", "").split(";")[0].strip() in GPUS_AS_TP_X_EP:
        if r["backend"] == "vllm":
            # attention_dp_size is InferenceX's ep here; InferenceX's vLLM configurations of those dates run attention
            # data parallel only at 128+ concurrent requests (calibration/README.md)
            return tp * pp, 1, pp
        gpus = max(1, _int(r["moe_tp_size"]) or tp)
        return gpus * pp, gpus if adp > 1 else 1, pp
    return tp * adp * pp, adp, pp


def _aic_group(r: dict[str, str]) -> str:
    """The measurement campaign an AIConfigurator row comes from: for InferenceX's exports, one model, GPU and engine
    version measured on one day (one workflow run, whatever its deployments; the database dump names InferenceX's
    DeepSeek-R1 runs DeepSeek-V3); else its silicon_data_source file (one gap-analysis run)."""
    source = r.get("silicon_data_source", "")
    if source.split(";")[0].strip() in INFERENCEX_EXPORTS:
        day = re.search(r"measured=(\d{4}-\d{2}-\d{2})", source)
        model = r["model_path"].split("/")[-1].lower().replace("deepseek-v3", "deepseek-r1")
        return (f"inferencex:{model}:{r['system']}:{r['backend']} {r['backend_version']}:"
                f"{day.group(1) if day else r['id']}")
    found = re.search(r"source_file=([^;]+)", source)
    return "aiconfigurator:" + (found.group(1).strip() if found else r["id"])


def _model_name(path: str, models: set[str]) -> str:
    """The registry name of an HF id; a quantised checkpoint ("-FP8") is its base model at that precision."""
    for name in (path, re.sub(r"-(FP8|NVFP4)$", "", path)):
        if name.lower() in models:
            return name
    return ""


def _concurrency(r: dict[str, str]) -> int:
    found = re.search(r"silicon_concurrency=(\d+)", r.get("silicon_data_source", ""))
    return int(found.group(1)) if found else max(1, _int(r["batch_size"]))


MEASURED = (("itl_ms", "itl"), ("ttft_ms", "ttft"), ("tokens_per_s", "throughput"), ("gpu_hours", "gpu_hours"),
            ("images_per_s", "images"), ("memory_ceiling_gb", "memory"))


def read_published(path: Path, dataset: str = "published") -> list[Row]:
    """published.csv and published-serving.csv (the same columns; the latter adds source_url and group). A row's
    group is its `group`, else its source URL, else its source text up to the first comma (one table's rows)."""
    rows = []
    with path.open(newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            workload = r["workload"]
            model = Model(
                _num(r["params_billion"]), _num(r["active_params_billion"]), precision=r["precision"] or "BF16",
                context_tokens=_int(r["context_tokens"]), layers=_int(r["layers"]), kv_heads=_int(r["kv_heads"]),
                head_dim=_int(r["head_dim"]), hidden_size=_int(r["hidden_size"]), experts=_int(r["experts"]),
                experts_per_token=_int(r["experts_per_token"]),
                name=r.get("model") or "",  # a registry id, as a user would name it (the last, optional column)
                # the KV cache dtype the source states it ran with (published-serving.csv); blank = the engine default
                kv_cache_precision=(r.get("kv_cache_precision") or "").strip() or "UNSPECIFIED",
            )
            traffic = Traffic(concurrent_sessions=_int(r["sessions"]), batch_size=_int(r["batch_size"]),
                              avg_input_tokens=_int(r["input_tokens"]), avg_output_tokens=_int(r["output_tokens"]),
                              requests_per_second=_num(r["requests_per_second"]))
            training = Training(tokens_billion=_num(r["tokens_billion"]), target_days=_num(r["target_days"]),
                                global_batch_tokens=_int(r["global_batch_tokens"]))
            brief = Brief(workload=workload, model=model, traffic=traffic, training=training,
                          success_unit=SUCCESS_UNITS.get(workload, "UNSPECIFIED"), media=Media(),
                          toolchain=tuple(t for t in r["toolchain"].split() if t))
            measured = {key: _num(r[col]) for col, key in MEASURED if r[col]}
            arrivals = (r.get("arrivals") or "").strip()
            if arrivals and arrivals not in ARRIVALS:
                raise ValueError(f"{path.name} row {r['id']}: arrivals {arrivals!r} is not one of {sorted(ARRIVALS)}")
            kv = model.kv_cache_precision
            if kv != "UNSPECIFIED" and kv not in BRIEF_PRECISIONS:
                raise ValueError(f"{path.name} row {r['id']}: kv_cache_precision {kv!r} is not one of "
                                 f"{BRIEF_PRECISIONS}")
            group = (r.get("group") or r.get("source_url") or r["source"].split(",")[0]).strip()
            rows.append(Row(r["id"], dataset, brief, r["gpu"], _int(r["gpus"]), measured, r["source"], arrivals,
                            group, attention_dp=max(1, _int(r.get("attention_dp")))))
    return rows
