#!/usr/bin/env bash
# The CUDA backend's check on a GPU machine in one go: every test on the GPU, the `spillway` tool
# sorting on the GPU (`--backend cuda`, CSV in and out so that a build without Arrow runs it too),
# then the device benchmark (copy and spill bandwidth, the device sort beside CUB's), then one
# summary.
#
#   scripts/device-check.sh                  build here with the CUDA backend (needs cmake, ninja,
#                                            nvcc and the packages of scripts/install-deps.sh),
#                                            then run ctest and the benchmark
#   scripts/device-check.sh --bundle FILE    on a machine like ours (no GPU needed): build the
#                                            cuda-portable preset and pack its stripped test,
#                                            tool and benchmark binaries into FILE (.tar.gz)
#   scripts/device-check.sh --prebuilt FILE  run a bundle's binaries; the GPU machine needs only
#                                            the CUDA driver
#
# --sort-bytes N and --copy-bytes N (default 1GiB each) go to the benchmark; --cli-rows N (default
# 4000000) is the size of the tool's sort; --test-timeout S (default 240) stops a test binary that
# runs longer. Logs go to
# $SPILLWAY_CHECK_LOGS (default: $OUT when set, else a temporary directory).
set -euo pipefail
cd "$(dirname "$0")/.."

mode=build
bundle=""
bench_args=()
cli_rows=4000000
test_timeout=240  # seconds per test binary: a hung kernel must not take the whole GPU session
while [ $# -gt 0 ]; do
  case "$1" in
    --bundle) mode=bundle; bundle="$2"; shift 2 ;;
    --prebuilt) mode=prebuilt; bundle="$2"; shift 2 ;;
    --sort-bytes|--copy-bytes|--repetitions) bench_args+=("$1" "$2"); shift 2 ;;
    --cli-rows) cli_rows="$2"; shift 2 ;;
    --test-timeout) test_timeout="$2"; shift 2 ;;
    *) echo "device-check: unknown option $1" >&2; exit 2 ;;
  esac
done

start=$(date +%s)
logs="${SPILLWAY_CHECK_LOGS:-${OUT:-$(mktemp -d)}}"
mkdir -p "$logs"

# The test binaries a build registered with CTest (not stale ones left in the tree).
test_binaries() {
  ctest --test-dir "$1" --show-only=json-v1 | python3 -c '
import json, sys
seen = []
for test in json.load(sys.stdin)["tests"]:
    command = test.get("command") or []
    if command and command[0].endswith("_tests") and command[0] not in seen:
        seen.append(command[0])
print("\n".join(seen))'
}

