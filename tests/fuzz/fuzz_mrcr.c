/* The MRCR JSONL reader (src/eval/mrcr_io.c): every line of the input through
 * lcx__mrcr_parse_line; a record it accepts is consistent (indexes inside the prompt) and
 * survives the grader and a write/parse round trip. */
#define _GNU_SOURCE
#include "fuzz.h"

#include <string.h>
#include "eval/lcx_eval.h"
#include "longctx/lcx_err.h"

static void one(const char *line, size_t len)
{
    lcx_mrcr_rec rec;
    memset(&rec, 0, sizeof rec);
    char err[256];
    int rc = lcx__mrcr_parse_line(line, len, &rec, err, sizeof err);
    FZ_LOG("fuzz: mrcr %d %s\n", rc, rc < 0 ? err : "");
    if (rc < 0) {
        lcx__mrcr_rec_free(&rec);
        return;
    }
    FZ_CHECK(rec.answer != NULL && rec.hash != NULL);
    for (size_t i = 0; i < rec.n_msgs; i++) FZ_CHECK(rec.msgs[i].content && strlen(rec.msgs[i].content) == rec.msgs[i].len);
    double score = -1;
    if (lcx__mrcr_grade(rec.answer, rec.answer, rec.hash, &score) == 0) FZ_CHECK(score >= 0 && score <= 1);
    /* what the writer produces, the reader reads back */
    char *buf = NULL;
    size_t blen = 0;
    FILE *f = open_memstream(&buf, &blen);
    if (f) {
        int wr = lcx__mrcr_write_line(f, &rec);
        fclose(f);
        if (wr == 0 && blen) {
            lcx_mrcr_rec back;
            memset(&back, 0, sizeof back);
            size_t n = blen;
            while (n && buf[n - 1] == '\n') n--;
            FZ_CHECK(lcx__mrcr_parse_line(buf, n, &back, err, sizeof err) == 0);
            FZ_CHECK(back.n_msgs == rec.n_msgs);
            lcx__mrcr_rec_free(&back);
        }
    }
    free(buf);
    lcx__mrcr_rec_free(&rec);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data, *end = s + size;
    while (s < end) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        size_t len = nl ? (size_t)(nl - s) : (size_t)(end - s);
        /* each line in a buffer of its own size: a read past it is an ASan report */
        char *line = malloc(len ? len : 1);
        if (!line) return 0;
        memcpy(line, s, len);
        one(line, len);
        free(line);
        s += len + (nl != NULL);
    }
    return 0;
}
