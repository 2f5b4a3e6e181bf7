#!/usr/bin/env bash
# Symbol hygiene of the static libraries (issue #22, README "Layering"): an embedder links
# liblcx_*.a into its own program, so every global symbol they define must be either
#   public   - named in a header of include/longctx/ (the API), or
#   internal - prefixed lcx__ / triatt__ / eng__ (non-static but not API).
# Anything else (lcx_buf_init, triatt_x, a bare helper name) may collide with the embedder's
# own symbols. Lists the offenders (library, object, symbol) and exits 1 if there are any.
#   scripts/check-symbols.sh [BUILD_DIR]        (default: build)
#   scripts/check-symbols.sh --names [BUILD_DIR]   offenders' names only, one a line, exit 0
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
names_only=0
if [ "${1:-}" = --names ]; then names_only=1; shift; fi
build=${1:-$root/build}
shopt -s nullglob
libs=("$build"/liblcx_*.a)
if [ ${#libs[@]} -eq 0 ]; then
  echo "check-symbols: no liblcx_*.a in $build (build first)" >&2
  exit 2
fi

# Identifiers of the public headers, comments stripped (-fpreprocessed: no macro expansion,
# no #include following, so only what include/longctx/ itself says counts).
public=$(mktemp)
trap 'rm -f "$public"' EXIT
for h in "$root"/include/longctx/*.h; do
  ${CC:-cc} -x c -fpreprocessed -dD -E -P "$h" 2>/dev/null
done | grep -oE '[A-Za-z_][A-Za-z0-9_]*' | sort -u > "$public"

# Defined on purpose under another library's name: src/svc/server.c interposes these two
# libmicrohttpd functions to turn the library's own HTML error pages into JSON errors.
allowed="MHD_create_response_from_buffer MHD_queue_response"
for a in $allowed; do echo "$a"; done >> "$public"

# Defined global symbols: "lib obj symbol". Weak (W/V) and common (C) count too.
offenders=$(
  for lib in "${libs[@]}"; do
    nm -g --defined-only "$lib" 2>/dev/null | awk -v lib="$(basename "$lib")" '
      /:$/ { obj = substr($0, 1, length($0) - 1); next }
      NF >= 3 { print lib, obj, $3 }'
  done | awk '$3 !~ /^(lcx__|triatt__|eng__)/' |
  awk 'NR == FNR { pub[$1] = 1; next } !($3 in pub)' "$public" - | sort -k3,3 -k1,1
)

if [ $names_only = 1 ]; then
  [ -z "$offenders" ] || echo "$offenders" | awk '{ print $3 }' | sort -u
  exit 0
fi
if [ -n "$offenders" ]; then
  n=$(echo "$offenders" | awk '{ print $3 }' | sort -u | wc -l)
  echo "check-symbols: $n global symbol(s) neither declared in include/longctx/ nor named lcx__/triatt__/eng__:"
  echo "$offenders" | awk '{ printf "  %-28s %-24s %s\n", $1, $2, $3 }'
  exit 1
fi
echo "check-symbols: ok (${#libs[@]} libraries)"
