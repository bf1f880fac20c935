"""Real servers on 127.0.0.1 with an ephemeral port, on the repo's rules or a temporary copy of them."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from hypothesis import settings

from service.rulebook.folder import load_rulebook
from service.rulebook.store import TIMEOUT_ENV
from service.rulebook.version import Bundle
from service.serving.logging import configure
from service.serving.server import serve
from service.wire.api import pb, pb_grpc

RULES = Path(__file__).parents[1] / "rules"
TODAY = date(2026, 12, 1)  # the day in-process answers are computed for (prices valid then)
# ReloadRules is off unless the server has an admin token; tests that reload through the RPC start with this one.
ADMIN_TOKEN = "test-admin-token"
ADMIN = (("authorization", f"Bearer {ADMIN_TOKEN}"),)

# A rules load's time limit (20 s by default) is tested where a test sets it; everywhere else a loaded machine
# must not fail a test by the clock (a golden case failed when the session server's load took over 20 s at load
# average 8). Servers started as subprocesses inherit it.
os.environ.setdefault(TIMEOUT_ENV, "120")

# As `main` does: log lines go to stderr, so a test reading a command's stdout gets only its output.
configure()

# CI replays the same examples on every run (.ci/run sets HYPOTHESIS_PROFILE=ci): whether a commit lands never
# depends on the draw, and a failure there reproduces. Runs elsewhere keep drawing afresh and find new cases
# (a local run drew the 5e-324 requests/s that validate now refuses).
settings.register_profile("ci", derandomize=True, database=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
# pytest-randomly (a dev dependency) shuffles the order of modules and tests and reseeds `random` per test; it
# leaves Hypothesis alone, so the ci profile above still replays the same examples whatever the order.


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """The random order's seed, printed even under -q (which hides pytest-randomly's own header line)."""
    seed = getattr(config.option, "randomly_seed", None)
    if isinstance(seed, int) and config.pluginmanager.hasplugin("randomly"):
        terminalreporter.write_line(f"random test order: seed {seed}; the same order again: --randomly-seed={seed}")


# As the gpu-advisor client does: gRPC's own retries on UNAVAILABLE. With the stream cap on, Core refuses a
# connection's new stream while an ended one is not yet freed (the HTTP/2 rapid-reset protection, serving/server.py),
# which a client with more calls in flight than the cap meets now and then; the server never started that call.
RETRY_CONFIG = json.dumps({"methodConfig": [{"name": [{"service": "gpuadvisor.v1.GpuAdvisor"}], "retryPolicy": {
    "maxAttempts": 5, "initialBackoff": "0.1s", "maxBackoff": "1s", "backoffMultiplier": 2,
    "retryableStatusCodes": ["UNAVAILABLE"]}}]})


def retrying_channel(addr: str, **options: Any) -> grpc.Channel:
    """A plaintext channel (a connection of its own) that retries UNAVAILABLE like the shipped client."""
    return grpc.insecure_channel(addr, options=[("grpc.service_config", RETRY_CONFIG),
                                                ("grpc.use_local_subchannel_pool", 1), *options.items()])


class Running:
    """One started server with a channel to it. Attributes: server, port, addr, store, stub, rules_dir."""

    def __init__(self, rules_dir: Path, **kw: Any):
        self.server, self.port, self.store = serve("127.0.0.1:0", str(rules_dir), **kw)
        self.addr = f"127.0.0.1:{self.port}"
        self.channel = retrying_channel(self.addr)
        self.stub = pb_grpc.GpuAdvisorStub(self.channel)
        self.rules_dir = rules_dir

    def stop(self) -> None:
        self.channel.close()
        self.server.stop(grace=None).wait()
        self.store.close()

    def __iter__(self) -> Iterator[Any]:
        # `addr, port = server` works too, for tests that only need where it listens.
        return iter((self.addr, self.port))


@pytest.fixture(scope="session")
def server() -> Iterator[Running]:
    # No watcher: the session server must not change under the tests if someone edits rules/ meanwhile.
    running = Running(RULES, watch=False)
    assert running.store.active() is not None, running.store.status().last_error
    yield running
    running.stop()


@pytest.fixture(scope="session")
def stub(server: Running) -> pb_grpc.GpuAdvisorStub:
    return server.stub


@pytest.fixture
def rules_copy(tmp_path: Path) -> Path:
    """A private copy of rules/ that a test may edit (reload tests)."""
    dst = tmp_path / "rules"
    shutil.copytree(RULES, dst)
    return dst


@pytest.fixture
def start_server() -> Iterator[Callable[..., Running]]:
    """Factory: start_server(rules_dir, **serve_kwargs) → Running; all of them are stopped afterwards."""
    started: list[Running] = []

    def start(rules_dir: Path, **kw: Any) -> Running:
        running = Running(rules_dir, **kw)
        started.append(running)
        return running

    yield start
    for r in started:
        r.stop()


def bad_request_fields(err: grpc.RpcError) -> list[str]:
    """Field paths of the google.rpc.BadRequest in an error's status details."""
    status = rpc_status.from_call(err) if isinstance(err, grpc.Call) else None
    fields: list[str] = []
    for detail in status.details if status else []:
        bad = error_details_pb2.BadRequest()
        if detail.Unpack(bad):
            fields += [v.field for v in bad.field_violations]
    return fields


