#!/bin/bash
# /evict/write ingest over HTTP with --embed-model vs without, alternated (issue 18: >= 90 %).
#   bench/neural/ab_svc_ingest.sh BUILD_DIR MODEL [ROUNDS] [SPANS]
# MODEL: e.g. the random MiniLM-shaped GGUF of `bench_neural --write-model`. Uses bench_svc
# (the real longctx-svc on loopback); the model reaches the server via LONGCTX_EMBED_MODEL.
set -eu
B=${1:?build dir}; M=${2:?model}; R=${3:-3}; N=${4:-10000}
uptime
a=(); b=()
for r in $(seq 1 "$R"); do
  for mode in A B; do
    if [ $mode = B ]; then export LONGCTX_EMBED_MODEL="$M"; else unset LONGCTX_EMBED_MODEL; fi
    v=$("$B/bench/bench_svc" --bin "$B/bin/longctx-svc" --spans "$N" --queries 50 2>&1 |
        sed -n 's/^\/evict\/write ingest (0 → [0-9]* spans) *\([0-9.]*\) spans\/s.*/\1/p' | head -1)
    echo "round $r $mode ${v:-?} spans/s"
    if [ $mode = A ]; then a+=("$v"); else b+=("$v"); fi
  done
done
unset LONGCTX_EMBED_MODEL
med() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
ma=$(med "${a[@]}"); mb=$(med "${b[@]}")
echo "median: without $ma, with --embed-model $mb spans/s; ratio $(awk -v a="$ma" -v b="$mb" 'BEGIN{printf "%.3f", b/a}')"
uptime
