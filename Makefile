# aql-mcp: `make run` starts the service in development mode; `make test` checks everything.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
PORT ?= 8000

.PHONY: run test lint typecheck unit conformance bench token-cost image-test clean

$(VENV): $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 $(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/aql-mcp serve --dev --port $(PORT)

lint: $(STAMP)
	$(BIN)/ruff check src tests scripts
	$(BIN)/ruff format --check src tests scripts

typecheck: $(STAMP)
	$(BIN)/mypy

# The store tests run on SQLite and on a throwaway PostgreSQL the suite starts (scripts/postgres.sh);
# the console's browser test on Debian's chromium (scripts/chromium.sh; AQL_MCP_TEST_SKIP_BROWSER=1 skips it).
unit: $(STAMP)
	scripts/postgres.sh install
	test "$$AQL_MCP_TEST_SKIP_BROWSER" = 1 || scripts/chromium.sh install
	$(BIN)/python -m pytest

test: lint typecheck unit

conformance: $(STAMP)
	scripts/conformance.sh --serve

# Load benchmark against the official SDK and a bare Starlette ceiling (bench/README.md); REPS=3 optional.
bench: $(STAMP)
	bench/run.sh

# Token cost of tools/list in each MCP-AQL endpoint mode against discrete tools; writes bench/TOKENS.md.
token-cost: $(STAMP)
	$(BIN)/python scripts/token_cost.py --output bench/TOKENS.md

# Build the Dockerfile with podman and run the image read-only as non-root (slow; not in `make test`).
image-test:
	scripts/image-test.sh

clean:
	rm -rf $(VENV) .tools .mypy_cache .ruff_cache .pytest_cache state
