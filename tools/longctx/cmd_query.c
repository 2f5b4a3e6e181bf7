/* longctx query PATH TEXT [-k K] [--json] — retrieve code from the project at PATH (indexed
 * on first use, reloaded from the persistent store afterwards). Prints the SPEC §2 splice
 * text, or with --json the /retrieve JSON chunks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cmds.h"
#include "longctx/lcx_scope.h"
#include "longctx/lcx_svc.h"
#include "util/util.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: longctx query PATH TEXT [-k K] [--json] [--data-dir DIR]\n\n"
               "  -k K        chunks to return, " LCX_TOP_K_RANGE " (default 8)\n"
               "  --json      print {\"chunks\":[{text,file_path,start_line,end_line,file_type,score}],…}\n"
               "  --data-dir  index location (default: $LONGCTX_DATA_DIR, else the longctx-svc data dir)\n");
}

static const char *ft_name(lcx_file_type t)
{
    return t == LCX_FT_CODE ? "code" : t == LCX_FT_PROSE ? "prose" : t == LCX_FT_CONFIG ? "config" : "none";
}

int cmd_query(int argc, char **argv)
{
    lcx_svc_config cfg;
    lcx_svc_config_defaults(&cfg);
    const char *path = NULL, *text = NULL;
    int k = 8;
    bool json = false;
    if (lcx_svc_config_nn_env(&cfg, stderr)) return 2;
    for (int i = 1; i < argc; i++) {
        int nr = lcx_svc_config_nn_flag(&cfg, argc, argv, &i, stderr);
        if (nr < 0) return 2;
        if (nr) continue;
        if (!strcmp(argv[i], "-k") && i + 1 < argc) {
            char *e;
            long v = strtol(argv[++i], &e, 10);
            if (*e || v < 1 || v > LCX_TOP_K_MAX) { fprintf(stderr, "longctx query: -k must be " LCX_TOP_K_RANGE "\n"); return 2; }
            k = (int)v;
        } else if (!strcmp(argv[i], "--json")) {
            json = true;
        } else if (!strcmp(argv[i], "--data-dir") && i + 1 < argc) {
            snprintf(cfg.data_dir, sizeof cfg.data_dir, "%s", argv[++i]);
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!path) {
            path = argv[i];
        } else if (!text) {
            text = argv[i];
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (!path || !text) { usage(stderr); return 2; }
    char abs[LCX_SCOPE_PATH_MAX * 2];
    if (path[0] != '/') {
        char cwd[LCX_SCOPE_PATH_MAX];
        if (!getcwd(cwd, sizeof cwd)) { perror("getcwd"); return 1; }
        snprintf(abs, sizeof abs, "%s/%s", cwd, path);
    } else {
        snprintf(abs, sizeof abs, "%s", path);
    }
    cmd_scopes sc;
    if (cmd_scopes_open("query", &cfg, false, &sc) < 0) return 1;
    lcx_code_request rq = lcx_code_request_init();
    rq.explicit_scope = abs;
    rq.query = text;
    rq.query_len = strlen(text);
    rq.top_k = k;
    lcx_code_result res;
    int rc = lcx_code_retrieve(sc.scopes, &rq, &res);
    if (rc) {
        fprintf(stderr, "longctx query: %s: %s\n", res.err_code ? res.err_code : "error", res.err_msg);
    } else if (json) {
        lcx_buf b = {0};
        lcx__buf_puts(&b, "{\"chunks\":[");
        for (int i = 0; i < res.n_hits; i++) {
            const lcx_code_hit *h = &res.hits[i];
            lcx__buf_puts(&b, i ? ",{\"text\":" : "{\"text\":");
            lcx__buf_json_str(&b, h->text, strlen(h->text));
            lcx__buf_puts(&b, ",\"file_path\":");
            lcx__buf_json_str(&b, h->file_path, strlen(h->file_path));
            lcx__buf_printf(&b, ",\"start_line\":%u,\"end_line\":%u,\"file_type\":\"%s\",\"score\":", h->start_line,
                           h->end_line, ft_name(h->file_type));
            lcx__buf_json_num(&b, h->score);
            lcx__buf_printf(&b, ",\"symbol_hit\":%s}", h->symbol_hit ? "true" : "false");
        }
        lcx__buf_puts(&b, "],\"scope_path\":");
        lcx__buf_json_str(&b, res.scope.scope_path, strlen(res.scope.scope_path));
        lcx__buf_printf(&b, ",\"scope_hash\":\"%s\",\"scope_status\":\"%s\",\"scope_sentinel\":", res.scope.scope_hash,
                       res.scope.status);
        lcx__buf_json_str(&b, res.scope.sentinel, strlen(res.scope.sentinel));
        lcx__buf_puts(&b, ",\"confidence\":");
        lcx__buf_json_num(&b, res.confidence);
        lcx__buf_puts(&b, "}\n");
        fwrite(b.data, 1, b.len, stdout);
        lcx__buf_free(&b);
    } else {
        fwrite(res.splice, 1, res.splice_len, stdout);
        if (!res.n_hits) fprintf(stderr, "longctx query: no matching chunks in %s\n", res.scope.scope_path);
    }
    lcx_code_result_free(&res);
    cmd_scopes_close(&sc);
    return rc ? 1 : 0;
}
