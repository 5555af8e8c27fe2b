#!/bin/sh
# The MPI row of `make bench`: toy training throughput (TOYTASK.md model, 600
# steps, evaluations at the first and last step included) for 1 rank x 2
# threads against 2 ranks x 1 thread. Needs Open MPI's mpirun and a
# `make MPI=1` build; says so and succeeds when they are missing. Ranks are
# not bound to cores (--bind-to none): Open MPI binds each rank to one core by
# default, which would put a rank's two threads on one core.
#   bench/mpi_row.sh BUILD_DIR_OF_THE_MPI_BUILD
set -eu
build=${1:-build/mpi}
if ! command -v mpirun >/dev/null 2>&1 || [ ! -x "$build/toy_heads" ]; then
    echo "MPI row: absent (needs mpirun and $build/toy_heads: make MPI=1)"
    exit 0
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
rate() { # ranks threads
    mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$1" "$build/toy_heads" --steps 600 \
        --eval-every 100000 --threads "$2" --out "$out/r$1" 2>&1 |
        sed -n 's/.*(\([0-9.]*\) steps\/s.*/\1/p'
}
one=$(rate 1 2)
two=$(rate 2 1)
echo "MPI row, toy training throughput (600 steps, batch 32):"
echo "  1 rank  x 2 threads: $one steps/s"
echo "  2 ranks x 1 thread:  $two steps/s"
