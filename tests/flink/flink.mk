# Real-Flink test tooling; included from the top-level Makefile (uses its `setup` and $(PY)).
#   make flink-jars   install the Flink jars into .cache/flink/ (pip --no-deps) and compile
#                     tests/flink/src into .cache/flink/classes-<hash>; no-op when up to date
#   make fixtures     regenerate every committed fixture under tests/fixtures/ (one JVM)
#   make fixtures-verify  restore every fixture with Flink and compare with its manifest
PY ?= .venv/bin/python
FLINK_VERSION ?= 2.3.0

.PHONY: flink-jars fixtures fixtures-verify

flink-jars: setup
	$(PY) -m tests.flink.harness ensure --version $(FLINK_VERSION)

fixtures: flink-jars
	$(PY) -m tests.flink.harness regenerate --out tests/fixtures

fixtures-verify: flink-jars
	$(PY) -m tests.flink.harness verify --fixtures tests/fixtures
