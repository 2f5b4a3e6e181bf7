/* Deterministic MRCR-format record generator (our stand-in for openai/mrcr, which cannot be
 * downloaded here).
 *
 * A record is a conversation of `write a {format} about {topic}` user turns, each answered
 * by a multi-paragraph assistant reply, followed by the final question
 *   Prepend {hash} to the {Nth} (1 indexed) {format} about {topic}. Do not include any other
 *   text in your response.
 * The needle request (format F, topic T) occurs n_needles times, spread over the whole
 * conversation; the answer is hash + the reply to the Nth one. What makes it hard (as in
 * the real set): every needle has the same request text, replies of the same format/topic
 * read alike, and distractors are planted on purpose —
 *   same topic in another format, same format on another topic, near-duplicate topics
 *   ("tapirs" vs "tapir conservation"), and a few-shot preamble in the first user message
 *   whose example uses F and T too.
 * Replies are built from the haystack essays (sentences, read at run time) shaped by per-
 * format templates (stanzas for poems, salutations for letters, headlines for news, ...),
 * with topic mentions mixed in, so two replies to the same request differ like real ones.
 *
 * Determinism: one splitmix64 stream per record, seeded from (seed, n_needles, bin, index);
 * haystack files are read in sorted name order. Same inputs → same bytes. */
#include "eval/lcx_eval.h"
#include "util/util.h"
#include <ctype.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

struct lcx_mrcr_gen {
    char *text;        /* all sentences, NUL-separated */
    char **sent;       /* [n_sent] */
    size_t n_sent;
    int varied;        /* final-question style: 0 = SPEC template, 1 = varied phrasings */
};

void lcx__mrcr_gen_set_varied(lcx_mrcr_gen *g, int varied)
{
    if (g) g->varied = varied;
}

