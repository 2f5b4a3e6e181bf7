/* The scope chunkers and the symbol table (src/scope/chunk.c, symbols.c) on any file text:
 * byte 0 picks the file name (so the file type and language), the rest is the text. Spans
 * lie inside the text with 1-based, ordered line ranges; symbols have names and lines
 * inside the file. */
#include "fuzz.h"

#include <string.h>
#include "scope/scope_int.h"

static const char *const names[] = {
    "a.c", "a.h", "a.cc", "a.py", "a.js", "a.ts", "a.go", "a.rs", "a.java", "a.swift",
    "README.md", "notes.txt", "a.rst", "config.json", "a.yaml", "a.toml", "Makefile",
    "CMakeLists.txt", "a.sh", "Dockerfile", "a.ini", "a.xml", "a.html", "noext",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    const char *name = names[data[0] % (sizeof names / sizeof names[0])];
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    size_t lines = 1;
    for (size_t i = 0; i < len; i++) lines += text[i] == '\n';

    lcx_span *sp = NULL;
    int n = -1;
    int rc = lcx__chunk_text(text, len, lcx__file_type_of(name), &sp, &n);
    if (rc == 0) {
        FZ_CHECK(n >= 0);
        for (int i = 0; i < n; i++) {
            FZ_CHECK(sp[i].off <= len && sp[i].len <= len - sp[i].off);
            FZ_CHECK(sp[i].line_start >= 1 && sp[i].line_start <= sp[i].line_end);
            FZ_CHECK(sp[i].line_end <= lines);
            if (i) FZ_CHECK(sp[i].off >= sp[i - 1].off);
        }
    }
    free(sp);

    lcx_symbol *sy = NULL;
    int ns = lcx__symbols_extract(name, text, len, &sy);
    for (int i = 0; i < ns; i++) {
        FZ_CHECK(sy[i].name && sy[i].name[0] && sy[i].owner);
        FZ_CHECK(sy[i].line >= 1 && sy[i].line <= lines);
        FZ_CHECK(lcx__symbol_kind_name(sy[i].kind) != NULL);
    }
    free(sy);
    return 0;
}
