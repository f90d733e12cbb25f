#!/usr/bin/env bash
# Times the `make demo` grid (3 cells x 3 seeds) as separate runs and as one ensemble per cell,
# one arrangement after another, in this checkout's .venv. Not a test: timings belong on an idle machine.
#   tests/bench_demo_grid.sh            # runs into a temporary folder, prints one line per arrangement
set -euo pipefail
cd "$(dirname "$0")/.."
export WANDB_MODE=offline WANDB_SILENT=true
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run() {
  local name=$1; shift
  local load start end done
  load=$(cut -d' ' -f1 /proc/loadavg)
  start=$(date +%s.%N)
  .venv/bin/python -m experiments.train -m experiment=demo trainer=cpu "$@" hydra.sweep.dir="$work/$name" \
    > "$work/$name.log" 2>&1 || true
  end=$(date +%s.%N)
  done=$(grep -l '"status": "completed"' $(find "$work/$name" -name result.json) | wc -l)
  awk -v n="$name" -v a="$start" -v b="$end" -v d="$done" -v l="$load" \
    'BEGIN { printf "%s: %.1f s, %d/9 completed, load average before %s\n", n, b - a, d, l }'
}
run separate-joblib2 seed=0,1,2 ensemble.seeds=1 hydra/launcher=joblib hydra.launcher.n_jobs=2
run ensemble-joblib2 hydra/launcher=joblib hydra.launcher.n_jobs=2
run ensemble-joblib3 hydra/launcher=joblib hydra.launcher.n_jobs=3   # what make demo runs
run ensemble-serial-2threads num_threads=2
