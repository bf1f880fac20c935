"""`make mutate`'s report: the mutation score per module of the decision core and every surviving mutant with the
line it changed, from mutmut's own results (run after `mutmut run`; docs/testing.md says how to read it).

Score = killed / (every mutant mutmut ran): a mutant no test reaches ("no tests") counts as surviving; one that
timed out or that the type checker refused counts as killed; "not checked" (not run this time) is left out."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

MUTMUT = str(Path(sys.executable).with_name("mutmut"))
KILLED = {"killed", "timeout", "caught by type check", "segfault"}
NOT_RUN = {"not checked", "skipped"}
# service.money.ownership.x_break_even_hours__mutmut_3, service.decide.run.xǁScoredǁf__mutmut_1
_NAME = re.compile(r"^(?P<module>[\w.]+?)\.x(?:_|ǁ)")


def module_of(mutant: str) -> str:
    found = _NAME.match(mutant)
    return found.group("module") if found else mutant.rsplit(".", 1)[0]


def results() -> list[tuple[str, str]]:
    out = subprocess.run([MUTMUT, "results", "--all", "true"], capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        name, sep, status = line.strip().rpartition(": ")
        if sep and name:
            rows.append((name, status))
    return rows


def changed_lines(mutant: str) -> list[str]:
    diff = subprocess.run([MUTMUT, "show", mutant], capture_output=True, text=True).stdout
    return [ln for ln in diff.splitlines() if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]


def main() -> int:
    by_module: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for name, status in results():
        by_module[module_of(name)][status].append(name)
    if not by_module:
        print("no mutmut results: run `make mutate` (mutmut run) first")
        return 1
    print(f"{'module':44} {'score':>7} {'killed':>7} {'ran':>5}  survivors")
    survivors: list[str] = []
    for module in sorted(by_module):
        counts = by_module[module]
        ran = sum(len(v) for k, v in counts.items() if k not in NOT_RUN)
        killed = sum(len(v) for k, v in counts.items() if k in KILLED)
        alive = [n for k, v in counts.items() if k not in KILLED | NOT_RUN for n in v]
        survivors += alive
        score = f"{100 * killed / ran:.0f}%" if ran else "-"
        print(f"{module:44} {score:>7} {killed:>7} {ran:>5}  {len(alive)}")
    for name in sorted(survivors):
        status = next(s for s, names in by_module[module_of(name)].items() if name in names)
        print(f"\n{name} ({status})")
        for line in changed_lines(name):
            print(f"    {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
