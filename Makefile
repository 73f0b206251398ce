# Two entry points: `make run` (the flagship demo) and `make test` (suite, lint, types).
# Both create the virtual environment when it is missing.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint typecheck pytest browser prometheus fpga bytecode clean

# The report tests open the HTML report in a real headless browser: Debian's chromium.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo -n)

# Everything, the extras too: the tests exercise hosts and the probe cores. Makefile: a change of
# what this rule installs installs again.
$(STAMP): pyproject.toml setup.py $(wildcard src/streamscope/core/_native*.c src/streamscope/core/_native*.h src/streamscope/model/_kernels.c src/streamscope/model/_network.c) Makefile
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,hosts,hw]'
	touch $(STAMP)

# Every streamscope process (the CLI, the monitor, a program's) imports the package from src/:
# where the environment says not to write bytecode (PYTHONDONTWRITEBYTECODE), each would compile
# it anew, some 0.4 s of CPU a monitored run. Compiled once here, it is read (only stale files are
# compiled again).
bytecode: $(STAMP)
	$(BIN)/python -m compileall -q src examples tests benchmarks >/dev/null

run: $(STAMP) bytecode
	$(BIN)/streamscope run examples/laplace.py --out laplace.duckdb --overwrite \
	  --report laplace.html -- --walks 8 --blocks 12000

lint: $(STAMP)
	$(BIN)/ruff check src tests examples benchmarks
	$(BIN)/ruff format --check src tests examples benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

browser:
	@command -v chromium >/dev/null 2>&1 || { echo "installing Debian's chromium (report tests)"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq \
	  chromium >/dev/null; } || echo "could not install chromium: the report tests will say so"

# The --metrics test scrapes a run with a real Prometheus server: Debian's prometheus.
prometheus:
	@command -v prometheus >/dev/null 2>&1 || { echo "installing Debian's prometheus (--metrics test)"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq \
	  --no-install-recommends prometheus >/dev/null; } || echo "could not install prometheus: the --metrics test will say so"

# The probe cores' cost: Debian's yosys (synthesis), nextpnr-ice40 and fpga-icestorm (place and
# route for the maximum frequency).
fpga:
	@{ command -v yosys && command -v nextpnr-ice40 && command -v icepack && command -v verilator && command -v g++; } >/dev/null 2>&1 || { \
	  echo "installing Debian's yosys, nextpnr-ice40, fpga-icestorm (probe core cost) and verilator (RTL device)"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq \
	  yosys nextpnr-ice40 fpga-icestorm verilator g++ >/dev/null; } || echo "could not install the FPGA tools: the cost and RTL tests will say so"

# Two workers, each a test file at a time (a file's runs, clusters and fixtures stay together):
# the suite is mostly CPU, and on a machine whose other cores are busy two of its processes get
# a fairer share of them than one (16 minutes beside a CPU hog on two cores, 10 with two).
pytest: $(STAMP) browser prometheus fpga bytecode
	$(BIN)/python -m pytest -q -p no:cacheprovider -n 2 --dist loadfile --durations=40; rc=$$?; if [ $$rc -eq 5 ]; then echo "no tests collected"; exit 1; fi; exit $$rc

test: lint typecheck pytest

clean:
	rm -rf $(VENV) build *.egg-info src/streamscope/core/_native*.so src/streamscope/model/_kernels*.so src/streamscope/model/_netsim*.so