typedef struct { uint64_t s; } rng_t;
static uint64_t rng_next(rng_t *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static size_t rng_n(rng_t *r, size_t n) { return n ? (size_t)(rng_next(r) % n) : 0; }
static double rng_u(rng_t *r) { return (double)(rng_next(r) >> 11) / 9007199254740992.0; }

static const char *formats[] = {
    "poem", "sonnet", "haiku", "limerick", "short story", "essay", "blog post", "riddle",
    "song", "speech", "letter", "joke", "news article", "diary entry", "fable", "product review",
    "recipe", "dialogue", "ode", "social media post", "bedtime story", "eulogy", "travel guide",
    "podcast script"};
#define N_FORMATS ((int)LCX_ARRAY_LEN(formats))

/* Topics come in families of near-duplicates; the generator picks distractors from the
 * needle topic's family so "tapirs" competes with "tapir conservation". */
static const char *topic_families[][3] = {
    {"tapirs", "tapir conservation", "baby tapirs"},
    {"lighthouses", "lighthouse keepers", "abandoned lighthouses"},
    {"volcanoes", "volcanic islands", "dormant volcanoes"},
    {"coffee", "coffee farming", "cold brew coffee"},
    {"the ocean", "ocean tides", "the deep ocean"},
    {"bees", "beekeeping", "bumblebees"},
    {"trains", "night trains", "model trains"},
    {"libraries", "public libraries", "library cards"},
    {"owls", "snowy owls", "owl pellets"},
    {"gardening", "rooftop gardens", "garden gnomes"},
    {"the moon", "moon landings", "the harvest moon"},
    {"bicycles", "bicycle repair", "tandem bicycles"},
    {"rain", "summer rain", "rain on a tin roof"},
    {"chess", "chess openings", "speed chess"},
    {"mountains", "mountain climbing", "mountain villages"},
    {"octopuses", "octopus intelligence", "giant octopuses"},
    {"bread", "sourdough bread", "bread baking"},
    {"deserts", "desert flowers", "desert nights"},
    {"robots", "kitchen robots", "robot friendship"},
    {"autumn", "autumn leaves", "autumn festivals"},
    {"penguins", "emperor penguins", "penguin colonies"},
    {"jazz", "jazz clubs", "jazz improvisation"},
    {"glaciers", "melting glaciers", "glacier hiking"},
    {"friendship", "childhood friendship", "long-distance friendship"},
    {"cities", "city parks", "city lights at night"},
    {"whales", "humpback whales", "whale songs"},
    {"time travel", "time travel paradoxes", "time zones"},
    {"honey", "wildflower honey", "honey cake"},
};
#define N_FAMILIES ((int)LCX_ARRAY_LEN(topic_families))

static const char *topic_lines[] = {
    "It is hard to think about %s without smiling a little.",
    "Somewhere in all of this, %s keeps coming back.",
    "And so we return, as always, to %s.",
    "Nobody who has spent time with %s forgets it.",
    "%s, in the end, taught me more than any book.",
    "People tend to underestimate %s.",
    "Everything changed once I paid attention to %s.",
    "There is a quiet logic to %s that rewards patience.",
    "Ask anyone about %s and you get a different story.",
    "The first thing to know about %s is that it surprises you.",
};

static const char *ord_full[] = {"first", "second", "third", "fourth", "fifth", "sixth", "seventh",
                                 "eighth", "ninth", "tenth", "eleventh", "twelfth"};
static const char *zero_idx[] = {"0th", "1st", "2nd", "3rd", "4th", "5th", "6th", "7th", "8th",
                                 "9th", "10th", "11th"};
static const char *ordinal_words[] = {"1st", "2nd", "3rd", "4th", "5th", "6th", "7th", "8th",
                                      "9th", "10th", "11th", "12th"};

/* ------------------------------------------------------------------ haystack loading */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void lcx__mrcr_gen_close(lcx_mrcr_gen *g)
{
    if (!g) return;
    free(g->text);
    free(g->sent);
    free(g);
}

int lcx__mrcr_gen_open(const char *dir, lcx_mrcr_gen **out)
{
    if (!dir || !out) return LCX_EINVAL;
    *out = NULL;
    DIR *d = opendir(dir);
    if (!d) return LCX_ENOTFOUND;
    char **names = NULL;
    size_t nn = 0, na = 0;
    struct dirent *de;
    int rc = LCX_OK;
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (l < 5 || strcmp(de->d_name + l - 4, ".txt")) continue;
        if (nn == na) {
            na = na ? na * 2 : 64;
            char **nv = realloc(names, na * sizeof *nv);
            if (!nv) { rc = LCX_ENOMEM; break; }
            names = nv;
        }
        if (!(names[nn] = strdup(de->d_name))) { rc = LCX_ENOMEM; break; }
        nn++;
        if (nn > 10000) { rc = LCX_ELIMIT; break; }
    }
    closedir(d);
    lcx_buf all = {.cap = (size_t)256 << 20};
    if (!rc) qsort(names, nn, sizeof *names, cmp_str);
    for (size_t i = 0; !rc && i < nn; i++) {
        char path[4096], *data = NULL;
        size_t len = 0;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        rc = lcx__read_file(path, (size_t)64 << 20, &data, &len);
        if (rc) break;
        if (!lcx__utf8_valid(data, len)) { free(data); continue; }  /* skip, never half-use */
        /* normalise whitespace to single spaces; split sentences after . ? ! */
        size_t sent_start = all.len;
        int space = 1;
        for (size_t k = 0; !rc && k < len; k++) {
            char c = data[k];
            if (isspace((unsigned char)c)) {
                if (!space) rc = lcx__buf_append(&all, " ", 1);
                space = 1;
                continue;
            }
            space = 0;
            rc = lcx__buf_append(&all, &c, 1);
            if (!rc && (c == '.' || c == '?' || c == '!') && k + 1 < len &&
                (isspace((unsigned char)data[k + 1]) || isupper((unsigned char)data[k + 1]))) {
                /* sentence end: keep sentences of 40..400 bytes, drop the rest */
                size_t sl = all.len - sent_start;
                if (sl < 40 || sl > 400 || !isupper((unsigned char)all.data[sent_start])) {
                    all.len = sent_start;
                } else {
                    rc = lcx__buf_append(&all, "\0", 1);
                    sent_start = all.len;
                }
                space = 1;
            }
        }
        if (!rc) all.len = sent_start;   /* drop an unterminated tail */
        free(data);
    }
    for (size_t i = 0; i < nn; i++) free(names[i]);
    free(names);
    if (!rc && all.len == 0) rc = LCX_ENOTFOUND;
    lcx_mrcr_gen *g = NULL;
    if (!rc && !(g = calloc(1, sizeof *g))) rc = LCX_ENOMEM;
    if (!rc) {
        size_t cnt = 0;
        for (size_t k = 0; k < all.len; k++) cnt += all.data[k] == 0;
        g->text = lcx__buf_steal(&all, NULL);
        g->sent = malloc(cnt * sizeof *g->sent);
        if (!g->sent) rc = LCX_ENOMEM;
        else {
            char *p = g->text;
            for (size_t k = 0; k < cnt; k++) { g->sent[k] = p; p += strlen(p) + 1; }
            g->n_sent = cnt;
        }
    }
    lcx__buf_free(&all);
    if (rc) { lcx__mrcr_gen_close(g); return rc; }
    *out = g;
    return LCX_OK;
}

