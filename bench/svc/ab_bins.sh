#!/bin/sh
# Alternated A/B of two longctx-svc binaries with bench_svc (same machine, same flags):
#   bench/svc/ab_bins.sh BENCH_SVC BIN_A BIN_B ROUNDS [bench_svc flags...]
# Prints per-round lines and the medians of /healthz p50, /evict/retrieve p50/p99 and
# server CPU per retrieve, with B/A ratios.
set -eu
bench=$1 a=$2 b=$3 rounds=$4
shift 4
out=$(mktemp)
i=0
while [ "$i" -lt "$rounds" ]; do
    for side in A B; do
        if [ "$side" = A ]; then bin=$a; else bin=$b; fi
        "$bench" --bin "$bin" "$@" 2>/dev/null | awk -v s="$side" '
            /GET \/healthz/ {print s, "healthz_p50", $6}
            /6-word query/ {print s, "retrieve_p50", $8; print s, "retrieve_p99", $14; print s, "retrieve_cpu", $18}' >>"$out"
    done
    i=$((i + 1))
done
uptime
/usr/bin/python3 - "$out" <<'PY'
import sys, statistics as st
rows = [l.split() for l in open(sys.argv[1])]
keys = ["healthz_p50", "retrieve_p50", "retrieve_p99", "retrieve_cpu"]
for k in keys:
    a = [float(v) for s, kk, v in rows if s == "A" and kk == k]
    b = [float(v) for s, kk, v in rows if s == "B" and kk == k]
    if not a or not b: continue
    ma, mb = st.median(a), st.median(b)
    print(f"{k:14s} A " + " ".join(f"{x:.3f}" for x in a) + " | B " + " ".join(f"{x:.3f}" for x in b))
    print(f"{k:14s} A median {ma:8.3f} ms  B median {mb:8.3f} ms  B/A {mb/ma:6.3f}  (n={len(a)}+{len(b)})")
PY
rm -f "$out"
