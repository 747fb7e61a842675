# Two commands for a newcomer: `make run` and `make test`. Both create .venv on first use and
# install the project into it from pyproject.toml (nothing is installed by hand).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# Extras the tests install on top (the Hugging Face recorder's tests need `hf`, the Ray
# backend's test `ray`).
TEST_EXTRAS ?= hf,ray
comma := ,
TEST_STAMP := $(VENV)/.installed-test-$(subst $(eval) ,-,$(subst $(comma),-,$(TEST_EXTRAS)))

.PHONY: run test lint verilog area bench reproduce clean help regress mutate long validate tools firmware

help:
	@echo "make run    Verilog of every block, then the paper grid on every NPU+PIM platform: where AHASD pays"
	@echo "make test   lint the code and run every test tier (Amaranth sim, cocotb, formal)"
	@echo "make firmware  the controller run by firmware on a RISC-V core in simulation"
	@echo "make area   area (sky130) and timing (ECP5 place and route, 28 nm estimate) into docs/hardware.md"
	@echo "make reproduce  the paper's evaluation on every platform and GPU baseline, sensitivity,"
	@echo "                regime map: build/reproduce/report.md (resumable)"
	@echo "make bench  benchmarks (builds, co-simulation, cocotb edges/s, sweep runs/s, make test, ...), each beside the last run's"
	@echo "make validate  the cost model against SCALE-Sim (NPU) and Table 2's DRAM timing (PIM): docs/validation.md"
	@echo "make long   every long check (formal proofs and exhaustive runs; make test runs LONG_SAMPLE of them)"
	@echo "make regress SEEDS=N [SEED0=S] [BLOCKS=...]  the random cocotb tiers on N seeds"
	@echo "make mutate [MUTANTS=N] [MUTATE_BLOCKS=...]  mutation campaign per block (writes tests/mutation/record.json)"
	@echo "make clean  remove build outputs (keeps .venv)"

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11+ is needed, found " + sys.version)'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	touch $(STAMP)

# The main job: the Verilog of every block (linted), then the paper's grid (3 pairs x 4
# adaptive drafting algorithms x 8 modes, 1024 tokens, each pair's acceptance preset) on every
# NPU+PIM platform shipped, then per platform the ladder against npu-only and against
# operator-level synchronous NPU + PIM on the same chip (specpim-npu), the GPU-hosted modes
# apart (another power class), and a reading generated from the numbers. Resumable.
run: $(STAMP)
	$(BIN)/ahasd verilog
	$(BIN)/ahasd sweep --grid paper --platforms all --out build/sweep
	$(BIN)/ahasd report --results build/sweep

# The paper's grid on every NPU+PIM platform against every GPU baseline, the sensitivity of
# each rung's gain to every uncertain number, and a regime map; report in build/reproduce.
reproduce: $(STAMP)
	$(BIN)/ahasd reproduce --out build/reproduce

verilog: $(STAMP)
	$(BIN)/ahasd verilog

# The controller run by firmware on a RISC-V core (PicoRV32) in simulation: the firmware
# cross-compiled on the C driver (firmware/build.py), the SoC run under cocotb (Verilator,
# and Icarus when installed) against a drafting trace; the measured cycles printed.
firmware: $(STAMP) tools
	$(BIN)/pytest -p no:xdist -q -s -m "not long" tests/firmware

area: $(STAMP)
	$(BIN)/ahasd area --doc docs/hardware.md
	$(BIN)/ahasd timing --doc docs/hardware.md

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# Debian's tools some tests use besides the venv: Icarus (the 4-state check of the delivered
# Verilog, the firmware's SoC), the RISC-V GCC (the C driver compiled for rv32, the
# firmware; freestanding, so no C library), clang (the C driver compiled by a second
# compiler, for the host and for rv32; about 6 s to install here). Installed with
# apt-get when missing and apt-get is there (CI starts from a fresh machine, as root);
# elsewhere the tests that need them skip and say why.
SYSTEM_TOOLS := iverilog gcc-riscv64-unknown-elf clang
tools:
	@missing=""; for package in $(SYSTEM_TOOLS); do \
		dpkg-query -W -f='$${Status}' $$package 2>/dev/null | grep -q "ok installed" \
			|| missing="$$missing $$package"; \
	done; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
		echo "installing Debian's$$missing"; \
		(apt-get install -y -q --no-install-recommends $$missing >/dev/null 2>&1 \
		 || (apt-get update -q >/dev/null 2>&1 && \
		     apt-get install -y -q --no-install-recommends $$missing >/dev/null 2>&1)) \
		|| echo "could not install$$missing: the tests that need them skip"; \
	else \
		echo "not installed:$$missing (no apt-get as root): the tests that need them skip"; \
	fi

