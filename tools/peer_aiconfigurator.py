"""AIConfigurator's own estimate of every aggregated row of the AIConfigurator datasets in calibration/ and of every
published-serving.csv row with a measured TTFT or ITL, written to calibration/peer-aiconfigurator.csv for
`make accuracy` to set beside ours (docs/accuracy.md, "Beside AIConfigurator").

A dev tool, never a runtime dependency: `make peer-estimates` installs the PyPI package `aiconfigurator` into its
own virtual environment (.venv-peer) and runs this file there. Offline once installed (its performance database
ships in the wheel), deterministic; it imports nothing of the service, so it runs without the service's
dependencies.

Each row is asked the way AIConfigurator's own accuracy tracker asks its silicon rows (`cli_estimate` with the row's
backend, version, model_path, system, mode, isl/osl, gemm/moe quantisation, batch_size and parallel widths), with
two corrections. The product's harness applies the first too: InferenceX's 2026-04-06 export and 2026-04-27
database dump file a run of InferenceX tp T, ep E as T x E GPUs (calibration/README.md), so those rows are asked at
the T GPUs they ran on. And gpt-oss, filed nvfp4, is asked at its checkpoint's MXFP4 (`quant`). The measured engine
version when AIConfigurator's database has it, else its default for that system and engine; the file records
which. A published-serving.csv row is put in the same schema (`as_aiconfigurator`): its model, GPU and engine by
AIConfigurator's names, its sessions as batch_size, its GPUs tensor parallel. A row it cannot estimate, or whose
model, GPU or engine it has no name for, is written with why.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import logging
import re
import sys
from importlib import metadata
from pathlib import Path

DATA = Path("calibration")
OUT = "peer-aiconfigurator.csv"
# dataset id (service/accuracy/datasets.py DATASETS) -> file in calibration/
DATASETS = {"aiconfigurator": "aiconfigurator-silicon_refs.csv",
            "aiconfigurator-sample": "aiconfigurator-silicon_sample-fp4.csv",
            "published-serving": "published-serving.csv"}
# published-serving.csv names a model, GPU and engine as a brief does; AIConfigurator's names for them. A registry
# model missing here has no config AIConfigurator ships (its model_configs/); Llama 3.3 70B is Llama 3.1 70B's shape.
MODELS = {"llama-3.1-8b-instruct": "meta-llama/Meta-Llama-3.1-8B", "llama-3.1-70b-instruct":
          "meta-llama/Meta-Llama-3.1-70B", "llama-3.3-70b-instruct": "meta-llama/Meta-Llama-3.1-70B",
          "mixtral-8x7b-instruct": "mistralai/Mixtral-8x7B-v0.1", "qwen3-8b": "Qwen/Qwen3-8B",
          "minimax-m2.5": "MiniMaxAI/MiniMax-M2.5", "deepseek-r1": "deepseek-ai/DeepSeek-R1",
          "gpt-oss-20b": "openai/gpt-oss-20b", "gpt-oss-120b": "openai/gpt-oss-120b"}
SYSTEMS = {"h100-sxm": "h100_sxm", "h200": "h200_sxm", "b200": "b200_sxm", "b300": "b300_sxm", "gb200": "gb200",
           "a100-80gb": "a100_sxm", "l4": "l4", "l40s": "l40s"}
ENGINES = {"vllm": "vllm", "sglang": "sglang", "tensorrt-llm": "trtllm"}
QUANT = {"BF16": "", "FP8": "fp8", "FP4": "nvfp4"}
COLUMNS = ("row", "dataset", "aiconfigurator", "backend", "measured_version", "version_used", "quant", "tp", "pp",
           "attention_dp", "moe_tp", "moe_ep", "ttft_ms", "tpot_ms", "why")
# InferenceX's exports whose parallel columns count GPUs as tp x ep (service/accuracy/datasets.py GPUS_AS_TP_X_EP)
TP_X_EP = ("source_file=2026-04-06.csv", "db-dump/2026-04-27")
WHY_CHARS = 160


def _int(text: str | None) -> int:
    return int(float(text)) if text not in (None, "") else 0


def parallel(r: dict[str, str]) -> dict[str, int]:
    """tp_size, pp_size, attention_dp_size (blank = 1), moe_tp_size, moe_ep_size (0 = not given) to ask at."""
    tp, pp, adp = (max(1, _int(r[k])) for k in ("tp_size", "pp_size", "attention_dp_size"))
    mtp, mep = _int(r["moe_tp_size"]), _int(r["moe_ep_size"])
    if r["silicon_data_source"].split(";")[0].strip() in TP_X_EP:
        if r["backend"] == "vllm":
            # attention_dp_size holds InferenceX's ep, moe_ep_size tp x ep; the run was tp T on T GPUs
            if adp > 1:
                mtp, mep, adp = max(1, tp // adp), adp, 1
        else:
            # moe_tp_size holds InferenceX's tp (the GPUs), moe_ep_size its ep
            gpus, ep = max(1, mtp or tp), max(1, mep)
            mtp, mep = max(1, gpus // ep), ep
            tp, adp = (1, gpus) if adp > 1 else (gpus, 1)
    return {"tp_size": tp, "pp_size": pp, "attention_dp_size": adp, "moe_tp_size": mtp, "moe_ep_size": mep}


def quant(r: dict[str, str]) -> tuple[str, str]:
    """(GEMM, MoE) quantisation to ask at; "" = the checkpoint's, which AIConfigurator reads from its config.
    gpt-oss ships its experts in MXFP4 only: InferenceX files its runs as fp4, AIConfigurator's rows as nvfp4, for
    which its database has no gpt-oss data; so gpt-oss is asked at its checkpoint's own quantisation."""
    if r["model_path"].startswith("openai/gpt-oss"):
        return "", ""
    return r["gemm_quant_mode"], r["moe_quant_mode"]


