# ivmstream: the README's two commands are `make demo` and `make test`. `make demo` runs `setup` (the
# runtime and what the demo needs); the tests, lint, benchmarks, fuzzing and chaos runs run `setup-dev`
# (setup, then the development and deployment tool chain).
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
DEV_STAMP := $(VENV)/.installed-dev-stamp
# The chart's security scanner, in a virtualenv of its own (its pins clash with the dev extra's).
CHECKOV_VERSION := 3.3.30
CHECKOV_STAMP := $(VENV)/checkov/.installed-$(CHECKOV_VERSION)
APT_GET := $(if $(filter 0,$(shell id -u)),apt-get,sudo apt-get)

.PHONY: setup setup-dev system-deps system-deps-dev demo test test-fast bench lint clean fuzz chaos

setup: system-deps $(STAMP)

setup-dev: setup system-deps-dev $(DEV_STAMP) $(CHECKOV_STAMP)

# The system packages: each target collects in `missing` only what is not installed, so both are idempotent.
INSTALL_MISSING = if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  $(APT_GET) update -qq && $(APT_GET) install -y -qq --no-install-recommends $$missing; \
	fi

# What the runtime and the demo need: redis-server, a JDK (Spark) and a C compiler with Python's
# headers (the compiled event decoder and dead-letter loop, setup.py).
system-deps:
	@missing=""; \
	command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	command -v gcc >/dev/null 2>&1 || missing="$$missing gcc"; \
	python3 -c 'import os, sysconfig; raise SystemExit(not os.path.exists(sysconfig.get_paths()["include"] + "/Python.h"))' \
	  || missing="$$missing python3-dev"; \
	command -v java >/dev/null 2>&1 || missing="$$missing openjdk-17-jre-headless"; \
	$(INSTALL_MISSING)

# What only the tests need: promtool (Debian's prometheus), for the alert rules' and dashboards' tests, and
# PostgreSQL (the results sink's, the results API's and the views dashboard's tests start their own server;
# Debian keeps its binaries under /usr/lib/postgresql/<version>/bin, off PATH).
system-deps-dev:
	@missing=""; \
	command -v promtool >/dev/null 2>&1 || missing="$$missing prometheus"; \
	ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || command -v postgres >/dev/null 2>&1 \
	  || missing="$$missing postgresql"; \
	$(INSTALL_MISSING)

# The editable install is setuptools' strict mode: a tree of links under build/ that maps shared/ onto
# ivmstream and services/ onto ivmstream.services (setup.py), which mypy and import-linter read like any
# installed package. Edits show at once; a file added or removed is linked by the next `make setup`
# (LAYOUT names the set of files, so a changed set reinstalls).
LAYOUT := $(VENV)/.layout-$(shell git ls-files -co --exclude-standard shared services 2>/dev/null | sort | cksum | tr -d ' ')

$(LAYOUT):
	@mkdir -p $(VENV) && rm -f $(VENV)/.layout-* && touch $@

$(STAMP): pyproject.toml setup.py $(wildcard shared/events/_fastjson*.[ch]) shared/runtime/_deadletters.c shared/state/_staging.c shared/_backed_map.c $(wildcard services/triangles/_*.[ch]) $(wildcard services/reservoir/_*.[ch]) $(wildcard services/vwap/_*.[ch]) $(wildcard services/fivm/_*.[ch]) $(wildcard services/reference/_*.[ch]) $(LAYOUT)
	@test -x $(PY) || python3.11 -m venv $(VENV) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e . --config-settings editable_mode=strict
	@touch $(STAMP)

# The dev and deploy extras' requirements, read from pyproject.toml and installed beside the package
# (not with `-e .[dev,deploy]`, which would build and link the package a second time).
$(DEV_STAMP): pyproject.toml | $(STAMP)
	$(PY) -c 'import tomllib; x = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]; print("\n".join(x["dev"] + x["deploy"]))' \
	  > $(VENV)/dev-requirements.txt
	$(PY) -m pip install -q -r $(VENV)/dev-requirements.txt
	@touch $(DEV_STAMP)

