# Relaynet: `make run` starts the local hub, `make test` runs the tests. Both set themselves up.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8787

.PHONY: setup run test fuzz lint openapi cost build bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

setup: $(STAMP)

run: $(STAMP)
	$(BIN)/relaynet serve --host $(HOST) --port $(PORT) --spec examples/demo-network.yaml \
		--tokens-out .relaynet/tokens.json --print-mcp-config

test: $(STAMP)
	$(BIN)/python -m pytest

# schemathesis against docs/openapi.json on a local stack (loopback only), FUZZ_EXAMPLES examples
# per operation and mode, at most FUZZ_SECONDS in all; figures in .relaynet/fuzz-report.json.
FUZZ_EXAMPLES ?= 25
FUZZ_SECONDS ?= 1200
fuzz: $(STAMP)
	FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) timeout $(FUZZ_SECONDS) $(BIN)/python -m pytest tests/fuzz -m fuzz -p no:cacheprovider -s

lint: $(STAMP)
	$(BIN)/cfn-lint template.yaml
	SAM_CLI_TELEMETRY=0 $(BIN)/sam validate --lint --template-file template.yaml --region us-east-1

# docs/openapi.json is generated from the handlers' models (tests/test_openapi.py checks it).
openapi: $(STAMP)
	$(BIN)/python -m relaynet.http.openapi docs/openapi.json

# DynamoDB requests and the AWS bill per tool call (the README's cost table).
cost: $(STAMP)
	$(BIN)/python benchmarks/requests_per_tool.py

# `sam build` without Docker (needs python3.11 on PATH, as the template's runtime).
build: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" SAM_CLI_TELEMETRY=0 $(BIN)/sam build --template-file template.yaml

bench: $(STAMP)
	$(BIN)/python benchmarks/run.py

clean:
	rm -rf $(VENV) .relaynet .pytest_cache .hypothesis
