"""ReloadRules under `--processes N` reloads every worker, not only the one the call happened to reach, and its
answer says what each of the others did; a worker that does not report in time is reported as not known."""

from __future__ import annotations

import json
import signal
import socket
import time
from pathlib import Path

import grpc
import pytest

from service.frontends import cli
from service.rulebook.store import RuleStore
from service.serving import fanout
from service.wire.api import pb, pb_grpc
from tests.conftest import ADMIN, ADMIN_TOKEN, call
from tests.test_processes import _events, _start, _wait_for, procs  # noqa: F401 (procs is a fixture)
from tests.test_reload import set_h100_rent, wait_for

WORKERS = 2  # the in-process relay test below has three
NEW_PRICE = 3.77


def _fresh_stub(addr: str) -> tuple[grpc.Channel, pb_grpc.GpuAdvisorStub]:
    # A channel of its own, not shared with other channels to the same address: a new connection, which the
    # kernel gives to one of the workers (SO_REUSEPORT hashes each connection).
    channel = grpc.insecure_channel(addr, options=[("grpc.use_local_subchannel_pool", 1)])
    return channel, pb_grpc.GpuAdvisorStub(channel)


def _reload(addr: str) -> pb.ReloadRulesResponse:
    channel, stub = _fresh_stub(addr)
    with channel:
        return stub.ReloadRules(pb.ReloadRulesRequest(), metadata=ADMIN, timeout=60)


def _answered_by(log: Path) -> dict[str, int]:
    """request id → the pid of the worker that logged the call."""
    return {e["request_id"]: e["pid"] for e in _events(log) if e.get("event") == "rpc" and "request_id" in e}


def test_one_reload_rules_call_reloads_every_worker(rules_copy, tmp_path, procs, capsys):  # noqa: F811
    proc, log = _start(tmp_path, "--addr", "127.0.0.1:0", "--processes", str(WORKERS), rules=rules_copy,
                       GPU_ADVISOR_ADMIN_TOKEN=ADMIN_TOKEN)
    procs.append(proc)
    events = _wait_for(log, proc, lambda ev: sum(e.get("event") == "serving" for e in ev) >= WORKERS)
    workers = next(e for e in events if e.get("event") == "workers")
    pids, addr = set(workers["pids"]), workers["addr"]
    assert sum(e.get("event") == "serving" for e in events) == WORKERS, log.read_text()
    before = {e["revision"] for e in events if e.get("event") == "serving"}
    assert len(before) == 1

    # --no-watch: nothing but the one call below can make a worker read the folder again.
    set_h100_rent(rules_copy, NEW_PRICE)
    channel, stub = _fresh_stub(addr)
    with channel:  # without the token: refused, and nobody is asked to reload
        assert call(stub.ReloadRules, pb.ReloadRulesRequest()).code == grpc.StatusCode.UNAUTHENTICATED
    reply = _reload(addr)
    new = reply.ruleset.revision
    assert reply.reloaded and new not in before and not reply.ruleset.last_error
    others = {w.pid: w for w in reply.other_workers}
    assert len(others) == WORKERS - 1 and set(others) < pids, reply
    for w in others.values():
        assert (w.answered, w.ok, w.reloaded, w.revision, w.error) == (True, True, True, new, ""), w
    events = _wait_for(log, proc, lambda ev: any(e.get("event") == "reload_fanout" for e in ev), 10)
    fanouts = [e for e in events if e.get("event") == "reload_fanout"]  # the supervisor's lines, in order
    assert [(e["asked_by"], sorted(e["asked"])) for e in fanouts] == [(*(pids - set(others)), sorted(others))]

    # Over fresh connections until each worker has answered: every answer comes from the new rules.
    seen: dict[str, tuple[str, float]] = {}
    deadline = time.monotonic() + 45
    answered: dict[str, int] = {}
    while time.monotonic() < deadline and set(answered.values()) != pids:
        for _ in range(10):
            rid = f"fanout-{len(seen)}"
            channel, stub = _fresh_stub(addr)
            with channel:
                out = stub.ListGpus(pb.ListGpusRequest(), metadata=(("x-request-id", rid),), timeout=10)
            # The catalog row the edit changed (answers price the H100 from its offers, which stay as they were).
            h100 = next(g for g in out.gpus if g.id == "h100-sxm")
            price = next(p.usd for p in h100.prices
                         if p.kind == "rent" and p.current and p.tier == pb.PRICE_TIER_ON_DEMAND)
            seen[rid] = (out.ruleset.revision, price)
        time.sleep(0.2)  # log lines are written by a background thread
        answered = _answered_by(log)
    by_pid: dict[int, set[tuple[str, float]]] = {}
    for rid, got in seen.items():
        if rid in answered:
            by_pid.setdefault(answered[rid], set()).add(got)
    assert set(by_pid) == pids, f"{len(seen)} calls reached only {sorted(by_pid)} of {sorted(pids)}"
    for pid, got in by_pid.items():
        assert {rev for rev, _ in got} == {new} and all(p == pytest.approx(NEW_PRICE) for _, p in got), (pid, got)

    # A bad edit: every worker rejects it, keeps serving the last good rules and says why.
    catalog = rules_copy / "catalog" / "gpus.yaml"
    catalog.write_text(catalog.read_text(encoding="utf-8") + "  - id: [\n", encoding="utf-8")
    reply = _reload(addr)
    assert not reply.reloaded and reply.ruleset.revision == new and "catalog/gpus.yaml" in reply.ruleset.last_error
    assert len(reply.other_workers) == WORKERS - 1
    for w in reply.other_workers:
        assert w.answered and not w.ok and not w.reloaded and w.revision == new, w
        assert "catalog/gpus.yaml" in w.error
    # The command line shows each worker and fails.
    token_file = tmp_path / "token"
    token_file.write_text(ADMIN_TOKEN, encoding="utf-8")
    capsys.readouterr()
    assert cli.main(["reload", "--addr", addr, "--token-file", str(token_file), "--timeout", "60"]) == 1
    printed = capsys.readouterr().out
    rejected = [line for line in printed.splitlines() if line.startswith("worker ") and "rejected" in line]
    assert len(rejected) == WORKERS - 1 and all(f"serving revision {new}" in line for line in rejected), printed

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0


