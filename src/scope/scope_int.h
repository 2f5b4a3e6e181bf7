/* Internal pieces of src/scope: .gitignore engine, walker, chunkers, symbol table.
 * Not part of the public contract (include/longctx/lcx_scope.h); tests use them directly. */
#ifndef LCX_SCOPE_INT_H
#define LCX_SCOPE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include "longctx/lcx_scope.h"

/* ---- wildmatch (ignore.c): git's wildmatch with WM_PATHNAME: '*' and '?' never match
 * '/', "**" between slashes (or at either end) matches any number of directories,
 * [...] classes with ! or ^ negation, ranges and [:alpha:]-style names, '\' escapes. */
bool lcx__wildmatch(const char *pat, const char *text);
/* dowild calls one match may make before it counts as no match (default 2^20, ignore.c).
 * Only the paths fuzz target lowers it: its corpus is full of patterns that run to the
 * budget, and a smaller one reaches the same code at a fraction of the cost per input. */
extern long lcx__wild_steps;

/* ---- .gitignore rules of one directory (ignore.c) */
typedef struct lcx_ignore lcx_ignore;
/* Parses .gitignore text for directory base (scope-relative, "" for the root; copied).
 * Malformed lines are ignored like git does. Returns 0 or LCX_ENOMEM. */
int lcx__ignore_parse(const char *text, size_t len, const char *base, lcx_ignore **out);
void lcx__ignore_free(lcx_ignore *ig);
/* Decision of this file's rules for relpath (scope-relative): +1 ignored, -1 re-included
 * by a negation, 0 no rule matched. The last matching line wins. */
int lcx__ignore_match(const lcx_ignore *ig, const char *relpath, bool is_dir);

/* ---- walker (walk.c) */
typedef struct {
    uint64_t files, bytes;
    uint32_t skipped_ignored, skipped_skiplist, skipped_secret, skipped_symlink,
             skipped_lock, skipped_large, skipped_special, skipped_unreadable;
    uint32_t dirs;
} lcx_walk_stats;

/* Called per candidate file (already filtered by name, skip list, secrets, .gitignore,
 * symlink, size); rel is scope-relative. Non-zero return stops the walk (returned). */
typedef int (*lcx_walk_file_cb)(const char *rel, const struct stat *st, void *ud);
/* Called per directory entered (rel "" = root); may be NULL. */
typedef int (*lcx_walk_dir_cb)(const char *rel, void *ud);

typedef struct {
    uint64_t max_file_bytes;     /* default 5 MiB */
    bool recursive;              /* descend below start */
} lcx_walk_opts;

/* Walks root/start (start scope-relative, "" = root), loading .gitignore files of every
 * level from the root down (and .git/info/exclude). Never follows symlinks. */
int lcx__walk(const char *root, const char *start, const lcx_walk_opts *o,
             lcx_walk_file_cb fcb, lcx_walk_dir_cb dcb, void *ud, lcx_walk_stats *st);
/* Name-level filters (no I/O): directory names skipped by the skip list or dot-dir rule,
 * lockfiles, secret names. */
bool lcx__walk_skip_dir(const char *name);
bool lcx__walk_is_lockfile(const char *name);
/* true when the whole (scope-relative or absolute) path is ignored by the .gitignore
 * files between root and it (used by the watcher for single files). */
bool lcx__walk_path_ignored(const char *root, const char *rel, bool is_dir);
/* Test hook: true makes the walker use its component-by-component fallback instead of
 * openat2 (what kernels before 5.6 get), so both ways are tested. */
extern bool lcx__walk_no_openat2;

/* Reads candidate file rel (scope-relative) of the scope at root for indexing: opened
 * beneath root without following any symlink on the way (a link anywhere in rel:
 * LCX_ESTATE, never read), ≤ max bytes, binary sniff (NUL or invalid UTF-8 in the first
 * 8 KB), invalid UTF-8 later replaced by '?'. Returns 0, LCX_ELIMIT (too large),
 * LCX_ENOTSUP (binary), LCX_ENOTFOUND, LCX_ESTATE (symlink), LCX_EIO (unreadable). */
int lcx__scope_read_file(const char *root, const char *rel, uint64_t max, char **out, size_t *out_len);

/* ---- chunkers (chunk.c) */
typedef struct {
    uint32_t line_start, line_end;   /* 1-based inclusive */
    size_t off, len;                 /* byte range in the file text */
} lcx_span;
#define LCX_CHUNK_LINES 50
#define LCX_CHUNK_OVERLAP 5
lcx_file_type lcx__file_type_of(const char *relpath);
/* Splits text by file type (code windows, prose paragraphs, config whole/windows).
 * *out malloc'd (caller frees), *n spans. Empty/whitespace-only text → 0 spans. */
int lcx__chunk_text(const char *text, size_t len, lcx_file_type ft, lcx_span **out, int *n);

/* ---- symbols (symbols.c) */
enum { LCX_SYM_FUNC = 1, LCX_SYM_CLASS, LCX_SYM_STRUCT, LCX_SYM_METHOD, LCX_SYM_TYPE,
       LCX_SYM_MACRO, LCX_SYM_ENUM, LCX_SYM_VAR };
/* Working form while extracting / parsing (fixed buffers). */
typedef struct {
    char name[64];           /* identifier (longer names are skipped) */
    char owner[64];          /* enclosing class/impl/receiver when known, else "" */
    uint32_t line;           /* 1-based */
    uint8_t kind;
} lcx_symtmp;
/* Stored form: 24 bytes + the strings (a 136-byte fixed record cost 65 MB for the 479k
 * definitions of /usr/include). An array of these is ONE allocation: the n records
 * followed by their NUL-terminated strings; free() it. */
typedef struct {
    const char *name;
    const char *owner;       /* "" when unknown */
    uint32_t line;
    uint8_t kind;
} lcx_symbol;
/* Packs n working symbols into one block (see above). n == 0 → *out NULL. */
int lcx__symbols_pack(const lcx_symtmp *v, int n, lcx_symbol **out);
/* Language from the path's extension; 0 symbols when the language is unknown.
 * *out: one block (free() it). Returns the count or LCX_ENOMEM. */
int lcx__symbols_extract(const char *relpath, const char *text, size_t len, lcx_symbol **out);
const char *lcx__symbol_kind_name(int kind);

/* ---- detection (detect.c) */
/* lcx_scope_detect with any_abs: every absolute path counts, not only those under the
 * reference's top-level directories (a caller's own file path, mentions inside an
 * explicit scope). */
int lcx__scope_detect(const char *text, size_t len, const char *default_scope, bool any_abs,
                      lcx_scope_detection *out);

/* Nearest project root above dir by sentinel (SPEC §3 order); false when none. */
bool lcx__scope_root_of(const char *dir, char *root);
/* realpath without requiring existence (explicit_scope): relative paths against the
 * process's cwd, '.'/'..' and symlinks of the existing prefix resolved, no trailing '/'.
 * 0, LCX_EINVAL (empty), LCX_ELIMIT (too long), LCX_EIO (no cwd). */
int lcx__scope_canon_loose(const char *path, char *out, size_t cap);

/* ---- shared helpers */
/* Whether the path component list of p contains a forbidden directory name. */
bool lcx__scope_forbidden_component(const char *p);

#endif
