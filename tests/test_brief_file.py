"""Brief files as rule authors write them (issue 16, item 8): short enum names, and a misspelt field or value
reported with the file's line and a did-you-mean, never a raw protobuf message."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf.json_format import MessageToDict

from service.frontends import cli
from service.frontends.brief_file import InputError, load_request

EXAMPLES = sorted((Path(__file__).parents[1] / "examples").glob("*.yaml"))


def _write(tmp_path: Path, text: str) -> Path:
    f = tmp_path / "brief.yaml"
    f.write_text(text, encoding="utf-8")
    return f


def test_short_enum_names_read_as_the_full_ones(tmp_path: Path):
    short = _write(tmp_path, "workload: realtime_inference\nmodel: {params_billion: 70, precision: fp8}\n"
                             "run_cycle: always-on\nsuccess_unit: Response\neconomics: {demand: steady}\n")
    full = tmp_path / "full.yaml"
    full.write_text("workload: WORKLOAD_TYPE_REALTIME_INFERENCE\n"
                    "model: {params_billion: 70, precision: PRECISION_FP8}\nrun_cycle: RUN_CYCLE_ALWAYS_ON\n"
                    "success_unit: SUCCESS_UNIT_RESPONSE\neconomics: {demand: DEMAND_STEADY}\n", encoding="utf-8")
    assert load_request(short) == load_request(full)
    assert load_request(short).brief.model.precision != 0


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_every_example_still_reads(example: Path):
    assert MessageToDict(load_request(example))["brief"]


@pytest.mark.parametrize(
    ("text", "line", "says"),
    [
        ("workload: realtime_inference\nmodel:\n  params_billion: 8\n  precison: fp8\n", 4,
         "brief.model.precison: no such field (did you mean 'precision'?)"),
        ("workload: realtime_inferense\n", 1,
         "brief.workload: 'realtime_inferense' is not a choice (did you mean 'realtime_inference'?)"),
        ("brief:\n  workload: batch_inference\nquotes:\n  - {gpu: h100-sxm, usd_per_hour: 2}\n"
         "  - {gpu: h200, usd_per_huor: 3}\n", 5,
         "quotes[1].usd_per_huor: no such field (did you mean 'usd_per_hour'?)"),
        ("modle: {params_billion: 8}\n", 1, "brief.modle: no such field (did you mean 'model'?)"),
    ],
)
def test_a_misspelling_names_its_line_and_what_was_meant(tmp_path: Path, text: str, line: int, says: str):
    f = _write(tmp_path, text)
    with pytest.raises(InputError) as err:
        load_request(f)
    assert str(err.value).startswith(f"{f}:{line}: {says}")
    assert "Message type" not in str(err.value)  # not protobuf's own words


def test_the_cli_reports_it_in_one_line_and_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    f = _write(tmp_path, "workload: realtime_inference\nmodel: {params_billion: 8, precision: fp9}\n")
    assert cli.main(["recommend", str(f), "--addr", "127.0.0.1:1", "--timeout", "1"]) == cli.EXIT_INPUT
    err = capsys.readouterr().err
    assert err.startswith(f"error: {f}:2: brief.model.precision: 'fp9' is not a choice (did you mean 'fp8'?)")


def test_none_answers_read_from_a_brief_file(tmp_path: Path):
    """Issue 37: "no cap" and "no latency target" are written in the CLI's YAML as the proto names them."""
    f = tmp_path / "brief.yaml"
    f.write_text("workload: realtime_inference\nlatency: {no_latency_target: true}\n"
                 "economics: {no_budget_cap: true}\n", encoding="utf-8")
    brief = load_request(f).brief
    assert brief.economics.no_budget_cap is True and brief.latency.no_latency_target is True
    f.write_text("economics: {no_budget_cap: yes please}\n", encoding="utf-8")
    with pytest.raises(InputError, match="no_budget_cap"):
        load_request(f)
