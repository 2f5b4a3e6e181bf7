#!/usr/bin/env bash
# CI step (scripts/test.sh): install the libraries from BUILD_DIR into a temporary prefix
# and use them the way an engine author would, from a directory outside the source tree:
#   1. the shared libraries export exactly their public API: every function declared in
#      their installed headers (static inline ones aside) and no other name
#   2. every installed header compiles on its own (C11, -Wall -Wextra -Werror)
#   3. toy_engine.c built with its Makefile through pkg-config, shared and static, runs
#      offline, and (shared) against a real longctx-svc: Tier 2 writes, Tier 3 rehydrate
#   4. a liblongctx program (index + search) built through longctx.pc, shared and static
# Fails (exit 1) on the first problem. Usage: run-installed.sh BUILD_DIR  (needs the targets
# longctx_shared longctx_static triatt_shared triatt_static and, for 3, bin/longctx-svc).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=$(cd "${1:?usage: run-installed.sh BUILD_DIR}" && pwd)
tmp=$(mktemp -d)
svc_pid=
cleanup() { [ -z "$svc_pid" ] || kill "$svc_pid" 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "engine-integration: FAIL: $*" >&2; exit 1; }

prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(dirname "$(find "$prefix" -name triatt.pc)")/..
libdir=$(cd "$libdir" && pwd)
export PKG_CONFIG_PATH=$libdir/pkgconfig

# 1. exports == declared functions (+ the names of data the headers declare, none today)
for lib in longctx triatt; do
  [ -L "$libdir/lib$lib.so" ] && [ -f "$libdir/lib$lib.a" ] || fail "lib$lib.so / .a not installed"
  soname=$(readelf -d "$libdir/lib$lib.so" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
  [ -e "$libdir/$soname" ] || fail "lib$lib: SONAME $soname not installed"
  case $lib in longctx) hdrs="lcx.h lcx_err.h lcx_limits.h lcx_scope.h lcx_recipes.h" ;; triatt) hdrs="triatt.h lcx_err.h lcx_limits.h" ;; esac
  decl=$(for h in $hdrs; do cc -x c -fpreprocessed -dD -E -P "$prefix/include/longctx/$h"; done |
         grep -oE '\b(lcx|triatt)_[a-z0-9_]+\s*\(' | tr -d ' (' | sort -u)
  inl=$(for h in $hdrs; do grep -ohE 'static inline [^(]*\b(lcx|triatt)_[a-z0-9_]+\s*\(' "$prefix/include/longctx/$h" || true; done |
        grep -oE '(lcx|triatt)_[a-z0-9_]+\s*\($' | tr -d ' (' | sort -u || true)
  want=$(comm -23 <(echo "$decl") <(echo "$inl"))
  have=$(nm -D --defined-only "$libdir/lib$lib.so" | awk '$2 != "A" { sub(/@.*/, "", $3); print $3 }' | sort -u)
  missing=$(comm -23 <(echo "$want") <(echo "$have"))
  extra=$(comm -13 <(echo "$want") <(echo "$have"))
  [ -z "$missing" ] || fail "lib$lib does not export: $(echo $missing)"
  [ -z "$extra" ] || fail "lib$lib exports non-API names: $(echo $extra)"
  echo "engine-integration: lib$lib ($soname) exports its $(echo "$want" | wc -l) API functions and nothing else"
done

# 2. every installed header on its own
for h in "$prefix"/include/longctx/*.h; do
  printf '#include <longctx/%s>\n' "$(basename "$h")" | cc -std=c11 -Wall -Wextra -Werror -fsyntax-only \
    $(pkg-config --cflags longctx triatt) -x c - || fail "$(basename "$h") does not compile on its own"
done

# 3. the toy engine, from a copy outside the tree
work=$tmp/example
cp -r "$here" "$work"
rm -f "$work/toy_engine"
make -s -C "$work" >/dev/null
LD_LIBRARY_PATH=$libdir "$work/toy_engine"
LD_LIBRARY_PATH=$libdir ldd "$work/toy_engine" | grep "$libdir/libtriatt.so" >/dev/null || fail "toy_engine did not link the installed libtriatt.so"
if [ -x "$build/bin/longctx-svc" ]; then
  "$build/bin/longctx-svc" serve --host 127.0.0.1 --port 0 --data-dir "$tmp/data" 2>"$tmp/svc.log" &
  svc_pid=$!
  port=
  for _ in $(seq 100); do
    port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/svc.log")
    [ -n "$port" ] && break
    kill -0 "$svc_pid" 2>/dev/null || fail "longctx-svc exited: $(cat "$tmp/svc.log")"
    sleep 0.1
  done
  [ -n "$port" ] || fail "longctx-svc did not start"
  LONGCTX_ENDPOINT=http://127.0.0.1:$port LD_LIBRARY_PATH=$libdir "$work/toy_engine"
  kill "$svc_pid"; wait "$svc_pid" 2>/dev/null || true; svc_pid=
else
  echo "engine-integration: no $build/bin/longctx-svc: the rescue round trip is skipped"
fi
make -s -C "$work" clean
make -s -C "$work" STATIC=1 >/dev/null
! ldd "$work/toy_engine" | grep libtriatt >/dev/null || fail "STATIC=1 toy_engine still needs libtriatt.so"
"$work/toy_engine" 300

# 4. liblongctx through longctx.pc
cat > "$tmp/core.c" <<'C'
#include <longctx/lcx.h>
#include <stdio.h>
#include <string.h>
int main(void)
{
    lcx_embedder *emb; lcx_index *ix;
    if (lcx_embedder_hash_new(0, &emb) < 0 || lcx_index_new(emb, &ix) < 0) return 1;
    const char *docs[] = {"int parse_header(buf *b)", "void free_tree(node *n)", "the tapir sleeps"};
    for (int i = 0; i < 3; i++)
        if (lcx_index_add(ix, docs[i], strlen(docs[i]), NULL, NULL) < 0) return 1;
    lcx_search_opts o = lcx_search_defaults(); o.top_k = 3;
    lcx_hit hits[3];
    int n = lcx_index_search(ix, "parse header", 12, &o, hits, 3);
    printf("liblongctx: %d hits, best %lld (%s)\n", n, (long long)hits[0].id, lcx_strerror(0));
    int ok = n >= 1 && hits[0].id == 0;
    lcx_index_free(ix); lcx_embedder_free(emb);
    return ok ? 0 : 1;
}
C
cc -std=gnu11 -O2 -Wall -Wextra -Werror $(pkg-config --cflags longctx) -o "$tmp/core" "$tmp/core.c" $(pkg-config --libs longctx)
LD_LIBRARY_PATH=$libdir "$tmp/core" || fail "liblongctx (shared) search"
cc -std=gnu11 -O2 $(pkg-config --cflags longctx) -o "$tmp/core_static" "$tmp/core.c" \
   "$libdir/liblongctx.a" $(pkg-config --libs $(pkg-config --print-requires-private longctx)) -lpthread -lm
"$tmp/core_static" || fail "liblongctx (static) search"
echo "engine-integration: ok"
