#!/bin/sh
# needle.bin (llama2.c checkpoint from train.py) -> needle.gguf, with the project's own writer:
# convert-llama2c, then the RoPE/context keys a llama2.c header cannot carry.
#   models/needle/export.sh CKPT.bin OUT.gguf [BUILD_DIR]
set -e
ckpt=$1 out=$2 bin=${3:-build}/bin
fx=${LCX_FIXTURES:-$(dirname "$0")/../../../shared/fixtures}
"$bin/longctx-engine" convert-llama2c "$ckpt" "$fx/llama2c/tok512.bin" "$out.tmp.gguf"
# n_rot and theta must match train.py's CFG
"$bin/needle-gguf-set" "$out.tmp.gguf" "$out" --u32 llama.rope.dimension_count=16 \
    --f32 llama.rope.freq_base=10000 --u32 llama.context_length=262144 \
    --str general.name=needle
rm -f "$out.tmp.gguf"
