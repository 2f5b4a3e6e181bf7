#!/bin/bash
# bundle-tests.sh BUILD_DIR OUT_DIR: packs a Release build's test and bench executables, the
# binaries they start, their shared libraries (the ldd closure, glibc left out) and the
# fixtures into OUT_DIR, with OUT_DIR/run.sh, so the suite can run on another x86-64 Linux
# machine that has no compiler or -dev packages: for example an AVX-512 host, where the
# run-time-dispatched AVX-512 kernels and their scalar comparisons actually execute (the
# build machine has no AVX-512, so CI skips them). docs/benchmarks/avx512.md was made so.
#   OUT_DIR/run.sh [-j N]   runs every cmocka test executable (N at a time, default 4; not the
#                           two npm-client tests) and prints one line per test and the
#                           failures' messages; exit 1 if any failed. The numpy references
#                           need a python3 with numpy on the target.
set -euo pipefail
B=${1:?usage: bundle-tests.sh BUILD_DIR OUT_DIR}
O=${2:?usage: bundle-tests.sh BUILD_DIR OUT_DIR}
SRC=$(cd "$(dirname "$0")/.." && pwd)
FIX=$(cd "$SRC/../shared/fixtures" && pwd)
rm -rf "$O" && mkdir -p "$O"/tests "$O"/bin "$O"/bench "$O"/lib "$O"/src
find "$B/tests" -maxdepth 2 -type f -name 'test_*' -perm -u+x -exec cp {} "$O/tests/" \;
cp "$B"/bin/* "$O/bin/"
find "$B/bench" -maxdepth 1 -type f -name 'bench_*' -perm -u+x -exec cp {} "$O/bench/" \;
strip "$O"/tests/* "$O"/bin/* "$O"/bench/*
# shared libraries, except glibc's own (the target's glibc must be this build's or newer)
ldd "$O"/tests/* "$O"/bin/* "$O"/bench/* 2>/dev/null | awk '/=> \//{print $3}' | sort -u |
    grep -v -E '/(libc|libm|libresolv|libpthread|libdl|ld-linux[^/]*)\.so' | xargs -r cp -L -t "$O/lib"
cp -r "$FIX" "$O/fixtures"
# the Python (numpy) references some tests run, at their paths under LCX_SRC
(cd "$SRC" && find tests -name '*.py' -not -path '*/node_modules/*' -exec cp --parents {} "$O/src/" \;)
cat > "$O/run.sh" <<'EOF'
#!/bin/bash
# Runs the bundled test executables (see scripts/bundle-tests.sh in the longctx repo).
D=$(cd "$(dirname "$0")" && pwd)
J=4; [ "${1:-}" = -j ] && J=$2
# the references need numpy: the first python3 that has it
for LCX_PY in ${LCX_PY:-} $(command -v python3) /usr/bin/python3; do "$LCX_PY" -c 'import numpy' 2>/dev/null && break; done
export LD_LIBRARY_PATH=$D/lib LCX_FIXTURES=$D/fixtures LCX_BIN=$D/bin LCX_SRC=$D/src LCX_PY
L=$(mktemp -d)
ls "$D/tests" | xargs -P "$J" -I{} sh -c "cd $L && timeout 300 '$D/tests/{}' > '$L/{}.log' 2>&1; echo \"{} rc=\$?\"" |
    sort > "$L/summary"
cat "$L/summary"
bad=$(grep -v 'rc=0$' "$L/summary" | cut -d' ' -f1 || true)
for t in $bad; do echo "--- $t"; grep -E 'FAIL|ERROR|error|Failure' "$L/$t.log" | head -20; done
echo "$(grep -c 'rc=0$' "$L/summary") of $(wc -l < "$L/summary") passed (logs: $L)"
[ -z "$bad" ]
EOF
chmod +x "$O/run.sh"
du -sh "$O"
