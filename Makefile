# Thin wrapper over CMake/CTest. Each target installs what it needs first.
BUILD ?= build
JOBS ?= $(shell nproc)
# `make test` also runs the aarch64 (Grace) suite under qemu-user; TEST_AARCH64=0 skips it.
TEST_AARCH64 ?= 1

.PHONY: all deps build test test-aarch64 reproduce reproduce-refresh sim-check peer-check clean

all: build

deps:
	@bash ci/install_deps.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	@if [ "$(TEST_AARCH64)" != 0 ]; then $(MAKE) --no-print-directory test-aarch64; fi

# Cross-builds for aarch64 into build-aarch64/ and runs the tests under qemu-user.
test-aarch64:
	JOBS=$(JOBS) bash ci/test_aarch64.sh

# A run goes to runs/reproduce-<UTC>/ (printed at the end); the checkout stays as it was.
reproduce: build
	bash experiments/reproduce.sh

# The maintainer's refresh: the same run, rewriting the committed results/, plots/ and the
# generated blocks of README.md and REPRODUCE.md.
reproduce-refresh: build
	bash experiments/reproduce.sh --refresh

# The sim on the calibrated profile against every measured GPU configuration (harness/sweep/sim_check.py):
# fails when a row that validates the current engine is outside ±10%; rewrites results/sim_validation.json.
sim-check: build
	python3 -m harness.sweep.sim_check

# The sim's models of DeepSpeed, FSDP2 and the official code against their measured rows (within 15%).
peer-check: build
	python3 -m harness.sweep.peer_check

clean:
	rm -rf $(BUILD) build-aarch64
