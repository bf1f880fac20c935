"""Progress on long work (issue 43 item 5): plain lines at most every few seconds when not on a terminal (a fake
clock, no sleeping), a tqdm bar on one, on stderr so the report on stdout is unchanged."""

from __future__ import annotations

import io
from datetime import date
from pathlib import Path

import pytest

from service.market import progress as P
from service.market.importers.__main__ import main as import_main

REFERENCE = Path(__file__).parents[2] / "shared" / "data" / "offers-reference"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_plain_lines_come_at_most_every_interval_and_once_at_the_end():
    out, clock = io.StringIO(), Clock()
    with P.Progress("offers import", "rows read", total=10_000, stream=out, every_s=5.0, clock=clock) as p:
        p.update(2000)
        clock.now += 4.9
        p.update(2000)
        assert out.getvalue() == ""  # under the interval: nothing yet
        clock.now += 0.2
        p.note("aws")
        p.update(2000)
        assert out.getvalue() == "offers import: 6,000 of 10,000 (60%) rows read, aws\n"
        p.update(1000)  # the interval starts again from the last line
        assert out.getvalue().count("\n") == 1
    assert out.getvalue().splitlines()[-1] == "offers import: 7,000 of 10,000 (70%) rows read, aws, done"
    p.close()  # closing twice says it once
    assert out.getvalue().count("done") == 1


def test_not_a_terminal_means_plain_lines_even_with_tqdm_installed():
    out = io.StringIO()
    p = P.Progress("x", "rows", stream=out)
    assert p._bar is None  # noqa: SLF001
    p.update(5)
    p.close()
    assert out.getvalue() == "x: 5 rows, done\n"


def test_on_a_terminal_a_tqdm_bar_counts_the_same():
    pytest.importorskip("tqdm")
    out = io.StringIO()
    with P.Progress("make accuracy", "rows", total=None, stream=out, bar=True) as p:
        p.set_total(40)
        for _ in range(40):
            p.update(1)
        p.note("12 points compared")
    text = out.getvalue()
    assert "make accuracy" in text and "40/40" in text and "\r" in text


@pytest.mark.skipif(not REFERENCE.is_dir(), reason="../shared/data/offers-reference is beside the repo")
def test_import_says_its_progress_on_stderr_and_keeps_the_report_on_stdout(tmp_path: Path, capsys):
    assert import_main(["--from", "skypilot", str(REFERENCE), "--out", str(tmp_path), "--as-of", "2026-12-01"]) == 0
    captured = capsys.readouterr()
    read = int(captured.out.split(" rows read")[0].split(": ")[-1].replace(",", ""))
    assert read > 1000
    # The progress's last line; the import's own notes to stderr (a request for --source) may follow it.
    last = [ln for ln in captured.err.strip().splitlines() if ln.startswith("offers import (skypilot):")][-1]
    assert last.startswith(f"offers import (skypilot): {read:,} rows read") and last.endswith("providers, done")
    assert "rows read" not in captured.out.split("\n", 1)[1]  # no progress in the report


def test_importers_count_every_row_in_batches(monkeypatch: pytest.MonkeyPatch):
    """Each row is counted once, in batches of BATCH and the rest at the end (gpuhunt and SkyPilot alike)."""
    from service.market.importers.gpuhunt import import_gpuhunt_csv
    from service.rulebook.accelerators import AcceleratorMap

    monkeypatch.setattr("service.market.importers.gpuhunt.BATCH", 3)
    header = "provider,instance_name,location,price,cpu,memory,gpu_count,gpu_name,gpu_memory,spot\n"
    rows = "".join(f"aws,p{i},us-east-1,1.0,8,64,1,A10G,24,false\n" for i in range(7))
    seen: list[int] = []

    class Spy:
        def update(self, n: int) -> None:
            seen.append(n)

    _, report = import_gpuhunt_csv("x.csv", header + rows, AcceleratorMap([]), date(2026, 12, 1),
                                   progress=Spy())  # type: ignore[arg-type]
    assert seen == [3, 3, 1] and report.rows_read == 7


def test_refresh_counts_each_provider_done_also_when_its_download_fails():
    from service.market.refresh import FetchError, Options, gpuhunt_tables, skypilot_tables
    from service.rulebook.accelerators import AcceleratorMap

    opts = Options(skypilot=("aws", "lambda"), gpuhunt=("vast", "cudo"))

    def offline(url: str) -> bytes:
        raise FetchError(f"{url}: offline")

    out = io.StringIO()
    p = P.Progress("offers refresh", "providers done", 4, stream=out, clock=Clock())
    got = skypilot_tables(opts, AcceleratorMap([]), date(2026, 12, 1), offline, p)
    assert p.count == 2
    got += gpuhunt_tables(opts, AcceleratorMap([]), date(2026, 12, 1), offline, p)
    assert p.count == 4 and all(c.error for c in got)
    p.close()
    assert out.getvalue() == "offers refresh: 4 of 4 (100%) providers done, now the gpuhunt catalog, done\n"
