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
# More ranks than cores: bind each rank to one core (ranks r and r + cores share one), as OpenMPI
# does by itself up to two ranks; oversubscribed, it binds nothing and the ranks' threads
# migrate between the cores. Four processes on two cores, in-memory shuffle, best of six runs:
# pull 0.73-0.75 -> 0.64-0.67 s, push 0.69-0.81 -> 0.68-0.70 s, first runs 0.87-1.06 -> 0.82-0.89
# s (7843efc:docs/BENCHMARKS.md, "Four processes timed by their makespan, bound to the two
# cores").
# A binding given on the command line or in the environment wins.
ranks=0
for ((i = 1; i <= $#; i++)); do
  case "${!i}" in
    -np | -n | --np)
      next=$((i + 1))
      ranks="${!next:-0}"
      ;;
    --bind-to) ranks=0 && break ;;
  esac
done
if [[ -z ${OMPI_MCA_hwloc_base_binding_policy:-} && $ranks =~ ^[0-9]+$ ]] &&
  ((ranks > $(nproc))); then
  export OMPI_MCA_hwloc_base_binding_policy=core:overload-allowed
fi
exec mpirun "$@"
