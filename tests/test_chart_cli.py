"""`gpu-advisor recommend --plot` and `--chart FILE` (issue 43): the charts the answer carries, drawn in the terminal
at 80 columns without colour, and written as PNG or SVG, through a real server."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from PIL import Image

from service.frontends import chart_files, cli
from service.frontends.plots import draw
from service.wire.api import pb

REPO = Path(__file__).parents[1]
CHAT_8B = str(REPO / "examples" / "realtime-chat-8b.yaml")
BUY_H100 = str(REPO / "tests" / "cases" / "buy-h100-break-even.yaml")


def _charted(server, path: str, locale: str = "en") -> pb.RecommendResponse:
    from service.frontends.brief_file import load_request

    request = load_request(path)
    request.include_charts, request.locale = True, locale
    return server.stub.Recommend(request, timeout=60)


def test_plot_prints_both_charts_at_80_columns_without_colour(server, capsys):
    assert cli.main(["recommend", CHAT_8B, "--addr", server.addr, "--plot"]) == 0
    out = capsys.readouterr().out
    resp = _charted(server, CHAT_8B)
    assert len(resp.charts) == 2
    flat = " ".join(out.split())  # a key line longer than 80 columns is wrapped
    for chart in resp.charts:
        texts = [chart.title, chart.x_label, chart.y_label, *(s.name for s in chart.series),
                 *(m.label for m in chart.marks)]
        assert all(" ".join(t.split()) in flat for t in texts)
    for c in resp.candidates[:3]:  # the key names each point's candidate with its figures
        assert f"{c.count}x {c.gpu}: {c.performance.e2e_p95_ms:,.4g}, ${c.cost.usd_per_unit:.4g}" in out
    plot = out[out.index(resp.charts[0].title):]
    assert "\x1b" not in plot  # no colour codes, also when not a terminal
    assert max(len(line) for line in plot.splitlines()) <= 80
    assert "┤" in plot  # a canvas was drawn, not only the key


def test_plot_of_chinese_charts_keeps_the_canvas_ascii(server):
    """Words are printed around the canvas, never in it, so CJK double-width characters cannot shift its columns."""
    resp = _charted(server, CHAT_8B, "zh-CN")
    text = draw(resp.charts[0], "zh-CN")
    canvas = [line for line in text.splitlines() if "┤" in line or "│" in line]
    assert canvas and not any(re.search(r"[\u4e00-\u9fff]", line) for line in canvas)
    assert "纵轴" in text and resp.charts[0].title in text


def test_plot_says_so_when_there_is_nothing_to_draw(capsys):
    from service.frontends.plots import print_plots

    print_plots(pb.RecommendResponse(), "en")
    assert "No chart to draw" in capsys.readouterr().out


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_chart_writes_a_picture_by_extension(server, tmp_path: Path, capsys, suffix: str):
    path = tmp_path / f"chat{suffix}"
    assert cli.main(["recommend", CHAT_8B, "--addr", server.addr, "--chart", str(path)]) == 0
    assert str(path) in capsys.readouterr().err
    data = path.read_bytes()
    if suffix == ".png":
        image = Image.open(io.BytesIO(data))
        assert image.format == "PNG" and image.size[0] >= 1000 and image.size[1] >= 1000  # two panels, stacked
    else:
        assert data.lstrip().startswith(b"<?xml") and b"<svg" in data


def test_the_same_answer_draws_the_same_bytes(server):
    resp = _charted(server, BUY_H100)
    first, _ = chart_files.render(list(resp.charts), "png", list(resp.candidates))
    again, _ = chart_files.render(list(resp.charts), "png", list(resp.candidates))
    assert first == again


def test_a_wrong_extension_is_refused_before_asking(tmp_path: Path, capsys):
    # No server at this address: the extension is checked first, so the error is about the file.
    code = cli.main(["recommend", CHAT_8B, "--addr", "127.0.0.1:9", "--chart", str(tmp_path / "x.jpg")])
    assert code == cli.EXIT_INPUT
    assert ".png or .svg" in capsys.readouterr().err


def test_chinese_without_a_cjk_font_still_writes_and_says_why(server, tmp_path: Path, capsys,
                                                               monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(chart_files, "cjk_family", lambda: None)
    path = tmp_path / "zh.png"
    assert cli.main(["recommend", CHAT_8B, "--addr", server.addr, "--locale", "zh-CN", "--chart", str(path)]) == 0
    err = capsys.readouterr().err
    assert "fonts-noto-cjk" in err
    assert Image.open(path).format == "PNG"


def test_chinese_with_a_cjk_font_uses_it(server, monkeypatch: pytest.MonkeyPatch):
    """Whichever family is found is the one the picture asks for first (no note then)."""
    import matplotlib

    used: list[object] = []

    original = matplotlib.rc_context

    def spy(rc=None, fname=None):  # noqa: ANN001, ANN202
        used.append((rc or {}).get("font.family"))
        return original(rc, fname)

    monkeypatch.setattr(matplotlib, "rc_context", spy)
    monkeypatch.setattr(chart_files, "cjk_family", lambda: "DejaVu Sans Mono")
    resp = _charted(server, CHAT_8B, "zh-CN")
    _, notes = chart_files.render(list(resp.charts), "png", list(resp.candidates))
    assert notes == [] and used == [["DejaVu Sans Mono", "DejaVu Sans"]]