/* ------------------------------------------------------------------ reply building */

static int put_topic_line(lcx_buf *b, rng_t *r, const char *topic)
{
    char tmp[256];
    snprintf(tmp, sizeof tmp, topic_lines[rng_n(r, LCX_ARRAY_LEN(topic_lines))], topic);
    tmp[0] = (char)toupper((unsigned char)tmp[0]);
    return lcx__buf_puts(b, tmp);
}

static int title_case(lcx_buf *b, const char *s)
{
    int up = 1, rc = 0;
    for (; *s && !rc; s++) {
        char c = up ? (char)toupper((unsigned char)*s) : *s;
        up = *s == ' ' || *s == '-';
        rc = lcx__buf_append(b, &c, 1);
    }
    return rc;
}

/* Verse: lines of 4..9 words cut from consecutive essay sentences. */
static int build_verse(lcx_mrcr_gen *g, rng_t *r, lcx_buf *b, const char *fmt, const char *topic,
                       size_t budget)
{
    int rc = lcx__buf_puts(b, "**");
    if (!rc) rc = title_case(b, rng_n(r, 2) ? topic : "A song of small things");
    if (!rc) rc = lcx__buf_puts(b, "**\n\n");
    size_t si = rng_n(r, g->n_sent), wi = 0, line = 0;
    int stanza = 0;
    int song = !strcmp(fmt, "song");
    size_t per_stanza = !strcmp(fmt, "haiku") ? 3 : !strcmp(fmt, "limerick") ? 5 : 4;
    while (!rc && lcx__utf8_chars(b->data, b->len) < budget) {
        if (line % per_stanza == 0 && song) {
            rc = lcx__buf_printf(b, stanza % 2 ? "Chorus:\n" : "Verse %d:\n", stanza / 2 + 1);
            if (rc) break;
        }
        if (rng_n(r, 7) == 0) {
            rc = put_topic_line(b, r, topic);
        } else {
            size_t words = 4 + rng_n(r, 6);
            for (size_t w = 0; !rc && w < words; w++) {
                const char *s = g->sent[si];
                /* skip to word wi of sentence si */
                size_t k = 0, cur = 0;
                while (s[k] && cur < wi) { if (s[k] == ' ') cur++; k++; }
                if (!s[k]) { si = (si + 1) % g->n_sent; wi = 0; w--; continue; }
                size_t e = k;
                while (s[e] && s[e] != ' ') e++;
                if (w) rc = lcx__buf_append(b, " ", 1);
                if (!rc) {
                    char first = (char)(w == 0 ? toupper((unsigned char)s[k]) : s[k]);
                    rc = lcx__buf_append(b, &first, 1);
                    if (!rc && e > k + 1) rc = lcx__buf_append(b, s + k + 1, e - k - 1);
                }
                wi++;
            }
        }
        if (!rc) rc = lcx__buf_puts(b, "\n");
        line++;
        if (!rc && line % per_stanza == 0) { rc = lcx__buf_puts(b, "\n"); stanza++; }
    }
    return rc;
}

static const char *opening(const char *fmt, rng_t *r)
{
    if (!strcmp(fmt, "letter")) return rng_n(r, 2) ? "Dear friend,\n\n" : "Dear Sam,\n\n";
    if (!strcmp(fmt, "diary entry")) return "Dear diary,\n\n";
    if (!strcmp(fmt, "speech")) return "Ladies and gentlemen, thank you for coming tonight.\n\n";
    if (!strcmp(fmt, "eulogy")) return "We are gathered here to remember.\n\n";
    if (!strcmp(fmt, "bedtime story") || !strcmp(fmt, "fable")) return "Once upon a time, ";
    if (!strcmp(fmt, "recipe")) return "Ingredients and method, more or less:\n\n";
    if (!strcmp(fmt, "podcast script")) return "[INTRO MUSIC]\n\nHOST: Welcome back to the show.\n\n";
    if (!strcmp(fmt, "riddle")) return "Riddle me this:\n\n";
    if (!strcmp(fmt, "joke")) return "So here's one I heard the other day.\n\n";
    return "";
}

