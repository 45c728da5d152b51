#!/usr/bin/env bash
# Installs what spillway needs on a fresh Debian 12 machine, and nothing that is already there.
# Debian packages for the toolchain and C++ libraries; PyPI only for the comparison benchmarks.
set -euo pipefail

DEBIAN_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config clang-format
  libgtest-dev libgmock-dev libbenchmark-dev
  libfmt-dev libspdlog-dev libcli11-dev nlohmann-json3-dev
  libzstd-dev liblz4-dev libxxhash-dev
  libopenmpi-dev openmpi-bin  # the MPI communicator and its multi-process tests
  chromium  # headless, for the run report test (tests/runtime); skipped when absent
)

missing=()
for package in "${DEBIAN_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if ((${#missing[@]} > 0)); then
  echo "spillway: installing Debian packages: ${missing[*]}"
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Arrow C++ for Parquet and Arrow IPC (the pyarrow wheel's headers and libraries, found by
# cmake/FindArrowFromPyarrow.cmake) and DuckDB for the io interop tests.
if ! python3 -c "import pyarrow, duckdb" 2>/dev/null; then
  echo "spillway: installing pyarrow and duckdb from PyPI"
  python3 -m pip install --quiet pyarrow duckdb
fi
