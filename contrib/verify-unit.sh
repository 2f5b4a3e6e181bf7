#!/usr/bin/env bash
# Checks contrib/longctx.service with `systemd-analyze verify` (syntax, known directives,
# the ExecStart binary). The unit names the installed /usr/local/bin/longctx-svc; the copy
# checked here points at BUILD_DIR's binary instead, so the check needs no install.
#   contrib/verify-unit.sh [BUILD_DIR]   (default: build). Exit 0 when systemd-analyze is absent.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
if ! command -v systemd-analyze >/dev/null; then
  echo "verify-unit: no systemd-analyze, skipped"
  exit 0
fi
[ -x "$build/bin/longctx-svc" ] || { echo "verify-unit: build $build/bin/longctx-svc first" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sed "s|/usr/local/bin/longctx-svc|$build/bin/longctx-svc|" "$root/contrib/longctx.service" > "$tmp/longctx.service"
out=$(systemd-analyze verify "$tmp/longctx.service" 2>&1) || { echo "$out"; echo "verify-unit: FAIL"; exit 1; }
# verify exits 0 on some problems (unknown directives are warnings): any line naming the unit fails
if echo "$out" | grep -F "longctx.service" >/dev/null; then echo "$out"; echo "verify-unit: FAIL"; exit 1; fi
echo "verify-unit: ok"