static const char *closing(const char *fmt)
{
    if (!strcmp(fmt, "letter")) return "\n\nWarmly,\nAlex";
    if (!strcmp(fmt, "diary entry")) return "\n\nMore tomorrow.";
    if (!strcmp(fmt, "speech")) return "\n\nThank you.";
    if (!strcmp(fmt, "fable")) return "\n\nMoral: look twice before you leap.";
    if (!strcmp(fmt, "bedtime story")) return "\n\nThe end. Goodnight.";
    if (!strcmp(fmt, "riddle")) return "\n\nWhat am I?";
    if (!strcmp(fmt, "product review")) return "\n\nRating: four stars out of five.";
    if (!strcmp(fmt, "social media post")) return "\n\n#thoughts #dailylife";
    if (!strcmp(fmt, "podcast script")) return "\n\n[OUTRO MUSIC]";
    return "";
}

static int build_prose(lcx_mrcr_gen *g, rng_t *r, lcx_buf *b, const char *fmt, const char *topic,
                       size_t budget)
{
    int rc = 0;
    if (!strcmp(fmt, "news article") || !strcmp(fmt, "blog post") || !strcmp(fmt, "essay") ||
        !strcmp(fmt, "travel guide")) {
        rc = lcx__buf_puts(b, "# ");
        if (!rc) rc = title_case(b, topic);
        if (!rc) rc = lcx__buf_puts(b, rng_n(r, 2) ? ": A Closer Look\n\n" : "\n\n");
    }
    if (!rc) rc = lcx__buf_puts(b, opening(fmt, r));
    size_t si = rng_n(r, g->n_sent);
    int dialogue = !strcmp(fmt, "dialogue") || !strcmp(fmt, "podcast script");
    int turn = 0;
    while (!rc && lcx__utf8_chars(b->data, b->len) < budget) {
        size_t ns = 2 + rng_n(r, 4);
        if (dialogue) rc = lcx__buf_puts(b, turn++ % 2 ? "B: " : "A: ");
        for (size_t s = 0; !rc && s < ns; s++) {
            if (s) rc = lcx__buf_append(b, " ", 1);
            if (!rc && rng_n(r, 6) == 0) rc = put_topic_line(b, r, topic);
            else if (!rc) {
                rc = lcx__buf_puts(b, g->sent[si]);
                si = (si + 1 + rng_n(r, 3)) % g->n_sent;
            }
        }
        if (!rc) rc = lcx__buf_puts(b, "\n\n");
    }
    while (b->len && b->data[b->len - 1] == '\n') b->data[--b->len] = 0;
    if (!rc) rc = lcx__buf_puts(b, closing(fmt));
    return rc;
}

static int is_verse(const char *fmt)
{
    return !strcmp(fmt, "poem") || !strcmp(fmt, "sonnet") || !strcmp(fmt, "haiku") ||
           !strcmp(fmt, "limerick") || !strcmp(fmt, "song") || !strcmp(fmt, "ode");
}

static int build_reply(lcx_mrcr_gen *g, rng_t *r, const char *fmt, const char *topic,
                       size_t budget, char **out)
{
    lcx_buf b = {.cap = (size_t)16 << 20};
    int rc = is_verse(fmt) ? build_verse(g, r, &b, fmt, topic, budget)
                           : build_prose(g, r, &b, fmt, topic, budget);
    if (!rc) {
        while (b.len && (b.data[b.len - 1] == '\n' || b.data[b.len - 1] == ' ')) b.data[--b.len] = 0;
        *out = lcx__buf_steal(&b, NULL);
        if (!*out) rc = LCX_ENOMEM;
    }
    lcx__buf_free(&b);
    return rc;
}

/* ------------------------------------------------------------------ records */

typedef struct { int fmt; int fam, var; } req_t;   /* topic = topic_families[fam][var] */

static const char *req_topic(req_t q) { return topic_families[q.fam][q.var]; }

