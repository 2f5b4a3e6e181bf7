#!/usr/bin/env bash
# The README's first set-up command: install what is missing, build (Release), and run
# longctx-svc on 127.0.0.1:5054 with its embedded on-disk store. Extra flags pass through
# (e.g. scripts/serve.sh --upstream http://127.0.0.1:8080).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bash scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target longctx-svc
exec build/bin/longctx-svc serve --host 127.0.0.1 --port 5054 "$@"
