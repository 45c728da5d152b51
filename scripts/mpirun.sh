#!/usr/bin/env bash
# Runs mpirun with the settings this machine needs (scripts/mpirun.env), e.g.
#   scripts/mpirun.sh -np 4 build/release/tests/shuffle/shuffle_mpi_tests
set -euo pipefail
env_file="$(dirname "$0")/mpirun.env"
while IFS= read -r line; do
  if [[ $line =~ ^[A-Za-z_][A-Za-z0-9_]*= ]]; then
    export "${line?}"
  fi
done <"$env_file"
exec mpirun "$@"
