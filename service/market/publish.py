"""`python -m service.market.publish`: the deploy kit's offers CronJob (deploy/k8s/components/offers-refresh).

In Kubernetes the server's rules folder is the `gpu-advisor-rules` ConfigMap (deploy/rules_component.py: one key
per file, '/' spelled '__'). This job mounts that ConfigMap, lays its keys out as the folder again in a scratch
copy, runs `offers refresh` there (download, import, vet, diff: market/refresh.py), and writes the offer tables
that changed back into the ConfigMap with one merge patch. The kubelet then swaps every server pod's `..data`
link at once, which the server's watcher follows: the folder the server watches changes atomically, by the
ConfigMap's own mechanism. Only tables the ConfigMap already holds are written (a new provider's file needs a
new volume item: add it to rules/offers and redeploy); a refresh that updates nothing patches nothing.
"""

from __future__ import annotations

import argparse
import json
import ssl
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import TextIO

from .refresh import EXIT_NOTHING, FetchError, Options, check_url, refresh
from .refresh import add_arguments as add_refresh_arguments

SEPARATOR = "__"  # deploy/rules_component.py's spelling of '/' in a key
ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
API_SERVER = "https://kubernetes.default.svc"
MAX_CONFIGMAP_BYTES = 1024 * 1024


def unflatten(mount: Path, dest: Path) -> dict[str, str]:
    """The ConfigMap's keys as the rules folder under `dest`; key → text. Hidden entries (the kubelet's `..data`
    and timestamped folders) are skipped: the keys are the links beside them."""
    keys: dict[str, str] = {}
    for f in sorted(mount.iterdir()):
        if f.name.startswith(".") or not f.is_file():
            continue
        text = f.read_text(encoding="utf-8")
        target = dest.joinpath(*f.name.split(SEPARATOR))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        keys[f.name] = text
    return keys


def changed_tables(work: Path, keys: dict[str, str]) -> dict[str, str]:
    """Offer tables whose text differs from the ConfigMap's, among the keys it already has."""
    out = {}
    for path in sorted((work / "offers").glob("*.csv")):
        key = SEPARATOR.join(("offers", path.name))
        text = path.read_text(encoding="utf-8")
        if key in keys and keys[key] != text:
            out[key] = text
    return out


def patch_configmap(api: str, namespace: str, name: str, data: dict[str, str], token: str,
                    ca_file: Path | None, timeout: float = 30.0) -> None:
    """One JSON merge patch of the ConfigMap's data: every changed table lands in the same update."""
    url = f"{api.rstrip('/')}/api/v1/namespaces/{namespace}/configmaps/{name}"
    check_url(url)
    body = json.dumps({"data": data}).encode("utf-8")
    req = urllib.request.Request(url, data=body, method="PATCH", headers={
        "Content-Type": "application/merge-patch+json", "Authorization": f"Bearer {token}",
        "User-Agent": "gpu-advisor offers publish"})
    context = ssl.create_default_context(cafile=str(ca_file)) if ca_file and ca_file.exists() else None
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=context) as resp:  # noqa: S310 - checked
            resp.read()
    except urllib.error.HTTPError as exc:
        raise FetchError(f"{url}: HTTP {exc.code} {exc.reason}: {exc.read()[:300]!r}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise FetchError(f"{url}: {getattr(exc, 'reason', exc)}") from None


def publish(mount: Path, opts: Options, configmap: str, namespace: str, api: str, token: str,
            ca_file: Path | None, out: TextIO) -> int:
    with tempfile.TemporaryDirectory(prefix="offers-publish-") as tmp:
        work = Path(tmp) / "rules"
        keys = unflatten(mount, work)
        code = refresh(work, opts, out)
        if code == EXIT_NOTHING:
            return code
        data = changed_tables(work, keys)
        new = sorted(p.name for p in (work / "offers").glob("*.csv") if f"offers{SEPARATOR}{p.name}" not in keys)
        if new:
            print(f"not published (no key in {configmap}; add to rules/offers and redeploy): {', '.join(new)}",
                  file=out)
        size = sum(len(k) + len(v.encode()) for k, v in {**keys, **data}.items())
        if size > MAX_CONFIGMAP_BYTES:
            print(f"not published: {configmap} would hold {size:,} bytes, over a ConfigMap's "
                  f"{MAX_CONFIGMAP_BYTES:,}", file=out)
            return EXIT_NOTHING
        if not data:
            print(f"{configmap}: no table changed, nothing patched", file=out)
            return code
        try:
            patch_configmap(api, namespace, configmap, data, token, ca_file)
        except FetchError as exc:
            print(f"not published: {exc}", file=out)
            return EXIT_NOTHING
        print(f"{configmap}: patched {', '.join(data)}; the server pods reload it when the kubelet syncs",
              file=out)
        return code


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m service.market.publish", description=__doc__.splitlines()[0])
    add_refresh_arguments(ap)
    ap.add_argument("--from", dest="mount", type=Path, required=True, help="the mounted rules ConfigMap (flat)")
    ap.add_argument("--configmap", default="gpu-advisor-rules")
    ap.add_argument("--namespace", default="", help="default: the pod's own (service account namespace file)")
    ap.add_argument("--api-server", default=API_SERVER)
    ap.add_argument("--token-file", type=Path, default=ACCOUNT / "token")
    ap.add_argument("--ca-file", type=Path, default=ACCOUNT / "ca.crt")
    args = ap.parse_args(argv)
    namespace = args.namespace or (ACCOUNT / "namespace").read_text(encoding="utf-8").strip()
    opts = Options(args.skypilot_url, args.catalog_version, args.skypilot, args.gpuhunt_url, args.gpuhunt,
                   args.timeout, args.as_of, args.accept)
    token = args.token_file.read_text(encoding="utf-8").strip()
    return publish(args.mount, opts, args.configmap, namespace, args.api_server, token, args.ca_file, sys.stdout)


if __name__ == "__main__":
    raise SystemExit(main())
