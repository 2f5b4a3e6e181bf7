#!/usr/bin/env bash
# The whole test suite — the README's second set-up command and what CI runs.
#   1. install missing Debian packages (scripts/deps.txt)
#   2. Release build + every ctest test (unit, golden, integration), then again with the
#      fixtures pointed at a missing folder, as in a clone without ../shared
#   3. ASan+UBSan build + the unit, golden and integration tests again, with and without fixtures
#   4. ThreadSanitizer build of the store, index and service tests (ctest label tsan) and
#      the longctx-svc they start; any TSan report fails the run (scripts/tsan.supp lists the
#      suppressions, each with its reason)
#   5. the installed libraries: cmake --install into a temporary prefix, the example engine
#      built there through pkg-config and run (examples/engine-integration/run-installed.sh);
#      contrib/longctx.service through systemd-analyze verify
#   6. the libFuzzer smoke: every target of tests/fuzz for LCX_FUZZ_SMOKE_S seconds (default 30, the issue's),
#      two at a time, in a clang-14 build (scripts/fuzz.sh --smoke; skipped without clang-14)
# Every build is -Werror (LCX_WERROR=ON). LCX_SKIP_ASAN=1 / LCX_SKIP_TSAN=1 / LCX_SKIP_FUZZ=1
# skip tiers 3 / 4 / 6.
# Extra ctest arguments pass through, e.g. scripts/test.sh -R triatt
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bash scripts/deps.sh
jobs=$(nproc)
status=0

echo "== Release build =="
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DLCX_WERROR=ON >/dev/null
cmake --build build -j"$jobs"
bash scripts/check-symbols.sh build || status=1   # internal symbols are lcx__/triatt__/eng__
echo "== npm clients for the client tests (tests/js) =="
(cd tests/js && npm ci --no-audit --no-fund --loglevel=error) || status=1
echo "== Release tests =="
(cd build && ctest --output-on-failure -j"$jobs" "$@") || status=1
echo "== Release tests as a clone without ../shared (fixture tests skip, never fail) =="
cmake -S . -B build -DLCX_FIXTURES="$root/.no-fixtures" >/dev/null
(cd build && ctest --output-on-failure -j"$jobs" "$@") || status=1
cmake -S . -B build -ULCX_FIXTURES >/dev/null

if [ "${LCX_SKIP_ASAN:-0}" != 1 ]; then
  echo "== ASan+UBSan build =="
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DLCX_SANITIZE=ON -DLCX_WERROR=ON >/dev/null
  cmake --build build-asan -j"$jobs"
  echo "== ASan+UBSan tests =="
  (cd build-asan && ctest --output-on-failure -j"$jobs" -LE slow "$@") || status=1
  echo "== ASan+UBSan tests without ../shared (the skip paths leak nothing) =="
  cmake -S . -B build-asan -DLCX_FIXTURES="$root/.no-fixtures" >/dev/null
  (cd build-asan && ctest --output-on-failure -j"$jobs" -LE slow "$@") || status=1
  cmake -S . -B build-asan -ULCX_FIXTURES >/dev/null
fi

if [ "${LCX_SKIP_TSAN:-0}" != 1 ]; then
  echo "== TSan build (store, index, service) =="
  cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Release -DLCX_TSAN=ON -DLCX_WERROR=ON >/dev/null
  cmake --build build-tsan -j"$jobs" --target lcx_tsan_tests
  echo "== TSan tests =="
  # Reports go to files (a service started by a test may have its stderr swallowed); the
  # tier fails when any report was written, whatever the tests' own verdicts.
  reports="$root/build-tsan/tsan-reports"
  rm -rf "$reports" && mkdir -p "$reports"
  (cd build-tsan && TSAN_OPTIONS="log_path=$reports/tsan suppressions=$root/scripts/tsan.supp second_deadlock_stack=1 history_size=4" \
     ctest --output-on-failure -j"$jobs" -L tsan "$@") || status=1
  if compgen -G "$reports/tsan.*" >/dev/null; then
    echo "TSan reported (scripts/tsan.supp has the accepted ones):"
    cat "$reports"/tsan.*
    status=1
  fi
fi
# The installed libraries as an engine author uses them (docs/INSTALL.md): install the
# Release build into a temporary prefix, check the exports, build examples/engine-integration
# there through pkg-config (shared and static) and run it, also against a real longctx-svc.
echo "== Installed libraries: examples/engine-integration against a temporary prefix =="
bash examples/engine-integration/run-installed.sh build || status=1
bash contrib/verify-unit.sh build || status=1      # systemd-analyze verify, when present
if [ "${LCX_SKIP_FUZZ:-0}" != 1 ]; then
  echo "== libFuzzer smoke (scripts/fuzz.sh --smoke) =="
  bash scripts/fuzz.sh --smoke "${LCX_FUZZ_SMOKE_S:-30}" -j 2 || status=1
fi
exit $status