$(CHECKOV_STAMP):
	@test -x $(VENV)/checkov/bin/python || python3.11 -m venv $(VENV)/checkov || python3 -m venv $(VENV)/checkov
	$(VENV)/checkov/bin/python -m pip install -q 'checkov==$(CHECKOV_VERSION)'
	@touch $(CHECKOV_STAMP)

demo: setup
	$(VENV)/bin/ivmstream demo

# The tests run in TEST_WORKERS processes (pytest-xdist; 0 runs them in this one). Each worker is a session
# of its own, with its own broker, redis-server, PostgreSQL and SparkSession; a module's tests stay in one
# worker (--dist loadscope), so a module-scoped fixture is made once.
TEST_WORKERS ?= 2

test: setup-dev
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadscope --durations=25

# Everything but the tests marked slow (the demo, benchmark smoke runs, kill -9 restarts).
test-fast: setup-dev
	$(PY) -m pytest -q -m "not slow" -n $(TEST_WORKERS) --dist loadscope

# The long forms of the chaos, wire-fault and Redis outage tests (`make test` runs their short forms): every
# service's workers SIGKILLed over more rounds and run through the wire faults, a longer rebalance storm,
# Redis down for longer.
chaos: setup-dev
	IVMSTREAM_CHAOS=long $(PY) -m pytest -q tests/integration/reliability/test_chaos.py \
	  tests/integration/reliability/test_wire_faults.py tests/integration/test_redis_outages.py

bench: setup-dev
	$(PY) bench/runtime.py
	$(PY) bench/triangles.py
	$(PY) bench/vwap.py
	$(PY) bench/state.py
	$(PY) bench/backed_state.py
	$(PY) bench/fivm.py
	$(PY) bench/reservoir.py
	$(PY) bench/reservoir_updates.py
	$(PY) bench/soak.py
	$(PY) bench/emit.py
	$(PY) bench/sketches.py
	$(PY) bench/hostile.py
	$(PY) bench/change_data.py
	$(PY) bench/memory.py
	$(PY) bench/results_sinks.py
	$(PY) bench/faust.py
	$(PY) bench/sql.py
	$(PY) bench/profiles.py
	$(PY) bench/triangles_kernels.py
	$(PY) bench/native_rsjoin.py
	$(PY) bench/native_sjoin.py
	$(PY) bench/native_fivm.py
	$(PY) bench/native_vwap.py
	$(PY) bench/firstorder.py
	$(PY) bench/worker_throughput.py --profile

# Coverage-guided fuzzing (atheris, from the dev extra) of the event decoders and input readers for
# FUZZ_SECONDS; a crashing input is written to fuzz/corpus/, which the tests replay once it is fixed.
# `make test` runs the same harness for a bounded, seeded 3000 inputs (tests/unit/hostile/test_fuzz.py).
FUZZ_SECONDS ?= 600
fuzz: setup-dev
	@mkdir -p $(VENV)/fuzz-work
	$(PY) fuzz/decoders.py -max_total_time=$(FUZZ_SECONDS) -artifact_prefix=fuzz/corpus/crash- \
	  $(VENV)/fuzz-work fuzz/seeds fuzz/corpus

# The compiled modules' stubs: every .pyi beside a C extension, named as the installed module (shared/ is
# ivmstream, services/ is ivmstream.services), for stubtest to compare with the built module.
STUB_MODULES = $(shell find shared services -name '*.pyi' | sort | sed -e 's|\.pyi$$||' -e 's|^shared/|ivmstream/|' \
  -e 's|^services/|ivmstream/services/|' -e 's|/|.|g')

# Style (ruff), the house rules on imports (import-linter contracts in pyproject.toml), types (mypy) and the
# compiled modules' stubs against the built modules (mypy's stubtest, with what a stub cannot express in
# stubtest-allowlist.txt).
lint: setup-dev
	$(VENV)/bin/ruff check shared services tests bench deploy setup.py
	$(VENV)/bin/ruff format --check shared services tests bench deploy setup.py
	$(VENV)/bin/lint-imports --no-cache --no-logo
	$(VENV)/bin/mypy
	$(VENV)/bin/mypy --no-warn-unused-configs deploy
	$(VENV)/bin/stubtest --concise --allowlist stubtest-allowlist.txt $(STUB_MODULES)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache shared/events/*.so shared/runtime/*.so
