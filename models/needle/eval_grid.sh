#!/bin/sh
# Held-out answer accuracy through the engine (needle-eval), no eviction: one line per
# (size, depth) cell.   models/needle/eval_grid.sh MODEL.gguf "1024 2048 ..." N [BUILD_DIR] [SEED]
set -e
model=$1 sizes=$2 n=$3 bin=${4:-build}/bin seed=${5:-1}
here=$(dirname "$0")
tmp=$(mktemp -d)
for size in $sizes; do
  for depth in 0.1 0.5 0.9; do
    /usr/bin/python3 "$here/needle_data.py" eval --seed "$seed" --size "$size" --depth "$depth" --n "$n" > "$tmp/c.jsonl"
    "$bin/needle-eval" "$model" "$tmp/c.jsonl" > "$tmp/r.jsonl"
    /usr/bin/python3 - "$tmp/r.jsonl" "$size" "$depth" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
cases = [r for r in rows if "summary" not in r]
ok = sum(r["ok"] for r in cases)
miss = [(r["answer"], r["reply"]) for r in cases if not r["ok"]]
print("size %s depth %s tokens %d: %d/%d  prefill median %.2f s  misses %s" % (
    sys.argv[2], sys.argv[3], cases[0]["tokens"], ok, len(cases),
    statistics.median(r["prefill_s"] for r in cases), miss), flush=True)
PY
  done
done
rm -rf "$tmp"
