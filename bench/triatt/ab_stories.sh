#!/bin/sh
# Real-model A/B of the eviction policy (issue 15, X5): perplexity of the trained stories260K
# model (fixtures/gguf, 512-token context) on text the model itself sampled, with eviction
# firing inside every 512-token chunk, for V1/V2/V3 x keep_high/evict_high and the random and
# recency controls, each against no eviction.
#
#   bench/triatt/ab_stories.sh BUILD_DIR [TOKENS=300000] [OUT_DIR=/tmp/longctx-ab] [CHUNKS=all]
#
# Corpus: `longctx-engine run` from an empty prompt (BOS), temperature 1, seeds 1, 2, ...,
# each sample until EOS or 511 tokens, concatenated until the text has TOKENS tokens (written
# once, reused). Perplexity: chunks of 512, batches of 32 (rounds fire between batches),
# production window 128 / prefix 32 / warmup 256 / 8 segments, divide 16 (the production 128
# would never fire inside a 512-token chunk at a 75% budget), tokens 416..510 of each chunk
# scored (evictions have started there at both budgets, so every arm scores the same tokens).
set -eu
B=${1:?build dir}
TOK=${2:-300000}
OUT=${3:-/tmp/longctx-ab}
CH=${4:+--chunks $4}
E="$B/bin/longctx-engine"
M="${LCX_FIXTURES:-$(dirname "$0")/../../../shared/fixtures}/gguf/stories260K.gguf"
mkdir -p "$OUT"
C="$OUT/corpus.txt"
if [ ! -s "$C" ]; then
    s=1
    : > "$C.tmp"
    while :; do
        "$E" run -m "$M" -p "" -n 511 -c 512 --temp 1 --seed $s >> "$C.tmp" 2>/dev/null
        printf '\n' >> "$C.tmp"
        if [ $((s % 100)) -eq 0 ]; then
            # tokens of the last 100 lines, a lower bound of the samples' (one argument stays far
            # below the 128 KiB limit); the exact count is in the perplexity output (chunks x 512)
            n=$(( ${n:-0} + $(tail -n 100 "$C.tmp" > "$OUT/last.txt"; "$E" tokenize -m "$M" -p "$(cat "$OUT/last.txt")" | wc -w) ))
            echo "corpus: $s samples, ~$n tokens" >&2
            [ "$n" -ge "$TOK" ] && break
        fi
        s=$((s + 1))
    done
    mv "$C.tmp" "$C"
fi
P="perplexity -m $M -f $C -c 512 -b 32 --ppl-first 416 --json $CH"
V="--triatt-window 128 --triatt-prefix 32 --triatt-warmup 256 --triatt-segments 8 --triatt-divide 16"
off=$($E $P)
echo "off: $off" >&2
ppl_off=$(echo "$off" | sed 's/.*"ppl":\([0-9.]*\).*/\1/')
echo "| budget | arm | ppl | vs no eviction | rounds | cells evicted | scored tokens |"
echo "|---|---|---|---|---|---|---|"
echo "| - | no eviction | $ppl_off | - | 0 | 0 | $(echo "$off" | sed 's/.*"scored":\([0-9]*\).*/\1/') |"
for bud in 384 256; do
    for arm in "v1 keep_high:0 trig keep_high" "v1 evict_high:0 trig evict_high" \
               "v2 keep_high:1 trig keep_high" "v2 evict_high:1 trig evict_high" \
               "v3 keep_high:2 trig keep_high" "v3 evict_high:2 trig evict_high" \
               "v3 random:2 random keep_high" "v3 recency:2 recency keep_high"; do
        name=${arm%%:*}
        set -- ${arm#*:}
        j=$($E $P $V --triatt-budget $bud --triatt-hybrid $1 --triatt-mode $2 --triatt-direction $3)
        echo "$bud $name: $j" >&2
        p=$(echo "$j" | sed 's/.*"ppl":\([0-9.]*\).*/\1/')
        r=$(echo "$j" | sed 's/.*"rounds":\([0-9]*\).*/\1/')
        ev=$(echo "$j" | sed 's/.*"cells_evicted":\([0-9]*\).*/\1/')
        sc=$(echo "$j" | sed 's/.*"scored":\([0-9]*\).*/\1/')
        d=$(awk "BEGIN{printf \"%+.2f %%\", ($p / $ppl_off - 1) * 100}")
        echo "| $bud ($((bud * 100 / 512)) %) | $name | $p | $d | $r | $ev | $sc |"
    done
done
