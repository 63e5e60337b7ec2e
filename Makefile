# aql-mcp: `make run` starts the service in development mode; `make test` checks everything.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8000
# Installs come from the hashed lock files under requirements/ (scripts/lock.sh) and resolve nothing:
# --require-hashes pins every file by its sha256, --no-deps takes the lock's list as complete, and the
# project itself is built with the locked backend (--no-build-isolation) instead of a fresh download.
# `pip check` then fails the install when the lock misses a dependency --no-deps did not fetch.
LOCKED_INSTALL := $(BIN)/python -m pip install --quiet --require-hashes --no-deps
RUNTIME_STAMP := $(VENV)/.runtime-stamp
DEV_STAMP := $(VENV)/.dev-stamp

.PHONY: run test check lint typecheck unit conformance bench bench-attacks token-cost image-test lock clean

$(VENV): $(DEV_STAMP)

# `make run` needs the service only: the runtime lock, the build backend and the project (editable).
# README.md too: it is the package's long description, which the service serves as `doc://readme`.
$(RUNTIME_STAMP): requirements/build.txt requirements/runtime.txt pyproject.toml README.md
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(LOCKED_INSTALL) -r requirements/build.txt
	$(LOCKED_INSTALL) -r requirements/runtime.txt
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	$(BIN)/python -m pip check
	touch $(RUNTIME_STAMP)

# The checks add the development tools on top (dev.txt holds the runtime pins too, at the same versions).
$(DEV_STAMP): $(RUNTIME_STAMP) requirements/dev.txt
	PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 $(LOCKED_INSTALL) -r requirements/dev.txt
	$(BIN)/python -m pip check
	touch $(DEV_STAMP)

run: $(RUNTIME_STAMP)
	$(BIN)/aql-mcp serve --dev --port $(PORT)

# The layering too (docs/architecture.md, "Checking the layers"): the import-linter contracts of
# pyproject.toml, then the import graph's numbers against their thresholds; both always report, and
# either fails the target.
lint: $(DEV_STAMP)
	$(BIN)/ruff check src tests scripts
	$(BIN)/ruff format --check src tests scripts
	status=0; $(BIN)/lint-imports --no-cache --no-logo || status=1; \
	$(BIN)/python scripts/import_graph.py --max-cycles 0 --max-up-imports 1 --max-top-level 20 \
	  --max-function-lines 60 || status=1; exit $$status

typecheck: $(DEV_STAMP)
	$(BIN)/mypy

# The store tests run on SQLite and on a throwaway PostgreSQL the suite starts (scripts/postgres.sh);
# the console's browser test on Debian's chromium (scripts/chromium.sh; AQL_MCP_TEST_SKIP_BROWSER=1 skips it);
# the gateway tests on Debian's nginx (scripts/nginx.sh).
# pytest-xdist runs the files on every core (WORKERS=1 for one process); a file's tests stay on one worker,
# so its module fixtures (a server, a database) start once.
WORKERS ?= auto
unit: $(DEV_STAMP)
	scripts/postgres.sh install
	scripts/nginx.sh install
	test "$$AQL_MCP_TEST_SKIP_BROWSER" = 1 || scripts/chromium.sh install
	$(BIN)/python -m pytest -n $(WORKERS) --dist loadfile

test: lint typecheck unit

# The inner loop: lint, types and the tests that stay in-process (no server, subprocess or PostgreSQL).
check: lint typecheck
	$(BIN)/python -m pytest -n $(WORKERS) -m "not slow" -q

conformance: $(DEV_STAMP)
	scripts/conformance.sh --serve

# Load benchmark against the official SDK and a bare Starlette ceiling (bench/README.md); REPS=3 optional.
bench: $(DEV_STAMP)
	bench/run.sh

# The service under each attack of issue 27 (safety loop, listings, connect flood, exports) on SQLite and
# PostgreSQL, another tenant's calls and /health timed meanwhile; writes bench/ATTACKS.md (about 4 minutes).
bench-attacks: $(DEV_STAMP)
	$(BIN)/python bench/attacks.py --seconds $${ATTACKS_SECONDS:-10}

# Token cost of tools/list in each MCP-AQL endpoint mode against discrete tools; writes bench/TOKENS.md.
token-cost: $(DEV_STAMP)
	$(BIN)/python scripts/token_cost.py --output bench/TOKENS.md

# Build the Dockerfile with podman and run the image read-only as non-root (slow; not in `make test`).
image-test:
	scripts/image-test.sh

# Regenerate the lock files from pyproject.toml (and requirements/*.in): the one step that resolves.
lock: $(DEV_STAMP)
	scripts/lock.sh

clean:
	rm -rf $(VENV) .tools .mypy_cache .ruff_cache .pytest_cache state
