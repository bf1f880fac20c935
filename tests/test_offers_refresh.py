"""`gpu-advisor offers refresh` against a local HTTP server (no network in tests): the SkyPilot catalog and gpuhunt's
published catalog served from fixture files on 127.0.0.1, with a provider that 404s and one whose file is not a
catalog. The good providers update (atomically, with a diff), the bad ones are reported, the server keeps serving
and the last good tables stay."""

from __future__ import annotations

import functools
import http.server
import io
import json
import re
import shutil
import threading
import zipfile
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.json_format import ParseDict

from service.frontends.cli import main as cli_main
from service.market.publish import main as publish_main
from service.market.refresh import EXIT_PARTIAL, FetchError, Options, fetch, refresh, vet_tables
from service.wire.api import pb

from .conftest import RULES, Running

FIX = Path(__file__).parent / "fixtures" / "offers"
DAY = date(2026, 12, 1)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass


@pytest.fixture
def mirror(tmp_path: Path) -> Iterator[str]:
    """http://127.0.0.1:PORT serving catalogs/v7/<provider>/vms.csv and gpuhunt/{version,<build>/catalog.zip}."""
    root = tmp_path / "www"
    v7 = root / "catalogs" / "v7"
    for prov in ("aws", "nebius"):
        (v7 / prov).mkdir(parents=True)
        shutil.copy(FIX / "skypilot" / "v7" / prov / "vms.csv", v7 / prov / "vms.csv")
    # nebius's 1-GPU H100 moved from $2.95 to $3.54 (+20%): the diff lists it
    neb = v7 / "nebius" / "vms.csv"
    neb.write_text(neb.read_text().replace(",2.95,", ",3.54,"))
    (v7 / "lambda").mkdir()
    (v7 / "lambda" / "vms.csv").write_text("<html><body>rate limited</body></html>\n")  # not a catalog
    hunt = root / "gpuhunt"
    (hunt / "20261201").mkdir(parents=True)
    (hunt / "version").write_text("20261201\n")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.write(FIX / "gpuhunt" / "azure.csv", "azure.csv")
    (hunt / "20261201" / "catalog.zip").write_bytes(buf.getvalue())
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def totals(running: Running) -> dict[str, int]:
    out = {}
    for prov in ("aws", "nebius", "lambda", "azure", "runpod"):
        req = pb.ListOffersRequest(provider=prov, as_of=DAY.isoformat(), page_size=1)
        out[prov] = running.stub.ListOffers(req, timeout=30).total
    return out


def test_refresh_updates_good_providers_reports_bad_ones_and_keeps_serving(
    mirror: str, rules_copy: Path, start_server: Callable[..., Running]
) -> None:
    running = start_server(rules_copy, watch=False)
    before = totals(running)
    lambda_before = (rules_copy / "offers" / "lambda.csv").read_bytes()
    opts = Options(skypilot_url=f"{mirror}/catalogs", versions=("v8", "v7"), skypilot=("aws", "nebius", "lambda",
                   "oracle"), gpuhunt_url=f"{mirror}/gpuhunt", gpuhunt=("azure",), timeout=10, as_of=DAY,
                   accept=("all",))  # the mirror's catalogs are a few rows against shipped tables of hundreds:
    # a shrink the sanity gates refuse (tests/test_refresh_gates.py); this test is about fetch, vet and write
    out = io.StringIO()
    assert refresh(rules_copy, opts, out) == EXIT_PARTIAL
    said = out.getvalue()
    assert "lambda: NOT updated, the last good table keeps serving" in said and "no offer imported" in said
    assert "oracle: NOT updated" in said and "HTTP 404" in said
    # the diff: rows added and removed against the shipped tables, prices that moved more than 10%
    assert re.search(r"nebius: 0 added, \d+ removed, 1 prices moved more than 10%", said)
    assert "~ gpu-h100-sxm_1gpu-16vcpu-200gb eu-north1 on-demand (h100-sxm x1) $2.95/h -> $3.54/h (+20%)" in said
    assert re.search(r"aws: \d+ added, \d+ removed", said)
    assert "+ Standard_ND96isr_H100_v5 eastus on-demand (h100-sxm x8) $98.32/h" in said
    assert "refreshed 3 of 5 providers" in said
    offers = rules_copy / "offers"
    assert (offers / "lambda.csv").read_bytes() == lambda_before  # the last good table, untouched
    assert not [p for p in offers.iterdir() if p.name.startswith(".")]  # no temporary file left behind
    aws = (offers / "aws.csv").read_text()
    assert "SkyPilot catalog v7, aws/vms.csv, read 2026-12-01" in aws and "shared" not in aws
    assert "dstack gpuhunt catalog 20261201, azure.csv, read 2026-12-01" in (offers / "azure.csv").read_text()

    assert running.store.reload().ok  # what the watcher does on the change
    after = totals(running)
    assert after["lambda"] == before["lambda"] > 0 and after["runpod"] == before["runpod"]
    # the mirror's tables, now served, beside the reserved terms (reserved.csv is no provider's catalog table)
    reserved = Counter(row.split(",")[0] for row in (offers / "reserved.csv").read_text().splitlines()[1:] if row)
    assert after["aws"] == 4 + reserved["aws"] and after["nebius"] == 4 + reserved["nebius"]
    brief = {"workload": "WORKLOAD_TYPE_BATCH_INFERENCE", "model": {"params_billion": 8}}
    answer = running.stub.Recommend(ParseDict({"brief": brief}, pb.RecommendRequest()), timeout=60)
    assert answer.candidates


