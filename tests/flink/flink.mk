# Real-Flink test tooling; included from the top-level Makefile (uses its `setup` and $(PY)).
#   make flink-jars   install the Flink jars into .cache/flink/ (pip --no-deps) and compile
#                     tests/flink/src into .cache/flink/classes-<hash>, and the older versions the
#                     compat tests use, each with tests/flink/compat/src compiled against it into
#                     .cache/flink/compat-classes-<version>-<hash>; no-op when up to date
#   make fixtures     regenerate every committed fixture under tests/fixtures/ (one JVM)
#   make fixtures-compat  regenerate tests/fixtures/compat/ (one JVM per older Flink version)
#   make fixtures-verify  restore every fixture with Flink and compare with its manifest
PY ?= .venv/bin/python
FLINK_VERSION ?= 2.3.0

.PHONY: flink-jars fixtures fixtures-compat fixtures-verify

flink-jars: setup
	$(PY) -m tests.flink.harness ensure --version $(FLINK_VERSION)
	$(PY) -m tests.flink.harness ensure-compat

fixtures: flink-jars
	$(PY) -m tests.flink.harness regenerate --out tests/fixtures

fixtures-compat: flink-jars
	$(PY) -m tests.flink.harness regenerate-compat --out tests/fixtures/compat

fixtures-verify: flink-jars
	$(PY) -m tests.flink.harness verify --fixtures tests/fixtures
