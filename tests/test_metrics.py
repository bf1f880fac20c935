"""Prometheus metrics: a real server's calls and reloads show up on the /metrics endpoint."""

from __future__ import annotations

import urllib.request

from service.serving import metrics
from service.wire.api import pb
from tests.conftest import ADMIN, ADMIN_TOKEN


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        return resp.read().decode()


def sample(text: str, name: str, **labels: str) -> float:
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith(name + "{"):
            got = ",".join(sorted(line[len(name) + 1 : line.index("}")].split(",")))
            if got == want:
                return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_calls_and_reloads_are_counted(rules_copy, start_server):
    port = metrics.serve_metrics("127.0.0.1:0")
    running = start_server(rules_copy, watch=False, admin_token=ADMIN_TOKEN)
    before = scrape(port)
    method = "/gpuadvisor.v1.GpuAdvisor/GetRuleset"
    running.stub.GetRuleset(pb.GetRulesetRequest())
    running.stub.GetRuleset(pb.GetRulesetRequest())
    after = scrape(port)
    assert sample(after, "gpu_advisor_rpcs_total", method=method, code="OK") == sample(
        before, "gpu_advisor_rpcs_total", method=method, code="OK") + 2
    revision = running.store.status().revision
    assert sample(after, "gpu_advisor_rules_active_info", revision=revision) == 1.0

    f = rules_copy / "routing.yaml"
    f.write_text(f.read_text(encoding="utf-8").replace("demand: VOLATILE", "demand: VOLATLE"), encoding="utf-8")
    assert not running.stub.ReloadRules(pb.ReloadRulesRequest(), metadata=ADMIN).reloaded
    assert sample(scrape(port), "gpu_advisor_rules_reloads_total", result="rejected") >= sample(
        after, "gpu_advisor_rules_reloads_total", result="rejected") + 1
