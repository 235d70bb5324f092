# Thin wrapper over CMake/CTest. Each target installs what it needs first.
BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: all deps build test reproduce clean

all: build

deps:
	@bash ci/install_deps.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

reproduce: build
	bash experiments/reproduce.sh

clean:
	rm -rf $(BUILD)
