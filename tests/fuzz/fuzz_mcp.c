/* The MCP server's one-message step (src/svc/mcp.c, lcx__mcp_handle: JSON-RPC 2.0 and the
 * five tools) on any line, over a real scope manager holding one small project made at
 * start-up. "@P" in the input stands for that project's absolute path; directory walks
 * anywhere else walk nothing (walk_guard.c), so the tools never index the host's file
 * system. Every answer is one JSON-RPC object with the request's id. */
#define _GNU_SOURCE
#include "fuzz.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include "longctx/lcx.h"
#include "longctx/lcx_scope.h"
#include "svc/mcp.h"

static char *root;
extern char fz_walk_root[4096];   /* walk_guard.c */
static lcx_embedder *emb;
static lcx_scopes *scopes;

static void put(const char *rel, const char *text) { fz_put(root, rel, text); }

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    char *t = fz_tmpdir("mcp");
    if (!t) abort();
    root = realpath(t, NULL);
    free(t);
    if (!root) abort();
    snprintf(fz_walk_root, sizeof fz_walk_root, "%s", root);
    char p[PATH_MAX];
    static const char *const dirs[] = {"data", "proj", "proj/.git", "proj/src"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", root, dirs[i]);
        mkdir(p, 0700);
    }
    put("proj/src/vault.c", "/* the vault */\nint open_vault(int code) { return code == 481729; }\n");
    put("proj/src/util.py", "def parse_header(line):\n    return line.split(':')\n");
    put("proj/README.md", "# proj\nThe vault opens with the access code.\n");
    if (lcx_embedder_hash_new(0, &emb) < 0) abort();
    snprintf(p, sizeof p, "%s/data", root);
    lcx_scopes_opts so = lcx_scopes_defaults();
    so.data_dir = p;
    so.watch = false;
    so.hot_cap = 20;
    so.package_cap = 50;
    so.max_loaded = 4;
    so.max_file_bytes = 1 << 16;
    if (lcx_scopes_open(&so, emb, &scopes) < 0) abort();
    atexit(fz_cleanup);   /* libFuzzer exits through exit(): no temp folders left */
    return 0;
}

void fz_cleanup(void)
{
    lcx_scopes_close(scopes);
    scopes = NULL;
    lcx_embedder_free(emb);
    emb = NULL;
    fz_rmrf(root);
    free(root);
    root = NULL;
}

/* the line with "@P" → the project root (malloc'd, NUL-terminated) */
static char *expand(const char *s, size_t n, size_t *out_len)
{
    char proj[PATH_MAX];
    snprintf(proj, sizeof proj, "%s/proj", root);
    return fz_expand(s, n, proj, out_len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!scopes) return 0;
    size_t n = 0;
    char *line = expand((const char *)data, size, &n);
    if (!line) return 0;
    lcx_mcp m = {.scopes = scopes};
    char *ans = lcx__mcp_handle(&m, line, n);
    FZ_LOG("fuzz: mcp %.200s\n", ans ? ans : "(none)");
    if (ans) {
        FZ_CHECK(!strchr(ans, '\n'));   /* one line per answer (stdio framing) */
        cJSON *j = cJSON_Parse(ans);
        FZ_CHECK(j != NULL && cJSON_IsObject(j));
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "jsonrpc");
        FZ_CHECK(cJSON_IsString(v) && !strcmp(v->valuestring, "2.0"));
        FZ_CHECK(cJSON_HasObjectItem(j, "result") != cJSON_HasObjectItem(j, "error"));
        cJSON_Delete(j);
        free(ans);
    }
    free(line);
    return 0;
}
