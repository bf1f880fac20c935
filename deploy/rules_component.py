"""Write the Kustomize component that holds a rules folder as the server's ConfigMap: deploy/k8s/rules/.

    python deploy/rules_component.py [--rules rules] [--out deploy/k8s/rules]
    kubectl apply -k deploy/k8s/overlays/production      (`make k8s` runs this first, then builds each overlay)

A ConfigMap is flat (keys may not contain '/'), the rules folder is not (catalog/, messages/, schema/, tests/).
Each file becomes one key, its path with '/' spelled '__', through a `configMapGenerator`, and a patch gives
the Deployment's rules volume one `items` entry per key mapping it back to its path. The kubelet then lays the
folder out as it was, behind the `..data` link it swaps on every ConfigMap update, which the server's watcher
follows. The ConfigMap keeps its name (no hash suffix), so a rules edit is `make k8s` and an apply: reloaded
in place within the kubelet's sync period (about a minute); adding or removing a rules file changes the items
too, and rolls the pods.

Kustomize only reads files under a kustomization's own folder, and lists a generator's files one by one, so
the component carries a copy of the rules (files/) and the list: both written here, neither kept in git.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "deploy" / "k8s" / "rules"
CONFIGMAP = "gpu-advisor-rules"
DEPLOYMENT = "gpu-advisor"
RULES_VOLUME = "rules"
SEPARATOR = "__"
MAX_CONFIGMAP_BYTES = 1024 * 1024  # the API server refuses a larger ConfigMap
MARKER = "# Written by deploy/rules_component.py"


class RulesError(Exception):
    pass


def rules_files(rules_dir: Path) -> list[Path]:
    """Every regular file under the folder, hidden entries (and what is under them) skipped, as the server
    reads it (service/rulebook/files.py walks the same way), in path order."""
    found = []
    for folder, dirs, files in os.walk(rules_dir, followlinks=True):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found += [Path(folder) / f for f in files if not f.startswith(".") and (Path(folder) / f).is_file()]
    return sorted(found, key=lambda p: p.relative_to(rules_dir).parts)


def key_for(relative: Path) -> str:
    key = SEPARATOR.join(relative.parts)
    if any(SEPARATOR in part for part in relative.parts):
        raise RulesError(f"{relative}: a name containing '{SEPARATOR}' cannot be told apart once flattened")
    if len(key) > 253 or not all(c.isalnum() or c in "-._" for c in key):
        raise RulesError(f"{relative}: not a valid ConfigMap key ({key!r}); use letters, digits, '-', '.', '_'")
    return key


def component(rules_dir: Path) -> tuple[dict[str, Any], dict[str, Any], dict[str, Path]]:
    """The kustomization, the Deployment patch with the volume items, and key → source file."""
    sources: dict[str, Path] = {}
    items: list[dict[str, str]] = []
    size = 0
    for path in rules_files(rules_dir):
        relative = path.relative_to(rules_dir)
        key = key_for(relative)
        data = path.read_bytes()
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as err:
            raise RulesError(f"{relative}: rules files are text (UTF-8): {err}") from None
        sources[key] = path
        items.append({"key": key, "path": relative.as_posix()})
        size += len(key) + len(data)
    if not items:
        raise RulesError(f"{rules_dir}: no rules files")
    if size > MAX_CONFIGMAP_BYTES:
        raise RulesError(f"{rules_dir}: {size} bytes, over a ConfigMap's {MAX_CONFIGMAP_BYTES}")
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1alpha1",
        "kind": "Component",
        "configMapGenerator": [{
            "name": CONFIGMAP,
            "options": {"disableNameSuffixHash": True, "labels": {"app.kubernetes.io/name": "gpu-advisor"}},
            "files": [f"{i['key']}=files/{i['path']}" for i in items],
        }],
        "patches": [{"path": "rules-items.yaml"}],
    }
    patch = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": DEPLOYMENT},
        "spec": {"template": {"spec": {"volumes": [
            {"name": RULES_VOLUME, "configMap": {"name": CONFIGMAP, "items": items}},
        ]}}},
    }
    return kustomization, patch, sources


def write(rules_dir: Path, out: Path) -> None:
    kustomization, patch, sources = component(rules_dir)
    if out.exists():
        written_here = (out / "kustomization.yaml").is_file() and \
            (out / "kustomization.yaml").read_text(encoding="utf-8").startswith(MARKER)
        if not written_here and any(out.iterdir()):
            raise RulesError(f"{out}: not empty and not written by this script; refusing to replace it")
        shutil.rmtree(out)
    for source in sources.values():
        target = out / "files" / source.relative_to(rules_dir)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
    yaml = YAML()
    yaml.indent(mapping=2, sequence=4, offset=2)
    header = f"{MARKER} from {rules_dir}; `make k8s` rewrites it. Not in git.\n"
    with (out / "rules-items.yaml").open("w", encoding="utf-8") as f:
        f.write(header)
        yaml.dump(patch, f)
    with (out / "kustomization.yaml").open("w", encoding="utf-8") as f:
        f.write(header)
        yaml.dump(kustomization, f)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rules", default=str(REPO / "rules"), help="rules folder for the ConfigMap")
    parser.add_argument("--out", default=str(OUT), help="the component's folder (replaced)")
    args = parser.parse_args(argv)
    try:
        write(Path(args.rules), Path(args.out))
    except (RulesError, OSError) as err:
        print(f"rules_component: {err}", file=sys.stderr)
        return 1
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
