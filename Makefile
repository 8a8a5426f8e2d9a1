# mcutorch: `make demo` sets everything up and runs the demo; `make test` runs the fast tests.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
JOBS   ?= 2

.PHONY: setup toolchain demo lint test test-all test-c bench fuzz header clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[npu,test]'
	touch $@

# Arm GCC + newlib + QEMU (Debian packages), clang for fuzzing and clang-format for the C style;
# installed when missing.
toolchain:
	@./tools/install_toolchain.sh

demo: setup toolchain
	$(PY) examples/digits_demo.py --board mps3-an547

# ruff (pinned in pyproject.toml, configured there); clang-format is checked by a test
lint: setup
	$(PY) -m ruff check --no-cache src tests bench examples tools

test: setup toolchain lint
	$(PY) -m pytest -q -n $(JOBS) -m "not slow"

test-all: setup toolchain
	$(PY) -m pytest -q -n $(JOBS)

# structure-aware libFuzzer over load + invoke, 64- and 32-bit side by side (FUZZ_SECONDS each),
# then the Python-vs-C replay of what it found; corpora kept in build/fuzz/long/
FUZZ_SECONDS ?= 600
fuzz: setup toolchain
	$(PY) tests/py/fuzzing.py --seconds $(FUZZ_SECONDS)

bench: setup toolchain
	$(PY) -m bench
	$(PY) -m bench.kernels --layers all
	$(PY) -m bench.kernels --layers a16w8
	$(PY) -m bench.npu
	$(PY) -m bench.zoo
	$(PY) -m bench.dispatch
	$(PY) -m bench.digits
	$(PY) -m bench.streaming
	$(PY) -m bench.attention
	$(PY) -m bench.rnn

header: setup
	$(PY) -m mcutorch.device.generate

clean:
	rm -rf $(VENV) build .pytest_cache *.mtp