def test_a_worker_refuses_a_channel_whose_other_end_is_not_its_parent(tmp_path):
    mine, theirs = socket.socketpair()  # made by this process, which is nobody's supervisor here
    with mine, theirs:
        assert fanout.Peers.from_fd(theirs.fileno()) is None
        assert theirs.fileno() >= 0  # refused, and left open for its owner
    with open(tmp_path / "f", "wb") as f:
        assert fanout.Peers.from_fd(f.fileno()) is None  # not a socket at all


def test_the_answer_names_a_worker_that_did_not_report_and_who_reported_is_known_from_its_pair(rules_copy):
    relay = fanout.Relay()
    ends = {pid: relay.pair() for pid in (101, 102, 103)}
    for pid, (own, _) in ends.items():
        relay.add(pid, own)
    asking = fanout.Peers(ends[101][1])
    asking.start(RuleStore(rules_copy))  # never asked to reload here
    try:
        pending = asking.ask_others()
        # 102 reports (claiming to be someone else); 103 stays silent.
        lines = ends[102][1].makefile("rb")
        ask = json.loads(lines.readline())
        assert ask["op"] == "reload" and ask["reply_to"] == 101
        report = {"op": "reloaded", "id": ask["id"], "reply_to": 101, "pid": 999, "ok": True, "reloaded": True,
                  "revision": "abc", "error": ""}
        ends[102][1].sendall(json.dumps(report).encode() + b"\n")
        # 102's report is in before the collect starts (a busy machine could read it after a short wait), so
        # the answer does not depend on how soon the reader thread runs; 103's never comes: `wait` ends it.
        wait_for(lambda: pending._asked.pids is not None and 102 in pending._asked.reports, timeout=60)
        got = pending.collect(wait=0.3)
        assert got == [fanout.WorkerReload(102, True, True, True, "abc", ""), fanout.WorkerReload(103)]
        lines.close()
    finally:
        asking.close()
        relay.close()
        for _, end in ends.values():
            end.close()


def test_no_supervisor_answer_is_an_error_not_an_empty_list(rules_copy):
    own, worker_end = fanout.Relay.pair()
    asking = fanout.Peers(worker_end)
    asking.start(RuleStore(rules_copy))
    own.close()  # the supervisor is gone
    try:
        with pytest.raises(fanout.SupervisorUnreachable):
            asking.ask_others().collect(wait=5.0)
    finally:
        asking.close()


def test_the_command_line_says_when_a_worker_was_not_heard_from(capsys):
    cli.print_other_workers([pb.WorkerReload(pid=7, answered=True, ok=True, reloaded=True, revision="r1"),
                             pb.WorkerReload(pid=8)])
    assert capsys.readouterr().out.splitlines() == [
        "worker 7: reloaded, serving revision r1",
        "worker 8: asked to reload, no report in time (its outcome is not known)",
    ]