static int push_msg(lcx_mrcr_rec *rec, size_t *alloc, const char *role, char *content)
{
    if (!content) return LCX_ENOMEM;
    if (rec->n_msgs == *alloc) {
        size_t na = *alloc ? *alloc * 2 : 64;
        lcx_mrcr_msg *nm = realloc(rec->msgs, na * sizeof *nm);
        if (!nm) { free(content); return LCX_ENOMEM; }
        rec->msgs = nm;
        *alloc = na;
    }
    lcx_mrcr_msg *m = &rec->msgs[rec->n_msgs];
    m->role = strdup(role);
    if (!m->role) { free(content); return LCX_ENOMEM; }
    m->content = content;
    m->len = strlen(content);
    rec->n_msgs++;
    return LCX_OK;
}

static char *req_text(req_t q)
{
    lcx_buf b = {0};
    const char *f = formats[q.fmt];
    int vowel = strchr("aeiou", f[0]) != NULL;
    if (lcx__buf_printf(&b, "write %s %s about %s", vowel ? "an" : "a", f, req_topic(q))) {
        lcx__buf_free(&b);
        return NULL;
    }
    return lcx__buf_steal(&b, NULL);
}

/* Each turn's request: the needles one per equal slice of the conversation (jittered inside
 * it), every other turn a distractor (same topic other format, same format other topic, a
 * near-duplicate topic) or filler, never the needle's own request. */
static void plan_turns(rng_t *r, req_t needle, int n_needles, size_t n_turns, req_t *plan, int *is_needle)
{
    for (int k = 0; k < n_needles; k++) {
        size_t s0 = n_turns * (size_t)k / (size_t)n_needles, s1 = n_turns * (size_t)(k + 1) / (size_t)n_needles;
        size_t t = s0 + rng_n(r, s1 - s0);
        is_needle[t] = 1;
        plan[t] = needle;
    }
    for (size_t t = 0; t < n_turns; t++) {
        if (is_needle[t]) continue;
        req_t q;
        size_t kind = rng_n(r, 10);
        do {
            if (kind < 2) {            /* same topic, other format */
                q = needle;
                q.fmt = (int)rng_n(r, N_FORMATS);
            } else if (kind < 4) {     /* same format, other topic */
                q = needle;
                q.fam = (int)rng_n(r, N_FAMILIES);
                q.var = (int)rng_n(r, 3);
            } else if (kind < 6) {     /* near-duplicate topic, same or other format */
                q = needle;
                q.var = (int)rng_n(r, 3);
                if (rng_n(r, 2)) q.fmt = (int)rng_n(r, N_FORMATS);
            } else {                   /* filler */
                q.fmt = (int)rng_n(r, N_FORMATS);
                q.fam = (int)rng_n(r, N_FAMILIES);
                q.var = (int)rng_n(r, 3);
            }
        } while (q.fmt == needle.fmt && q.fam == needle.fam && q.var == needle.var);
        plan[t] = q;
    }
}

static const char alnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/* 10 random alphanumerics */
static void draw_hash(rng_t *r, char hash[11])
{
    for (int i = 0; i < 10; i++) hash[i] = alnum[rng_n(r, sizeof alnum - 1)];
    hash[10] = 0;
}

/* The few-shot preamble: an example using the needle's own format and topic. */
static int build_preamble(lcx_mrcr_gen *g, rng_t *r, req_t needle, lcx_buf *pre)
{
    req_t ex2 = {(int)rng_n(r, N_FORMATS), (int)rng_n(r, N_FAMILIES), (int)rng_n(r, 3)};
    char *ex_a = NULL, *ex_b = NULL, *rq0 = req_text(needle), *rq1 = req_text(ex2);
    char exhash[11];
    draw_hash(r, exhash);
    int rc = build_reply(g, r, formats[needle.fmt], req_topic(needle), 200, &ex_a);
    if (!rc) rc = build_reply(g, r, formats[ex2.fmt], req_topic(ex2), 200, &ex_b);
    if (!rc && rq0 && rq1)
        rc = lcx__buf_printf(pre,
                            "Here are some examples of conversations succeeded by a follow-up question "
                            "answered correctly:\n\n======EXAMPLE======\nUser: %s\nAssistant: %s\n"
                            "User: %s\nAssistant: %s\nUser: Prepend %s to the 1st (1 indexed) %s about %s. "
                            "Do not include any other text in your response.\nAssistant: %s%s\n"
                            "======END EXAMPLE======\n\n",
                            rq0, ex_a, rq1, ex_b, exhash, formats[needle.fmt], req_topic(needle),
                            exhash, ex_a);
    else if (!rc) rc = LCX_ENOMEM;
    free(ex_a); free(ex_b); free(rq0); free(rq1);
    if (rc) lcx__buf_free(pre);
    return rc;
}