def estimate(r: dict[str, str], widths: dict[str, int]) -> tuple[float, float, str]:
    """(TTFT ms, TPOT ms, engine version used) by AIConfigurator, at the measured version when it has it."""
    from aiconfigurator.cli.api import cli_estimate  # only in the peer environment

    gemm, moe = quant(r)
    args = dict(model_path=r["model_path"], system_name=r["system"], mode="agg", backend_name=r["backend"],
                isl=_int(r["isl"]), osl=_int(r["osl"]), batch_size=_int(r["batch_size"]),
                gemm_quant_mode=gemm or None, moe_quant_mode=moe or None, **{k: v for k, v in widths.items() if v})
    for version in dict.fromkeys((r["backend_version"] or None, None)):
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                got = cli_estimate(backend_version=version, **args)
            return got.ttft, got.tpot, got.backend_version
        except ValueError as e:
            # a version its database does not hold: ask its default for this system and engine instead
            if version is None or "version" not in str(e):
                raise
    raise AssertionError("unreachable")


def _sig(x: float) -> str:
    return f"{x:.4g}"


def as_aiconfigurator(r: dict[str, str]) -> tuple[dict[str, str], str]:
    """A published-serving.csv row in AIConfigurator's schema, or why it has none: a closed loop of `sessions`
    (batch_size for a one-batch run) on `gpus` GPUs, tensor parallel (the experts too, as vLLM, SGLang and
    TensorRT-LLM run them unless told otherwise), at the GEMM precision, the engine version AIConfigurator's
    database holds; no engine settings."""
    model, system = MODELS.get(r["model"]), SYSTEMS.get(r["gpu"])
    engine = ENGINES.get(r["toolchain"].split()[0] if r["toolchain"] else "")
    sessions = _int(r["sessions"]) or _int(r["batch_size"])
    why = ("" if model else f"model {r['model'] or 'given by shape'} has no AIConfigurator config") or (
        "" if system else f"GPU {r['gpu']} is not an AIConfigurator system") or (
        "" if engine else f"engine {r['toolchain'] or 'not named'} is not an AIConfigurator backend") or (
        "" if sessions else "no closed-loop concurrency (a request rate)")
    if why:
        return {}, why
    gpus, adp = max(1, _int(r["gpus"])), max(1, _int(r["attention_dp"]))
    q = QUANT.get(r["precision"] or "BF16", "")
    return {"id": r["id"], "model_path": model, "system": system, "backend": engine, "backend_version": "",
            "mode": "agg", "isl": r["input_tokens"], "osl": r["output_tokens"], "batch_size": str(sessions),
            "gemm_quant_mode": q, "moe_quant_mode": q, "silicon_data_source": "", "tp_size": str(gpus // adp),
            "pp_size": "1", "attention_dp_size": str(adp), "moe_tp_size": str(gpus), "moe_ep_size": "1"}, ""


def _source(folder: Path, dataset: str) -> list[tuple[str, dict[str, str], str]]:
    """(row id, the row in AIConfigurator's schema or {}, why not) for each row of `dataset` to ask: every
    aggregated row of AIConfigurator's files; every row of published-serving.csv with a measured TTFT or ITL."""
    with (folder / DATASETS[dataset]).open(newline="", encoding="utf-8") as f:
        got = list(csv.DictReader(f))
    if dataset != "published-serving":
        return [(r["id"], r, "") for r in got if r["mode"] == "agg"]
    return [(r["id"], *as_aiconfigurator(r)) for r in got if r["ttft_ms"] or r["itl_ms"]]


def rows(folder: Path, datasets: tuple[str, ...] = tuple(DATASETS)) -> list[dict[str, str]]:
    out = []
    version = metadata.version("aiconfigurator")
    for dataset in datasets:
        for rid, r, why in _source(folder, dataset):
            if why:
                out.append({**dict.fromkeys(COLUMNS, ""), "row": rid, "dataset": dataset, "aiconfigurator": version,
                            "why": why})
                continue
            widths = parallel(r)
            row = {"row": r["id"], "dataset": dataset, "aiconfigurator": version, "backend": r["backend"],
                   "measured_version": r["backend_version"], "version_used": "", "quant": quant(r)[0],
                   "tp": widths["tp_size"],
                   "pp": widths["pp_size"], "attention_dp": widths["attention_dp_size"],
                   "moe_tp": widths["moe_tp_size"], "moe_ep": widths["moe_ep_size"],
                   "ttft_ms": "", "tpot_ms": "", "why": ""}
            try:
                ttft, tpot, used = estimate(r, widths)
                row.update(ttft_ms=_sig(ttft), tpot_ms=_sig(tpot), version_used=used)
            except Exception as e:  # noqa: BLE001 - every failure is a row's answer, recorded with why
                # one line, files named without this machine's folders
                text = re.sub(r"/\S*/([^/\s]+)", r"\1", " ".join(str(e).split()))
                row["why"] = f"{type(e).__name__}: {text}"[:WHY_CHARS]
            print(f"{r['id']}: {row['ttft_ms'] or row['why']}", file=sys.stderr)
            out.append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DATA, help="the measured datasets (default: calibration)")
    ap.add_argument("--out", type=Path, default=None, help=f"output file (default: <data>/{OUT})")
    ap.add_argument("--datasets", nargs="+", choices=tuple(DATASETS), default=tuple(DATASETS),
                    help="only these datasets (default: all, in this order)")
    args = ap.parse_args(argv)
    logging.disable(logging.WARNING)  # its per-query notes would bury the per-row lines
    got = rows(args.data, tuple(d for d in DATASETS if d in args.datasets))
    out = args.out or args.data / OUT
    with out.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(got)
    done = sum(1 for r in got if r["ttft_ms"])
    print(f"wrote {out}: {done} of {len(got)} aggregated rows estimated", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
