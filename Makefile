# MQCloud: two commands to know — `make run` and `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help

UV := $(shell command -v uv 2>/dev/null || echo $(HOME)/.local/bin/uv)
# Every broker, controller and mqctl the tests start is a new Python process: with bytecode caching off
# (some machines set PYTHONDONTWRITEBYTECODE=1) each compiled ~400 modules from source first, about a
# second per start. Cached .pyc files go to the usual (git-ignored) __pycache__ directories.
unexport PYTHONDONTWRITEBYTECODE
DATA_DIR ?= .data
CLUSTER_DIR ?= .cluster
PYTEST_ARGS ?=
# pytest-xdist workers for make test / test-fast (0 runs in one process). One more than this machine's
# 2 cores: most tests wait on processes and sockets, and a third worker fills those waits (make test
# took 21.5 min with 3, 24.7 min with 2, back to back on the same VM; docs/development.md).
TEST_WORKERS ?= 3
SOAK_DURATION ?= 30m
# make bench: each harness's short mode by default (BENCH_FLAGS= for the full runs); BENCH=a,b for some
BENCH_FLAGS ?= --quick
BENCH ?=

.PHONY: help uv venv run test test-fast lint format proto bench soak clean cluster-up cluster-down

help:
	@echo "make run        set up and start the standalone stack (control plane :8000, Celery, broker :8081)"
	@echo "make test       the whole test suite against a throwaway PostgreSQL"
	@echo "make test-fast  unit tier only (-m 'not slow and not integration')"
	@echo "make lint       ruff and mypy"
	@echo "make proto      regenerate gRPC stubs from proto/ into mqcloud/"
	@echo "make bench      run the benchmark harnesses in bench/ (BENCH=store_bench for one); regenerate docs/benchmarks.md"
	@echo "make cluster-up the production topology as processes on loopback (cluster-down stops it)"
	@echo "make soak       load + random SIGKILL/SIGSTOP on that topology for SOAK_DURATION (30m); docs/reliability.md"

uv:
	@command -v uv >/dev/null 2>&1 || [ -x "$(HOME)/.local/bin/uv" ] || { \
	  echo "installing uv from PyPI"; \
	  python3 -m pip install --user --quiet uv 2>/dev/null || python3 -m pip install --user --quiet --break-system-packages uv; }

venv: uv
	@$(UV) sync --locked --quiet

run: venv
	$(UV) run mqctl standalone --data-dir $(DATA_DIR)

# Two passes: everything in parallel but the tests that compare timings (marker serial), then those
# alone on the machine. Exit status 5 means a pass selected nothing (PYTEST_ARGS picked other tests).
test: venv
	scripts/with_postgres.sh $(UV) run pytest -n $(TEST_WORKERS) --dist loadgroup -m "not serial" $(PYTEST_ARGS) || [ $$? -eq 5 ]
	scripts/with_postgres.sh $(UV) run pytest -m serial $(PYTEST_ARGS) || [ $$? -eq 5 ]

test-fast: venv
	$(UV) run pytest -n $(TEST_WORKERS) --dist loadgroup -m "not slow and not integration" $(PYTEST_ARGS)

lint: venv
	$(UV) run ruff check .
	$(UV) run ruff format --check .
	$(UV) run mypy .

format: venv
	$(UV) run ruff check --fix .
	$(UV) run ruff format .

proto: venv
	$(UV) run python scripts/gen_proto.py

bench: venv
	$(UV) run python -m bench.run_all $(BENCH_FLAGS) $(if $(BENCH),--only $(BENCH))

soak: venv
	$(UV) run python scripts/soak.py --duration $(SOAK_DURATION) --report docs/reliability.md

cluster-up: venv
	$(UV) run python scripts/cluster_local.py up --state-dir $(CLUSTER_DIR)

cluster-down: venv
	$(UV) run python scripts/cluster_local.py down --state-dir $(CLUSTER_DIR)

clean:
	rm -rf .venv .mypy_cache .ruff_cache .pytest_cache