/* The conversation: the preamble opens the first request; each reply gets about `per`
 * characters; the desired-th needle's reply (prefixed with the hash) is the answer. Takes
 * pre. */
static int write_turns(lcx_mrcr_gen *g, rng_t *r, lcx_mrcr_rec *rec, size_t *alloc, const req_t *plan,
                       const int *is_needle, size_t n_turns, double per, lcx_buf *pre, int desired, const char *hash)
{
    int rc = 0, seen = 0;
    for (size_t t = 0; !rc && t < n_turns; t++) {
        char *q = req_text(plan[t]);
        if (q && t == 0) {
            lcx_buf m = *pre;
            *pre = (lcx_buf){0};
            rc = lcx__buf_puts(&m, q);
            free(q);
            q = rc ? NULL : lcx__buf_steal(&m, NULL);
            lcx__buf_free(&m);
            if (rc) break;
        }
        if ((rc = push_msg(rec, alloc, "user", q))) break;
        const size_t budget = (size_t)(per * (0.6 + 0.8 * rng_u(r)));
        char *rep = NULL;
        rc = build_reply(g, r, formats[plan[t].fmt], req_topic(plan[t]), budget, &rep);
        if (rc) break;
        if (is_needle[t] && ++seen == desired) {
            lcx_buf a = {0};
            rc = lcx__buf_puts(&a, hash);
            if (!rc) rc = lcx__buf_puts(&a, rep);
            rec->answer = lcx__buf_steal(&a, NULL);
            lcx__buf_free(&a);
            if (!rc && !rec->answer) rc = LCX_ENOMEM;
            rec->desired_msg_index = (long)rec->n_msgs - 1;   /* the user request just pushed */
        }
        if (!rc) rc = push_msg(rec, alloc, "assistant", rep);
        else free(rep);
    }
    lcx__buf_free(pre);
    return rc;
}

/* The final question, in the exact wording or (varied) one of five rewordings. */
static int final_question(const lcx_mrcr_gen *g, rng_t *r, req_t needle, int desired, int n_needles, const char *hash,
                          lcx_buf *fq)
{
    const char *F = formats[needle.fmt], *T = req_topic(needle);
    int style = g->varied ? (int)rng_n(r, 6) : 0;   /* drawn last: exact mode is unaffected */
    char word[32];
    snprintf(word, sizeof word, "%s", ord_full[desired - 1]);
    switch (style) {
    case 1: /* ordinal as a word */
        return lcx__buf_printf(fq, "Prepend %s to the %s (1 indexed) %s about %s. Do not include any other text in your response.",
                              hash, word, F, T);
    case 2: /* a typo in the ordinal word: swap two inner letters */
        if (strlen(word) >= 5) { char c = word[1]; word[1] = word[2]; word[2] = c; }
        return lcx__buf_printf(fq, "Prepend %s to the %s (1 indexed) %s about %s. Do not include any other text in your response.",
                              hash, word, F, T);
    case 3:
        return lcx__buf_printf(fq, "prepend %s to the %s (1-indexed) %s about %s, and nothing else.",
                              hash, ordinal_words[desired - 1], F, T);
    case 4:
        if (desired == n_needles)
            return lcx__buf_printf(fq, "Prepend %s to the last %s about %s. Do not include any other text in your response.", hash, F, T);
        if (desired == n_needles - 1)
            return lcx__buf_printf(fq, "Prepend %s to the second to last %s about %s. Do not include any other text in your response.", hash, F, T);
        return lcx__buf_printf(fq, "Prepend %s to the %s (0 indexed) %s about %s. Do not include any other text in your response.",
                              hash, zero_idx[desired - 1], F, T);
    case 5:
        return lcx__buf_printf(fq, "Prepend %s to your reply from the %s time I asked for %s %s about %s.",
                              hash, ordinal_words[desired - 1], strchr("aeiou", F[0]) ? "an" : "a", F, T);
    default:
        return lcx__buf_printf(fq, "Prepend %s to the %s (1 indexed) %s about %s. Do not include any other text in your response.",
                              hash, ordinal_words[desired - 1], F, T);
    }
}

