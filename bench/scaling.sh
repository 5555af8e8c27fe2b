#!/bin/sh
# bench/scaling.sh [BUILD] [PYTHON]: how the GPT training steps scale with
# threads on this machine, against the PyTorch it has: bench --scaling (the
# 4x4, 6x6 and GPT-2 small steps at 1, 2, 4, ... threads up to every CPU, a
# few runs each, and the same steps' phases timed apart, on the CPU's best
# kernel set). BUILD holds bench (default build); PYTHON is the Python with
# torch (default python3, looked for on PATH). Writes scaling-HOST-DATE.txt
# (the printout) and .csv in the current folder; copy both into docs/bench/ to
# keep them.
set -eu
build=${1:-build}
python=${2:-python3}
[ -x "$build/bench" ] || { echo "scaling: no $build/bench (make $build/bench)" >&2; exit 2; }
worker=$(dirname "$0")/torch_worker.py
name="scaling-$(hostname)-$(date -u +%Y-%m-%d-%H%M)"
status=0
"$build/bench" --scaling --python "$python" --torch-worker "$worker" --csv "$name.csv" \
    >"$name.txt" || status=$?
cat "$name.txt"
[ "$status" = 0 ] || { echo "scaling: bench failed (exit $status); see $name.txt" >&2; exit "$status"; }
echo "scaling: wrote $name.txt and $name.csv"
