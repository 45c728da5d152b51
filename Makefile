# The two commands of README.md. Each installs what is missing, configures, builds, then runs.
#   make run    the main job: generate ~2 GiB of timeseries data, sort it under small budgets, verify
#   make test   every test of the suite
PRESET ?= release
JOBS   ?= $(shell nproc)
DATA     ?= data
RUN_SIZE ?= 2GiB
SPILLWAY  = build/$(PRESET)/apps/spillway

.PHONY: all deps configure build run test asan tsan format format-check clean

all: build

deps:
	@scripts/install-deps.sh

configure: deps
	@cmake --preset $(PRESET) > /dev/null

build: configure
	@cmake --build --preset $(PRESET) -j $(JOBS)

run: build
	@if [ -d $(DATA)/timeseries ]; then \
	  echo "spillway: reusing $(DATA)/timeseries (delete it to regenerate)"; \
	else \
	  $(SPILLWAY) gen timeseries --size $(RUN_SIZE) -o $(DATA)/timeseries; \
	fi
	@$(SPILLWAY) sort $(DATA)/timeseries -o $(DATA)/sorted --by id,timestamp \
	  --device-memory 256MiB --host-memory 512MiB --spill-dir $(DATA) --overwrite --json
	@$(SPILLWAY) verify $(DATA)/sorted --by id,timestamp --against $(DATA)/timeseries

test: build
	@ctest --preset $(PRESET) -j $(JOBS)

asan:
	@$(MAKE) --no-print-directory test PRESET=asan

tsan:
	@$(MAKE) --no-print-directory test PRESET=tsan

format:
	@git ls-files '*.hpp' '*.cpp' '*.cu' | xargs clang-format -i

format-check:
	@git ls-files '*.hpp' '*.cpp' '*.cu' | xargs clang-format --dry-run --Werror

clean:
	@rm -rf build