static int gen_once(lcx_mrcr_gen *g, rng_t *r, int n_needles, int bin, lcx_mrcr_rec *rec)
{
    long lo, hi;
    lcx__mrcr_bin_range(bin, &lo, &hi);
    /* total characters aimed for: inside the bin, away from its edges */
    double target = (double)lo + (double)(hi - lo) * (0.12 + 0.76 * rng_u(r));
    req_t needle = {(int)rng_n(r, N_FORMATS), (int)rng_n(r, N_FAMILIES), (int)rng_n(r, 3)};
    /* turns: enough for needles + distractors; replies 300..3500 chars on average */
    size_t min_turns = (size_t)(3 * n_needles + 6);
    double avg = target / (double)min_turns;
    if (avg > 3000) avg = 2000 + rng_u(r) * 1500;
    size_t n_turns = (size_t)(target / avg);
    if (n_turns < min_turns) n_turns = min_turns;

    req_t *plan = calloc(n_turns, sizeof *plan);
    int *is_needle = calloc(n_turns, sizeof *is_needle);
    int rc = LCX_ENOMEM;
    if (!plan || !is_needle) goto out;
    plan_turns(r, needle, n_needles, n_turns, plan, is_needle);
    const int desired = 1 + (int)rng_n(r, (size_t)n_needles);
    char hash[11];
    draw_hash(r, hash);
    lcx_buf pre = {0};
    if ((rc = build_preamble(g, r, needle, &pre))) goto out;
    double overhead = (double)lcx__utf8_chars(pre.data, pre.len) + 200;
    double per = (target - overhead) / (double)n_turns;
    if (per < 120) per = 120;
    size_t alloc = 0;
    if ((rc = write_turns(g, r, rec, &alloc, plan, is_needle, n_turns, per, &pre, desired, hash))) goto out;
    lcx_buf fq = {0};
    rc = final_question(g, r, needle, desired, n_needles, hash, &fq);
    if (!rc) rc = push_msg(rec, &alloc, "user", lcx__buf_steal(&fq, NULL));
    lcx__buf_free(&fq);
    if (rc) goto out;
    rec->hash = strdup(hash);
    if (!rec->hash) { rc = LCX_ENOMEM; goto out; }
    rec->n_needles = n_needles;
    rec->total_messages = (long)rec->n_msgs;
    long nc = 0;
    for (size_t i = 0; i < rec->n_msgs; i++) nc += (long)lcx__utf8_chars(rec->msgs[i].content, rec->msgs[i].len);
    rec->n_chars = nc;
out:
    free(plan); free(is_needle);
    return rc;
}

int lcx__mrcr_gen_record(lcx_mrcr_gen *g, uint64_t seed, int n_needles, int bin, long index,
                        lcx_mrcr_rec *rec)
{
    if (!g || !rec || n_needles < 1 || n_needles > 12 || bin < 0 || bin >= LCX_MRCR_NBINS || index < 0)
        return LCX_EINVAL;
    /* retry with a derived stream until n_chars lands inside the bin (it nearly always does
     * first time: the plan aims at the bin's interior) */
    for (int attempt = 0; attempt < 16; attempt++) {
        rng_t r = {seed ^ 0x4d524352ull};
        for (int k = 0; k < 4; k++) rng_next(&r);
        r.s ^= (uint64_t)n_needles * 0x100000001b3ull + (uint64_t)bin * 0x9e3779b97f4a7c15ull +
               (uint64_t)index * 0xc2b2ae3d27d4eb4full + (uint64_t)attempt * 0x165667b19e3779f9ull;
        rng_next(&r);
        memset(rec, 0, sizeof *rec);
        int rc = gen_once(g, &r, n_needles, bin, rec);
        if (rc) { lcx__mrcr_rec_free(rec); return rc; }
        if (lcx__mrcr_bin_of(rec->n_chars) == bin) return LCX_OK;
        lcx__mrcr_rec_free(rec);
    }
    return LCX_ELIMIT;
}
