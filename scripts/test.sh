#!/usr/bin/env bash
# The whole test suite — the README's second set-up command and what CI runs.
#   1. install missing Debian packages (scripts/deps.txt)
#   2. Release build + every ctest test (unit, golden, integration)
#   3. ASan+UBSan build + the unit, golden and integration tests again
# Extra ctest arguments pass through, e.g. scripts/test.sh -R triatt
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bash scripts/deps.sh
jobs=$(nproc)
status=0

echo "== Release build =="
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs"
echo "== npm clients for the client tests (tests/js) =="
(cd tests/js && npm ci --no-audit --no-fund --loglevel=error) || status=1
echo "== Release tests =="
(cd build && ctest --output-on-failure -j"$jobs" "$@") || status=1

if [ "${LCX_SKIP_ASAN:-0}" != 1 ]; then
  echo "== ASan+UBSan build =="
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DLCX_SANITIZE=ON >/dev/null
  cmake --build build-asan -j"$jobs"
  echo "== ASan+UBSan tests =="
  (cd build-asan && ctest --output-on-failure -j"$jobs" -LE slow "$@") || status=1
fi
exit $status
