# The two commands of README.md. Each installs what is missing, configures, builds, then runs.
#   make run    the main job (for now: the memory benchmark table)
#   make test   every test of the suite
PRESET ?= release
JOBS   ?= $(shell nproc)

.PHONY: all deps configure build run test asan tsan format format-check clean

all: build

deps:
	@scripts/install-deps.sh

configure: deps
	@cmake --preset $(PRESET) > /dev/null

build: configure
	@cmake --build --preset $(PRESET) -j $(JOBS)

run: build
	@build/$(PRESET)/bench/spillway_memory_bench \
	  --benchmark_min_time=0.05 --benchmark_counters_tabular=true

test: build
	@ctest --preset $(PRESET) -j $(JOBS)

asan:
	@$(MAKE) --no-print-directory test PRESET=asan

tsan:
	@$(MAKE) --no-print-directory test PRESET=tsan

format:
	@git ls-files '*.hpp' '*.cpp' | xargs clang-format -i

format-check:
	@git ls-files '*.hpp' '*.cpp' | xargs clang-format --dry-run --Werror

clean:
	@rm -rf build