$(TEST_STAMP): $(STAMP)
	$(if $(strip $(TEST_EXTRAS)),$(BIN)/python -m pip install --quiet -e ".[$(TEST_EXTRAS)]")
	touch $(TEST_STAMP)

# Two workers: the cocotb and formal tiers are single-threaded subprocesses.
PYTEST_WORKERS ?= 2

# After the suite: the seeded tests (marker `seeded`) of the controller blocks' fast tiers on
# two fresh seeds more (printed; replay with AHASD_SEED), then a mutant sample: per block
# MUTATION_SAMPLE of the mutants the recorded campaign killed (tests/mutation/record.json),
# each run through the tier that killed it; one that survives now fails the test
# (docs/verification.md).
# The suite itself skips the second and third seeds of the random cocotb tests (`make
# regress` runs them) and runs LONG_SAMPLE of the long checks (marked `long`: formal proofs
# and exhaustive runs of minutes each; `make long` runs all), chosen by a fresh seed that
# pytest's header prints (tests/conftest.py).
MUTATION_SAMPLE ?= 2
LONG_SAMPLE ?= 1
test: lint $(TEST_STAMP) tools
	AHASD_LONG_SAMPLE=$(LONG_SAMPLE) $(BIN)/pytest -n $(PYTEST_WORKERS) -m "not extra_seed"
	$(BIN)/python tests/harness/regress.py --seeds 2 --tier fast --blocks edc tvc queues gtsu \
		--workers $(PYTEST_WORKERS)
	$(BIN)/python tests/mutation/run.py --sample $(MUTATION_SAMPLE) --first-kill \
		--blocks edc tvc queues gtsu --count $(MUTANTS) --seed $(MUTATION_SEED) \
		--jobs $(PYTEST_WORKERS) --report build/mutation/sample.md

# Every long check (the ones `make test` samples).
long: $(TEST_STAMP)
	$(BIN)/pytest -n $(PYTEST_WORKERS) -m long

# The random cocotb tiers on SEEDS seeds: fresh ones (printed) unless SEED0 is given; each
# failure is listed with the command that replays it. QUICK=1 shortens every testbench run.
SEEDS ?= 5
SEED0 ?=
BLOCKS ?= edc tvc queues gtsu aau top axi_lite
QUICK ?=
regress: $(TEST_STAMP)
	$(BIN)/python tests/harness/regress.py --seeds $(SEEDS) $(if $(SEED0),--seed0 $(SEED0)) \
		--blocks $(BLOCKS) $(if $(QUICK),--quick) --workers $(PYTEST_WORKERS)

# Mutation testing (tests/mutation/run.py): MUTANTS per block, each against the block's
# cocotb testbench and its formal checks (FIRST_KILL=1: formal only where cocotb missed);
# the table goes to build/mutation/report.md, the outcome to tests/mutation/record.json.
MUTANTS ?= 40
MUTATION_SEED ?= 1
MUTATE_BLOCKS ?= edc tvc queues gtsu aau top
FIRST_KILL ?=
mutate: $(TEST_STAMP)
	$(BIN)/python tests/mutation/run.py --count $(MUTANTS) --seed $(MUTATION_SEED) \
		--blocks $(MUTATE_BLOCKS) $(if $(FIRST_KILL),--first-kill) \
		--report build/mutation/report.md

bench: $(STAMP)
	$(BIN)/python bench/run_all.py

# The cost model checked: the NPU's passes against SCALE-Sim, the PIM's rate from a command
# schedule of Table 2's DRAM timing; tables into docs/validation.md. SCALE-Sim gets a venv of
# its own (scalesim 3.0.0 fails on numpy 2).
SCALESIM_VENV := build/scalesim-venv
$(SCALESIM_VENV)/.installed:
	test -x $(SCALESIM_VENV)/bin/python || $(PYTHON) -m venv $(SCALESIM_VENV)
	$(SCALESIM_VENV)/bin/python -m pip install --quiet "scalesim==3.0.0" "numpy<2"
	touch $@

validate: $(STAMP) $(SCALESIM_VENV)/.installed
	$(BIN)/python bench/validate/validate.py --scalesim $(SCALESIM_VENV)/bin/python

clean:
	rm -rf build
