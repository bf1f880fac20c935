"""Render the Kubernetes manifests: deploy/k8s/*.yaml plus a ConfigMap holding a rules folder.

    python deploy/render_k8s.py [--rules rules] [--out build/k8s] [--image gpu-advisor:1.0.0]
    kubectl apply -f build/k8s/

A ConfigMap is flat (keys may not contain '/'), the rules folder is not (catalog/, messages/, schema/, tests/).
Each file becomes one key, its path with '/' spelled '__', and the Deployment's rules volume gets one `items`
entry per key mapping it back to its path. The kubelet then lays the folder out as it was, behind the
`..data` link it swaps on every ConfigMap update, which the server's watcher follows. So a rules edit is
`make k8s && kubectl apply -f build/k8s/rules-configmap.yaml` (reloaded in place within the kubelet's sync
period, about a minute); adding or removing a rules file changes the Deployment too, and rolls the pods.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.scalarstring import LiteralScalarString

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run as a script from anywhere: the rules file walk is the server's own

from service.rulebook.folder import rule_files  # noqa: E402

TEMPLATES = REPO / "deploy" / "k8s"
CONFIGMAP = "gpu-advisor-rules"
DEPLOYMENT = "gpu-advisor"
RULES_VOLUME = "rules"
SEPARATOR = "__"
MAX_CONFIGMAP_BYTES = 1024 * 1024  # the API server refuses a larger ConfigMap


class RenderError(Exception):
    pass


def _yaml() -> YAML:
    yaml = YAML()
    yaml.width = 4096  # keep long lines of rule text on one line
    yaml.indent(mapping=2, sequence=4, offset=2)
    return yaml


def key_for(relative: Path) -> str:
    key = SEPARATOR.join(relative.parts)
    if any(SEPARATOR in part for part in relative.parts):
        raise RenderError(f"{relative}: a name containing '{SEPARATOR}' cannot be told apart once flattened")
    if len(key) > 253 or not all(c.isalnum() or c in "-._" for c in key):
        raise RenderError(f"{relative}: not a valid ConfigMap key ({key!r}); use letters, digits, '-', '.', '_'")
    return key


def rules_configmap(rules_dir: Path) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """The ConfigMap of a rules folder and the volume items that put its keys back in place."""
    data: dict[str, Any] = {}
    items: list[dict[str, str]] = []
    size = 0
    for path in rule_files(rules_dir):
        relative = path.relative_to(rules_dir)
        key = key_for(relative)
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as err:
            raise RenderError(f"{relative}: rules files are text (UTF-8): {err}") from None
        # Literal blocks keep the files readable in `kubectl edit`; YAML cannot hold trailing spaces or tabs
        # that way, so such text is emitted quoted, which is the same content.
        data[key] = LiteralScalarString(text) if _literal_safe(text) else text
        items.append({"key": key, "path": relative.as_posix()})
        size += len(key) + len(text.encode())
    if not items:
        raise RenderError(f"{rules_dir}: no rules files")
    if size > MAX_CONFIGMAP_BYTES:
        raise RenderError(f"{rules_dir}: {size} bytes, over a ConfigMap's {MAX_CONFIGMAP_BYTES}")
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": CONFIGMAP, "labels": {"app.kubernetes.io/name": "gpu-advisor"}},
        "data": data,
    }
    return configmap, items


def _literal_safe(text: str) -> bool:
    lines = text.split("\n")
    return "\t" not in text and "\r" not in text and all(line == line.rstrip(" ") for line in lines)


def render(rules_dir: Path, image: str | None = None) -> dict[str, list[dict[str, Any]]]:
    """File name → its documents: every template, the Deployment completed, and rules-configmap.yaml."""
    yaml = _yaml()
    configmap, items = rules_configmap(rules_dir)
    out: dict[str, list[dict[str, Any]]] = {}
    found = False
    for template in sorted(TEMPLATES.glob("*.yaml")):
        docs = [d for d in yaml.load_all(template.read_text(encoding="utf-8")) if d is not None]
        for doc in docs:
            if doc.get("kind") == "Deployment" and doc["metadata"]["name"] == DEPLOYMENT:
                _fill(doc, items, image)
                found = True
        out[template.name] = docs
    if not found:
        raise RenderError(f"no Deployment named {DEPLOYMENT} under {TEMPLATES}")
    out["rules-configmap.yaml"] = [configmap]
    return out


def _fill(deployment: dict[str, Any], items: list[dict[str, str]], image: str | None) -> None:
    spec = deployment["spec"]["template"]["spec"]
    volumes = [v for v in spec.get("volumes", []) if v.get("name") == RULES_VOLUME]
    if len(volumes) != 1 or volumes[0].get("configMap", {}).get("name") != CONFIGMAP:
        raise RenderError(f"the Deployment needs one volume '{RULES_VOLUME}' from ConfigMap {CONFIGMAP}")
    volumes[0]["configMap"]["items"] = items
    if image:
        for container in spec["containers"]:
            if container["name"] == "server":
                container["image"] = image


def write(rendered: dict[str, list[dict[str, Any]]], out_dir: Path) -> list[Path]:
    yaml = _yaml()
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.glob("*.yaml"):
        stale.unlink()
    written = []
    for name, docs in rendered.items():
        path = out_dir / name
        with path.open("w", encoding="utf-8") as f:
            f.write("# Rendered by deploy/render_k8s.py; edit deploy/k8s/ or the rules folder, not this file.\n")
            yaml.dump_all(docs, f)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rules", default=str(REPO / "rules"), help="rules folder for the ConfigMap")
    parser.add_argument("--out", default=str(REPO / "build" / "k8s"), help="output folder (its *.yaml replaced)")
    parser.add_argument("--image", default=None, help="container image for the server (default: the template's)")
    args = parser.parse_args(argv)
    try:
        written = write(render(Path(args.rules), args.image), Path(args.out))
    except RenderError as err:
        print(f"render_k8s: {err}", file=sys.stderr)
        return 1
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
