# statectl: `make demo` and `make test` are the whole set-up on a fresh machine.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DEMO_SAVEPOINT := tests/fixtures/hashmap_canonical_files/savepoint
DEMO_OUT := .cache/demo/rescaled-p3
DEMO_REHASHED := .cache/demo/rehashed-m256
DEMO_VALUES := tests/fixtures/values/2.3.0-hashmap-canonical/savepoint
DEMO_OLD := tests/fixtures/values/1.20.3-rocksdb-native/savepoint

.PHONY: setup demo test test-fast lint format docs bench clean

setup: $(STAMP)

# Re-installs only when the project's dependencies change.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,java]'  # java: a JDK where none is installed; test: mkdocs too
	# Bytecode now, as a wheel install has it: every command then starts without compiling.
	$(PY) -m compileall -q statectl
	touch $(STAMP)

demo: setup
	$(VENV)/bin/statectl inspect $(DEMO_SAVEPOINT)
	$(VENV)/bin/statectl rescale $(DEMO_SAVEPOINT) -o $(DEMO_OUT) --parallelism 3 --overwrite
	$(VENV)/bin/statectl inspect $(DEMO_OUT)
	$(VENV)/bin/statectl rescale $(DEMO_SAVEPOINT) -o $(DEMO_REHASHED) --max-parallelism 256 -p 2 --overwrite --no-head-start
	# Values: every state of a job with POJO, Tuple, Row, Kryo and TTL state, typed, as Parquet;
	# one state edited with Spark SQL; a Flink 1.20 savepoint checked, then upgraded, for 2.x.
	$(VENV)/bin/statectl export $(DEMO_VALUES) -o .cache/demo/values --typed --overwrite
	$(VENV)/bin/statectl transform $(DEMO_VALUES) -o .cache/demo/edited --overwrite --operator values --state string --sql "SELECT key, namespace, upper(value) AS value FROM state WHERE key <> 'k03'"
	-$(VENV)/bin/statectl upgrade $(DEMO_OLD) --check
	$(VENV)/bin/statectl upgrade $(DEMO_OLD) -o .cache/demo/upgraded --drop-unconvertible --overwrite

# Workers: whole test files (module fixtures run once), one per core, at most 4: each holds a
# SparkSession and starts Flink's JVMs (one more than the cores was slower on 2, and starved
# a Spark cluster's executors). `make test TEST_WORKERS=0`: this process alone.
TEST_WORKERS ?= $(shell $(PYTHON) -c 'import os; print(min(4, len(os.sched_getaffinity(0))))')

test: setup flink-jars
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

# Unit tests only: no JVM, no Spark.
test-fast: setup
	$(PY) -m pytest -m "not flink and not spark and not cluster"

# ruff, mypy (strict for formats/) and the layer check: imports only point down.
lint: setup
	$(VENV)/bin/ruff check statectl tests bench docs
	$(VENV)/bin/ruff format --check statectl tests bench docs
	$(VENV)/bin/mypy
	$(PY) -m pytest -q -p no:randomly tests/test_layers.py

format: setup
	$(VENV)/bin/ruff format statectl tests bench docs
	$(VENV)/bin/ruff check --fix statectl tests bench docs

# The documentation site (mkdocs.yml: README.md is its home page, docs/ the rest), offline, into
# .cache/site/ (open index.html). Strict: a broken link or anchor, or a page not in the nav, fails.
# tests/test_docs.py builds it too, so `make test` (and CI) checks it.
docs: setup
	$(PY) -m mkdocs build --strict --site-dir .cache/site

# Rescale wall time against cp -r and peak RSS, on synthetic savepoints cached in .cache/bench/
# (canonical 2 GiB and 0.5 GiB), re-hash entries/s per core (10M entries, String and Long keys),
# convert and rescale of a 1 GiB and a 4 GiB RocksDB NATIVE savepoint (memory flat), then Flink
# 2.3's restore time of a 1 M-key native savepoint and of statectl's outputs; export (JSON and
# --typed) entries/s per core
# and peak RSS of 10M-entry POJO and SQL-row savepoints beside Flink's serializers in a JVM.
bench: setup
	$(PY) -m bench.run
	$(PY) -m bench.rehash
	$(PY) -m bench.native_bench
	$(PY) -m bench.native_bench --gib 4 --no-restore  # peak RSS at 4x the state
	$(PY) -m bench.native_bench --restore 1000000
	$(PY) -m bench.export_bench
	$(PY) -m bench.writeback

clean:
	rm -rf .cache/demo .pytest_cache

include tests/flink/flink.mk
