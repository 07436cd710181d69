#!/bin/bash
# The hourly refresh-serving increment, a baseline tree and this one alternating (issue 34):
#   bash bench/increment_ab.sh BASE_REF WAREHOUSE [RUNS [NAME]] > log
# Each tree first refreshes WAREHOUSE with its last hour removed (`bench_scale.hour_earlier`,
# as bench_scale's increment does), so its day parts and serving store are its own; then RUNS times each tree in turn
# refreshes the whole warehouse from a copy of that state. Alternating runs from one snapshot
# resolve a second where one pair of bench_scale runs does not (its hour-earlier full refresh
# moves the machine's speed between them). The log's lines: "<tree> run <i>: wall cpu peak".
# With NAME, the log is also written to bench/results/NAME.json (`bench.increment_ab_result`).
# CONFIG=FILE: every refresh (both trees) runs with that settings file (e.g. a warehouse.memory_limit).
set -euo pipefail
BASE=$1; SRC=$(realpath "$2"); RUNS=${3:-3}; NAME=${4:-}; PY=${PYTHON:-python}; HERE=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d); trap 'rm -rf "$WORK"; git -C "$HERE" worktree remove --force "$WORK/base-tree" 2>/dev/null || true' EXIT
git -C "$HERE" worktree add -q "$WORK/base-tree" "$BASE"
tree_of() { if [ "$1" = base ]; then echo "$WORK/base-tree"; else echo "$HERE"; fi; }
migrate() {  # the tree's snapshot to its schema, untimed, as its first writer would (v18: 0274);
  # run from the snapshot's folder: `python -c` puts the working folder first on the path
  (cd "$WORK/snap-$1" && PYTHONPATH=$(tree_of "$1") "$PY" -c 'from gpuledger.warehouse import Warehouse
Warehouse.open("w.duckdb").close()')
}
for t in base ours; do
  mkdir -p "$WORK/snap-$t"
  PYTHONPATH=$HERE "$PY" -c 'import sys; from pathlib import Path; from bench.bench_scale import hour_earlier
hour_earlier(Path(sys.argv[1]), Path(sys.argv[2]))' "$SRC" "$WORK/snap-$t/w.duckdb"
  migrate "$t"
  (cd "$WORK/snap-$t" && PYTHONPATH=$(tree_of $t) "$PY" -m gpuledger ${CONFIG:+--config "$CONFIG"} --warehouse w.duckdb refresh-serving --force -o json > /dev/null)
  cp "$SRC" "$WORK/snap-$t/w.duckdb"
  migrate "$t"
done
for i in $(seq "$RUNS"); do  # the timed runs, their lines also kept in $WORK/log
  for t in base ours; do
    rm -rf "$WORK/run"; cp -r "$WORK/snap-$t" "$WORK/run"
    (cd "$WORK/run" && PYTHONPATH=$(tree_of $t) /usr/bin/time -f "$t run $i: %e s %U+%S cpu %M KB" \
      "$PY" -m gpuledger ${CONFIG:+--config "$CONFIG"} --warehouse w.duckdb refresh-serving --force -o json > inc.json 2> time.txt
     tail -1 time.txt; echo "  load $(cut -d' ' -f1-3 /proc/loadavg) results $(tr -d '\n' < inc.json)") \
      | tee -a "$WORK/log"
  done
done
if [ -n "$NAME" ]; then
  (cd "$HERE" && "$PY" -m bench.increment_ab_result "$WORK/log" "$NAME" "$(git rev-parse --short "$BASE")" > /dev/null)
fi
