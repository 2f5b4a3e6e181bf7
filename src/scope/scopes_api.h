/* What the scope library exports on purpose to the code-retrieval pipeline
 * (src/retrieve/code.c): calls on an opaque lcx_scope that the manager hands out
 * (lcx__scopes_acquire .. lcx__scopes_release). Not a public contract (include/longctx/
 * lcx_scope.h is); the scope's state stays private to src/scope (scopes_int.h).
 * Locks: the calls below take the scope's own mutex themselves, except the lookups that
 * return pointers into the scope's tables (lcx__scope_symbol_lookup, lcx__scope_chunk_range),
 * which run between lcx__scope_lock and lcx__scope_unlock. */
#ifndef LCX_SCOPES_API_H
#define LCX_SCOPES_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "longctx/lcx.h"
#include "longctx/lcx_scope.h"
#include "scope/scope_int.h"
#include "util/util.h"

#define LCX_MAX_BOUND 16          /* scopes remembered per session */
#define LCX_CLUSTER_SPECULATE 2   /* speculative candidates indexed in the background */

typedef struct lcx_scope lcx_scope;

/* The manager (scopes.c, bindings.c) */
int lcx__scopes_acquire(lcx_scopes *m, const char *root, const char *const *mentions, int n_mentions,
                        bool package, lcx_scope_progress cb, void *ud, lcx_scope **out);
void lcx__scopes_release(lcx_scopes *m, lcx_scope *s);
void lcx__scopes_bind(lcx_scopes *m, const char *session, const char *root);
/* true when root is loaded and built (a retrieval would not index). */
bool lcx__scopes_ready(lcx_scopes *m, const char *root);
/* Builds root on a background thread (mentions copied; sentinel_tag, when not NULL,
 * replaces an empty sentinel). 0 = started or already running, LCX_ELIMIT = too many
 * jobs (the caller builds synchronously), LCX_ENOMEM. */
int lcx__scopes_index_async(lcx_scopes *m, const char *root, const char *const *mentions, int n_mentions,
                            const char *sentinel_tag);
/* Bound scopes of a session that are loaded and ready, most recent first; returns count. */
int lcx__scopes_bound_loaded(lcx_scopes *m, const char *session, char (*out)[LCX_SCOPE_PATH_MAX], int max);
/* Feeds one turn's mentioned paths to the session's cluster tracker and ends the turn:
 * a directory becomes a speculative candidate at ≥ 3 distinct files, active at ≥ 5 or
 * when a candidate gets fresh mentions on a later turn, and is dropped after 5 turns
 * without one. active (cap bytes) receives the directory of the active cluster at depth
 * ≥ 3 with most files ("" when none); spec receives up to LCX_CLUSTER_SPECULATE
 * directories that became candidates in this turn (*n_spec of them). */
void lcx__scopes_cluster_turn(lcx_scopes *m, const char *session, char *const *paths, int n_paths,
                              char *active, size_t cap, char (*spec)[LCX_SCOPE_PATH_MAX], int *n_spec);
void lcx__scopes_note_turn(lcx_scopes *m, lcx_scope *s, float confidence);
/* true while a Hot → Package rebuild of the loaded scope root runs in the background (its
 * Hot index serves meanwhile): scope_status "promoting". */
bool lcx__scopes_promoting(lcx_scopes *m, const char *root);

/* One scope (held by acquire until release) */
/* Its canonical root (fixed for the scope's life). */
const char *lcx__scope_root(const lcx_scope *s);
/* Its store: thread-safe on its own, open from acquire to release. */
lcx_store *lcx__scope_store(const lcx_scope *s);
/* Under the scope's mutex: *info (when not NULL) as lcx_scopes_info reports it, *chunks
 * (when not NULL) the store's live chunks, *promote_failed (when not NULL) whether the
 * last Hot → Package rebuild failed. */
void lcx__scope_info(lcx_scope *s, lcx_scope_info *info, uint32_t *chunks, bool *promote_failed);
/* Under the scope's mutex: appends to out the names of the first max_syms symbols of the
 * indexed file rel (each followed by a space) and the first max_text bytes of its first
 * chunk. 0, or LCX_ENOTFOUND when rel is not indexed (out unchanged). */
int lcx__scope_file_query(lcx_scope *s, const char *rel, int max_syms, size_t max_text, lcx_buf *out);
/* The scope's mutex: holds its file table and symbol index (and the pointers the two
 * lookups below return) still. No other lcx_scope__ call may be made while holding it
 * except the two lookups; store calls are fine (the store has its own locks). */
void lcx__scope_lock(lcx_scope *s);
void lcx__scope_unlock(lcx_scope *s);
/* Definitions named `name`: up to max symbols and their file paths; returns the count,
 * or max + 1 when there are more. Between lcx__scope_lock and lcx__scope_unlock. */
int lcx__scope_symbol_lookup(lcx_scope *s, const char *name, const lcx_symbol **syms,
                             const char **paths, int max);
/* The chunk ids [*first, *first + *n) of the indexed file rel; LCX_ENOTFOUND when it is not
 * indexed. Between lcx__scope_lock and lcx__scope_unlock. */
int lcx__scope_chunk_range(lcx_scope *s, const char *rel, uint32_t *first, uint32_t *n);

#endif