if [ "$mode" = bundle ]; then
  cmake --preset cuda-portable > "$logs/configure.log"
  cmake --build --preset cuda-portable -j "$(nproc)" > "$logs/build.log"
  staging=$(mktemp -d)
  mkdir -p "$staging/spillway-device/tests" "$staging/spillway-device/bin"
  for binary in $(test_binaries build/cuda-portable); do
    strip -o "$staging/spillway-device/tests/$(basename "$binary")" "$binary"
  done
  strip -o "$staging/spillway-device/bin/spillway_device_bench" \
    build/cuda-portable/bench/cuda/spillway_device_bench
  strip -o "$staging/spillway-device/bin/spillway" build/cuda-portable/apps/spillway
  # The newest glibc symbol version the binaries use: a machine with an older glibc cannot run them.
  objdump -T "$staging"/spillway-device/tests/* "$staging"/spillway-device/bin/* |
    grep -o 'GLIBC_[0-9.]*' | sort -u -V | tail -1 > "$staging/spillway-device/GLIBC"
  tar -C "$staging" -czf "$bundle" spillway-device
  rm -rf "$staging"
  echo "device-check: $bundle ($(du -h "$bundle" | cut -f1)): $(tar -tzf "$bundle" | grep -c _tests) test binaries, the tool and the benchmark"
  exit 0
fi

echo "=== GPU"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null \
  || echo "nvidia-smi: not available"

passed=0; failed=0; skipped=0
failures=()
# Runs one GoogleTest binary and adds its counts.
run_tests() {
  local binary=$1 name log
  name=$(basename "$binary")
  log="$logs/$name.log"
  local status=0
  SPILLWAY_ERROR_ON_DEFAULT_RESOURCE=1 timeout -k 10 "$test_timeout" "$binary" > "$log" 2>&1 ||
    status=$?
  if [ "$status" -ne 0 ]; then
    failures+=("$name")
  fi
  if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
    echo "$name: timed out after $test_timeout s (last test started: $(grep -E '^\[ RUN' "$log" |
      tail -1 | cut -c14-))"
  fi
  local p f s
  p=$(grep -Eo '^\[  PASSED  \] [0-9]+' "$log" | grep -Eo '[0-9]+$' || echo 0)
  f=$(grep -Eo '^\[  FAILED  \] [0-9]+ test' "$log" | grep -Eo '[0-9]+' || echo 0)
  s=$(grep -Eo '^\[  SKIPPED \] [0-9]+ test' "$log" | grep -Eo '[0-9]+' || echo 0)
  passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
  echo "$name: $p passed, $f failed, $s skipped"
}

if [ "$mode" = prebuilt ]; then
  unpacked=$(mktemp -d)
  tar -C "$unpacked" -xzf "$bundle"
  root="$unpacked/spillway-device"
  needed=$(sed 's/GLIBC_//' "$root/GLIBC")
  # (awk reads every line: `head -1` made ldd die of SIGPIPE at random, which pipefail counted.)
  have=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}' || true)
  if [ -z "$have" ]; then
    have=$({ ldd --version 2>/dev/null || true; } | awk 'NR == 1 {print $NF}')
  fi
  have=${have:-0}
  if [ "$(printf '%s\n%s\n' "$needed" "$have" | sort -V | head -1)" != "$needed" ]; then
    echo "device-check: the bundle needs glibc $needed or newer; this machine has $have." >&2
    echo "Build the bundle on a machine with this glibc or older, or build here." >&2
    exit 2
  fi
  echo "=== tests (prebuilt)"
  for binary in "$root"/tests/*_tests; do
    run_tests "$binary"
  done
  bench="$root/bin/spillway_device_bench"
  cli="$root/bin/spillway"
else
  echo "=== build"
  cmake -S . -B build/device -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPILLWAY_ENABLE_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=native -DSPILLWAY_BUILD_TESTS=ON > "$logs/configure.log"
  cmake --build build/device -j "$(nproc)" > "$logs/build.log"
  echo "=== tests"
  for binary in $(test_binaries build/device); do
    run_tests "$binary"
  done
  bench=build/device/bench/cuda/spillway_device_bench
  cli=build/device/apps/spillway
fi

# The tool on the GPU: generate, sort on the device under a budget that makes it spill, verify;
# then shuffle and sort on two in-process ranks, each with a device of its own.
echo "=== spillway sort, shuffle and sort --ranks 2 with --backend cuda"
cli_status=0
cli_work=$(mktemp -d)
{
  "$cli" gen uniform --rows "$cli_rows" --files 4 --format csv -o "$cli_work/in" &&
    SPILLWAY_ERROR_ON_DEFAULT_RESOURCE=1 timeout -k 10 "$test_timeout" "$cli" sort "$cli_work/in" \
      -o "$cli_work/out" \
      --by key:desc --backend cuda \
      --output-format csv --device-memory 64MiB --host-memory 256MiB --spill-dir "$cli_work" \
      --json > "$logs/cli.json" &&
    "$cli" verify "$cli_work/out" --by key:desc --against "$cli_work/in" &&
    SPILLWAY_ERROR_ON_DEFAULT_RESOURCE=1 timeout -k 10 "$test_timeout" "$cli" shuffle \
      "$cli_work/in" -o "$cli_work/parts" --by key --partitions 16 --ranks 2 --backend cuda \
      --output-format csv --device-memory 32MiB --host-memory 128MiB --spill-dir "$cli_work" &&
    "$cli" verify "$cli_work/parts" --by key --partitions 16 --against "$cli_work/in" &&
    SPILLWAY_ERROR_ON_DEFAULT_RESOURCE=1 timeout -k 10 "$test_timeout" "$cli" sort \
      "$cli_work/in" -o "$cli_work/ranked" --by key --ranks 2 --backend cuda --output-format csv \
      --device-memory 32MiB --host-memory 128MiB --spill-dir "$cli_work" &&
    "$cli" verify "$cli_work/ranked" --by key --against "$cli_work/in"
} > "$logs/cli.log" 2>&1 || cli_status=$?
tail -3 "$logs/cli.log"
rm -rf "$cli_work"

echo "=== benchmark"
bench_status=0
timeout -k 10 420 "$bench" ${bench_args[@]+"${bench_args[@]}"} | tee "$logs/bench.log" ||
  bench_status=${PIPESTATUS[0]}

# A GPU that the tests could not use (a driver older than the CUDA runtime they carry, say) makes
# every GPU test skip: that is a failure of the check, not a pass.
gpu_unusable=""
if nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  gpu_unusable=$(grep -h -m1 -o 'needs a CUDA device: .*' "$logs"/*_tests.log 2>/dev/null | head -1 || true)
fi

echo "=== summary"
echo "tests: $passed passed, $failed failed, $skipped skipped (skipped tests need a GPU or a peer)"
if [ ${#failures[@]} -gt 0 ]; then
  echo "binaries with failures: ${failures[*]} (logs in $logs)"
fi
if [ "$cli_status" -eq 0 ]; then
  field() { grep -o "\"$1\":[^,}]*" "$logs/cli.json" | head -1 | cut -d: -f2 | tr -d '"'; }
  echo "cli: sorted $(field rows) rows on $(field backend) in $(field seconds) s, device peak" \
    "$(field device_peak) of $(field device_memory) bytes, verified; shuffled and sorted on 2" \
    "in-process ranks on the GPU, verified"
else
  echo "cli: failed (status $cli_status, log in $logs/cli.log)"
fi
grep '^summary ' "$logs/bench.log" || echo "benchmark: failed (status $bench_status)"
if [ -n "$gpu_unusable" ]; then
  echo "nvidia-smi sees a GPU but the tests could not use it: $gpu_unusable"
fi
echo "seconds: $(( $(date +%s) - start ))"
[ "$failed" -eq 0 ] && [ ${#failures[@]} -eq 0 ] && [ "$bench_status" -eq 0 ] && [ "$cli_status" -eq 0 ] &&
  [ -z "$gpu_unusable" ]