def test_refresh_through_the_cli_refuses_a_version_that_fails_vetting(
    mirror: str, rules_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A rule test that holds only with the shipped aws table: the refreshed one fails it, so aws is not written.
    test = rules_copy / "tests" / "zz_aws_only.yaml"
    test.write_text("kind: rule_test\ncases:\n  - name: an aws g6e offer prices l40s\n    request:\n"
                    "      brief: {workload: WORKLOAD_TYPE_BATCH_INFERENCE, model: {params_billion: 8},\n"
                    "              placement: {providers: [aws]}}\n      max_candidates: 20\n"
                    "    expect:\n      caveats_include: {l40s: []}\n      placement_providers_in: [aws]\n"
                    "      not_candidates: [h100-sxm]\n")
    before = (rules_copy / "offers" / "aws.csv").read_bytes()
    code = cli_main(["offers", "refresh", "--rules", str(rules_copy), "--skypilot-url", f"{mirror}/catalogs",
                     "--catalog-version", "v7", "--skypilot", "aws", "--gpuhunt", "", "--as-of", "2026-12-01",
                     "--accept-market-move", "aws"])  # past the shrink gate, to the vetting
    said = capsys.readouterr().out
    assert code == 2, said
    assert "aws: NOT updated" in said and "fails vetting" in said and "zz_aws_only.yaml" in said
    assert (rules_copy / "offers" / "aws.csv").read_bytes() == before


def test_vetting_drops_only_the_table_it_refuses(rules_copy: Path) -> None:
    good = (rules_copy / "offers" / "nebius.csv").read_text()
    bad = good.replace(",h100-sxm,", ",h100-sxn,", 1)
    passed, refused, still = vet_tables(rules_copy, {"nebius": good, "lambda": bad.replace("nebius", "lambda")},
                                        DAY)
    assert set(passed) == {"nebius"} and "lambda" in refused and 'gpu "h100-sxn"' in refused["lambda"]
    assert still == []


def test_only_https_or_loopback_is_fetched() -> None:
    with pytest.raises(FetchError, match="only https://"):
        fetch("http://example.com/catalogs/v7/aws/vms.csv")
    with pytest.raises(FetchError, match="only https://"):
        fetch("file:///etc/passwd")


class _FakeApi(http.server.BaseHTTPRequestHandler):
    patches: list[tuple[str, dict[str, str], Any]] = []

    def do_PATCH(self) -> None:  # noqa: N802 - the HTTP method's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.patches.append((self.path, dict(self.headers), body))
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


def test_the_cronjob_publishes_changed_tables_into_the_rules_configmap_in_one_patch(
    mirror: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The ConfigMap as the job mounts it: one flat key per rules file, '/' spelled '__'.
    mount = tmp_path / "configmap"
    mount.mkdir()
    for f in RULES.rglob("*"):
        if f.is_file():
            (mount / "__".join(f.relative_to(RULES).parts)).write_bytes(f.read_bytes())
    (mount / "..data").mkdir()  # the kubelet's hidden entries are skipped
    api = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FakeApi)
    threading.Thread(target=api.serve_forever, daemon=True).start()
    token = tmp_path / "token"
    token.write_text("sa-token\n")
    try:
        code = publish_main(["--from", str(mount), "--namespace", "ml", "--api-server",
                             f"http://127.0.0.1:{api.server_address[1]}", "--token-file", str(token),
                             "--ca-file", str(tmp_path / "none"), "--skypilot-url", f"{mirror}/catalogs",
                             "--catalog-version", "v7", "--skypilot", "aws,nebius,lambda", "--gpuhunt", "",
                             "--as-of", "2026-12-01", "--accept-market-move", "all"])
    finally:
        api.shutdown()
        api.server_close()
    said = capsys.readouterr().out
    assert code == EXIT_PARTIAL, said  # lambda's file is not a catalog: kept, reported
    [(path, headers, body)] = _FakeApi.patches
    assert path == "/api/v1/namespaces/ml/configmaps/gpu-advisor-rules"
    assert headers["Authorization"] == "Bearer sa-token"
    assert headers["Content-Type"] == "application/merge-patch+json"
    assert sorted(body["data"]) == ["offers__aws.csv", "offers__nebius.csv"]
    assert "SkyPilot catalog v7, aws/vms.csv, read 2026-12-01" in body["data"]["offers__aws.csv"]
    assert "gpu-advisor-rules: patched offers__aws.csv, offers__nebius.csv" in said
