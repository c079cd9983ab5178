# Relaynet: `make run` starts the local hub, `make test` runs the tests. Both set themselves up.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8787

.PHONY: setup chromium run test lint openapi cost build bench screenshots clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

setup: $(STAMP)

run: $(STAMP)
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

test: $(STAMP) chromium
	$(BIN)/python -m pytest

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

# docs/ui-desktop.png and docs/ui-phone.png (the README's pictures of the operator page).
screenshots: $(STAMP) chromium
	$(BIN)/python infra/scripts/ui_screenshots.py docs

clean:
	rm -rf $(VENV) .relaynet .pytest_cache .hypothesis
