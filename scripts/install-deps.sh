#!/usr/bin/env bash
# Installs what spillway needs on a fresh Debian 12 machine, and nothing that is already there.
# Debian packages for the toolchain and C++ libraries; PyPI only for the comparison benchmarks.
set -euo pipefail

DEBIAN_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config clang-format
  python3-dev  # the headers the Python module (python/) is built against
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
# cmake/FindArrowFromPyarrow.cmake), DuckDB for the io interop tests, pytest for the property
# tests and numpy as their oracle (pyarrow no longer brings it along).
if ! python3 -c "import pyarrow, duckdb, pytest, numpy" 2>/dev/null; then
  echo "spillway: installing pyarrow, duckdb, pytest and numpy from PyPI"
  python3 -m pip install --quiet pyarrow duckdb pytest numpy
fi

# tpchgen-cli writes TPC-H tables as other engines read them (decimals, dates, string views) for
# the lineitem tests and benchmarks.
if ! command -v tpchgen-cli > /dev/null 2>&1; then
  echo "spillway: installing tpchgen-cli from PyPI"
  python3 -m pip install --quiet tpchgen-cli
fi

# nanobind and scikit-build-core for the Python package (python/, pyproject.toml).
if ! python3 -c "import nanobind, scikit_build_core" 2>/dev/null; then
  echo "spillway: installing nanobind and scikit-build-core from PyPI"
  python3 -m pip install --quiet nanobind scikit-build-core
fi

# RMM (the allocator of cuDF) for the optional interop tests of the CUDA backend: the librmm wheel
# for the CUDA toolkit's major version, only where nvcc is (cmake/FindRmmFromWheel.cmake).
nvcc_bin="$(command -v nvcc || true)"
if [[ -z $nvcc_bin && -x /usr/local/cuda/bin/nvcc ]]; then nvcc_bin=/usr/local/cuda/bin/nvcc; fi
if [[ -n $nvcc_bin ]]; then
  cuda_major="$("$nvcc_bin" --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')"
  if [[ $cuda_major =~ ^(12|13)$ ]] && ! python3 -c "import librmm, rapids_logger" 2>/dev/null; then
    echo "spillway: installing librmm-cu${cuda_major} from PyPI (RMM interop)"
    python3 -m pip install --quiet "librmm-cu${cuda_major}" ||
      echo "spillway: librmm-cu${cuda_major} unavailable; building without the RMM interop"
  fi
fi