@dataclass
class Outcome:
    """What one call came back with, success or not, so tests can assert on either without try/except."""

    code: grpc.StatusCode
    response: Any = None
    details: str = ""
    fields: tuple[str, ...] = ()
    initial_metadata: dict[str, Any] | None = None
    trailing_metadata: dict[str, Any] | None = None


def call(method: Any, request: Any, **kw: Any) -> Outcome:
    """Call a stub method with_call → Outcome (code, response, BadRequest field paths, metadata)."""
    try:
        response, c = method.with_call(request, timeout=kw.pop("timeout", 30), **kw)
        return Outcome(grpc.StatusCode.OK, response, initial_metadata=dict(c.initial_metadata()),
                       trailing_metadata=dict(c.trailing_metadata()))
    except grpc.RpcError as err:
        assert isinstance(err, grpc.Call)
        return Outcome(err.code(), None, err.details() or "", tuple(bad_request_fields(err)),
                       dict(err.initial_metadata() or ()), dict(err.trailing_metadata() or ()))


__all__ = ["ADMIN", "ADMIN_TOKEN", "Outcome", "Running", "bad_request_fields", "call", "pb"]


@pytest.fixture(scope="module")
def bundle() -> Iterator[Bundle]:
    """The repo's rules loaded in-process (no server), for tests that call `advise` directly."""
    book, problems = load_rulebook(RULES, today=TODAY)
    assert book is not None, [str(p) for p in problems]
    b = Bundle(book, loaded_at=None)  # type: ignore[arg-type]
    yield b
    b.retire(None)


@pytest.fixture(scope="session")
def catalog_rules(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """rules/ without its offer tables: every GPU priced from the catalog and counted as sized."""
    rules = tmp_path_factory.mktemp("catalog-rules") / "rules"
    shutil.copytree(RULES, rules, ignore=shutil.ignore_patterns("offers"))
    (rules / "tests" / "placement.yaml").unlink()  # its cases are about placement on offers
    (rules / "tests" / "offers_fit.yaml").unlink()  # and so are these (issue 21)
    return rules


@pytest.fixture(scope="session")
def catalog_stub(catalog_rules: Path) -> Iterator[pb_grpc.GpuAdvisorStub]:
    """A server on the catalog-only rules, for tests of sizing figures (counts before placement on instances)."""
    running = Running(catalog_rules, watch=False)
    assert running.store.active() is not None, running.store.status().last_error
    yield running.stub
    running.stop()


@pytest.fixture(scope="session")
def catalog_bundle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bundle]:
    """The repo's rules without their offer tables: every GPU priced from the catalog, for tests of the catalog's
    own price rows (tiers, fallbacks, replayed dates) apart from the offers that price candidates today."""
    rules = tmp_path_factory.mktemp("catalog-only") / "rules"
    shutil.copytree(RULES, rules, ignore=shutil.ignore_patterns("offers"))
    book, problems = load_rulebook(rules, today=TODAY)
    assert book is not None and not len(book.offers), [str(p) for p in problems]
    b = Bundle(book, loaded_at=None)  # type: ignore[arg-type]
    yield b
    b.retire(None)
