"""Check built manifests offline: every document strictly against the Kubernetes schemas that kubernetes-validate
bundles, for each version asked; a ServiceMonitor (a Prometheus Operator CRD, in no Kubernetes schema) against
deploy/servicemonitor.schema.json, the subset of the CRD's schema this kit uses, as strictly.

    python deploy/check_k8s.py -k 1.30.0 -k latest build/k8s/*.yaml

A kind that neither knows is an error, not a warning (kubernetes-validate alone only warns).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

SERVICEMONITOR_SCHEMA = Path(__file__).resolve().parent / "servicemonitor.schema.json"
CRDS = {("monitoring.coreos.com/v1", "ServiceMonitor"): SERVICEMONITOR_SCHEMA}


def problems(doc: dict[str, Any], versions: list[str]) -> list[str]:
    """What is wrong with one document, for each version; empty when it validates."""
    kind, api = doc.get("kind"), doc.get("apiVersion")
    name = f"{kind} {doc.get('metadata', {}).get('name', '?')}"
    crd = CRDS.get((api, kind))
    if crd is not None:
        schema = json.loads(crd.read_text(encoding="utf-8"))
        return [f"{name}: {e.json_path}: {e.message}" for e in jsonschema.Draft202012Validator(schema).iter_errors(doc)]
    found = []
    for version in versions:
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.SchemaNotFoundError:
            found.append(f"{name}: no schema for {api} {kind} in Kubernetes {version}")
        except kubernetes_validate.ValidationError as err:
            found.append(f"{name} (Kubernetes {version}): {'/'.join(map(str, err.path))}: {err.message}")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-k", "--kubernetes-version", action="append", dest="versions", required=True,
                        help="a version to validate against (repeat; `latest`: the newest bundled)")
    parser.add_argument("files", nargs="+", type=Path)
    args = parser.parse_args(argv)
    versions = [kubernetes_validate.latest_version() if v == "latest" else v for v in args.versions]
    failed = 0
    for path in args.files:
        docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]
        if not docs:
            print(f"{path}: no documents", file=sys.stderr)
            failed += 1
        for doc in docs:
            for problem in problems(doc, versions):
                print(f"{path}: {problem}", file=sys.stderr)
                failed += 1
        print(f"{path}: {len(docs)} documents, Kubernetes {', '.join(versions)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
