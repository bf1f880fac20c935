"""`gpu-advisor models`: the model registry as a table (ListModels), and `gpu-advisor models import config.json`,
which turns a Hugging Face config.json on disk into a registry entry (no server, no network)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from datetime import date
from pathlib import Path
from typing import Any, TextIO

from google.protobuf.json_format import MessageToJson

from ..rulebook.atomic import write_atomically
from ..rulebook.model_import import entry_from_config, entry_yaml, slug
from ..wire.api import enum_number, pb
from .table import print_table

EXIT_OK, EXIT_INPUT = 0, 2
HEADER = ["id", "name", "kind", "params B", "active B", "layers", "KV heads x dim", "window", "experts", "precision",
          "source"]


def _n(v: float) -> str:
    return f"{v:g}" if v else "-"


def model_rows(models: Sequence[Any]) -> list[list[str]]:
    """The header and one row per ModelInfo: what the CLI table and the MCP tool's markdown show."""
    rows = [HEADER]
    for m in models:
        if m.kv_lora_rank:
            kv = f"MLA {m.kv_lora_rank}+{m.rope_head_dim}"
        else:
            kv = f"{m.kv_heads} x {m.head_dim}" if m.kv_heads and m.head_dim else "-"
        window = (f"{m.sliding_window_tokens:,} on {m.sliding_window_layers or m.layers}/{m.layers}"
                  if m.sliding_window_tokens else "-")
        rows.append([
            m.id, m.name, pb.ModelKind.Name(m.kind).removeprefix("MODEL_KIND_").lower() if m.kind else "-",
            _n(m.params_billion), _n(m.active_params_billion), _n(m.layers), kv, window,
            f"{m.experts_per_token} of {m.experts}" if m.experts else "-", m.native_precision or "-", m.source,
        ])
    return rows


def print_models(resp: pb.ListModelsResponse, out: TextIO | None = None) -> None:
    out = out or sys.stdout  # looked up per call, so redirection is honoured
    rows = model_rows(resp.models)
    if len(rows) == 1:
        print("no model matches", file=out)
        return
    print_table(rows, {3, 4, 5}, out)
    if resp.HasField("ruleset"):
        print(f"\n{len(resp.models)} models, rules {resp.ruleset.revision}", file=out)


def _default_id(config: dict[str, Any], path: Path) -> str:
    named = str(config.get("_name_or_path", "") or "")
    if named:
        return slug(named)
    if path.name == "config.json" and path.parent.name:
        return slug(path.parent.name)
    return slug(path.name.removesuffix(".json").removesuffix(".config"))


def import_config(args: argparse.Namespace) -> int:
    path = Path(args.config)
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        print(f"error: cannot read {path}: {exc}", file=sys.stderr)
        return EXIT_INPUT
    if not isinstance(config, dict):
        print(f"error: {path} is not a config.json object", file=sys.stderr)
        return EXIT_INPUT
    entry = entry_from_config(config, args.id or _default_id(config, path), args.params_billion or 0.0,
                              args.source or "", date.today().isoformat())
    text = entry_yaml(entry)
    if args.out:
        write_atomically(args.out, text)  # a watched rules folder never sees it half-written
        print(f"wrote {args.out} (check it, add aliases and the source URL, then `make rules-check`)",
              file=sys.stderr)
    else:
        sys.stdout.write(text)
    return EXIT_OK


def add_parser(sub: Any, common: argparse.ArgumentParser, stub: Callable[[argparse.Namespace], Any]) -> None:  # noqa: ANN401
    """`models` (the table, from a server) and `models import` (local) under the CLI's subcommands."""
    models = sub.add_parser("models", parents=[common], help="list the model registry (names model.name takes)")
    models.add_argument("--kind", choices=("llm", "embedding", "speech", "image"), help="only this kind")
    models.add_argument("--query", default="", help="only ids, names or aliases containing this")
    models.set_defaults(run=lambda a: _list(a, stub))
    inner = models.add_subparsers(dest="models_command")
    imp = inner.add_parser("import", help="turn a Hugging Face config.json on disk into a registry entry (YAML)")
    imp.add_argument("config", help="path to config.json (read from disk; nothing is downloaded)")
    imp.add_argument("--id", help="registry id (default: from _name_or_path or the folder name)")
    imp.add_argument("--out", help="write the entry here (default: stdout)")
    imp.add_argument("--params-billion", type=float, help="total parameters, when not computed from the shapes")
    imp.add_argument("--source", help="where config.json came from (its hub URL)")
    imp.set_defaults(run=import_config)


def _list(args: argparse.Namespace, stub: Callable[[argparse.Namespace], Any]) -> int:
    channel, client = stub(args)
    request = pb.ListModelsRequest(kind=enum_number("ModelKind", args.kind.upper()) if args.kind else 0,
                                   query=args.query)
    with channel:
        resp = client.ListModels(request, timeout=args.timeout)
    if args.json:
        print(MessageToJson(resp, preserving_proto_field_name=True, ensure_ascii=False))
    else:
        print_models(resp)
    return EXIT_OK

