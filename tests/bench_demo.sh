#!/usr/bin/env bash
# Times `make demo` from a fresh clone, as a new user runs it: set-up (make venv), then the grid
# and its report, on CORES cores (default 2, pinned with taskset when the machine has more).
#   tests/bench_demo.sh            # clones this checkout's HEAD into a temporary folder
#   KEEP=1 tests/bench_demo.sh     # keeps the clone (and its report/) and prints where
# The demo's budget is 300 s in all on 2 idle cores. pip's download cache is used when present;
# PIP_NO_CACHE_DIR=1 measures a cold download as well. Not a test: timings belong on an idle machine.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cores=${CORES:-2}
work=$(mktemp -d)
if [ "${KEEP:-0}" = 1 ]; then echo "clone kept in $work/attnlab"; else trap 'rm -rf "$work"' EXIT; fi

pin=()
if command -v taskset >/dev/null && [ "$(nproc)" -gt "$cores" ]; then pin=(taskset -c "0-$((cores - 1))"); fi

git clone -q "$repo" "$work/attnlab"
cd "$work/attnlab"
now() { date +%s.%N; }
t0=$(now)
"${pin[@]}" make venv > "$work/venv.log" 2>&1 || { tail -20 "$work/venv.log"; exit 1; }
t1=$(now)
"${pin[@]}" make demo > "$work/demo.log" 2>&1 || { tail -20 "$work/demo.log"; exit 1; }
t2=$(now)

significant=$(.venv/bin/python -c "import pandas as pd; print(int(pd.read_csv('report/summary.csv')['worse'].sum()))")
awk -v a="$t0" -v b="$t1" -v c="$t2" -v n="$cores" -v s="$significant" 'BEGIN {
  printf "make demo from a fresh clone on %d cores: set-up %.0f s, grid and report %.0f s, total %.0f s (budget 300 s)\n",
         n, b - a, c - b, c - a
  printf "significant differences in the summary (cells worse than their column best): %d\n", s }'
