/* Ranking rules of issue 21, each on a small hand-made corpus that fails without it
 * (docs/core.md "Ranking rules"):
 *   1. score-aware fusion: a rare exact term in the target beats hashed-vector noise
 *      (min-max LINEAR fusion loses it — checked here too, so the corpus stays a real test);
 *   2. a needle whose key shares one word with the target's ("cracked flute" vs
 *      "cracked guitar") does not win, nor a span with two such needles (term
 *      proximity) or one that repeats a prompt word of the question (query stop words);
 *   3. rescue query signal without a "question:" marker: the last sentence ending in '?';
 *   4. symbol pulls: a sentence-initial English word is not a symbol; a pull is a boost;
 *   5. definition names: a chunk defining a name made of the question's words gains on
 *      one that only repeats those words (code retrieval);
 *   6. query expansion: a doc word finds the code's prefix of it (attributes → attr) and
 *      its code synonym (obtain → get) in the BM25 channel;
 *   7. the name match takes those forms too (xml_get_attr_value for "Obtain the
 *      attribute value.");
 *   8. an enum member (no '(') is a name for the match. */
#include "testutil.h"
#include "longctx/lcx.h"
#include "longctx/lcx_scope.h"
#include "index/index.h"
#include "rerank/rerank.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static lcx_embedder *g_emb;

static int rank_of_x(lcx_index *ix, const char *q, lcx_fusion f, uint32_t want, bool expand)
{
    lcx_search_opts o = lcx_search_defaults();
    o.fusion = f;
    o.expand_query = expand;
    o.top_k = 10;
    lcx_hit h[10];
    int n = lcx_index_search(ix, q, strlen(q), &o, h, 10);
    assert_true(n >= 0);
    for (int i = 0; i < n; i++)
        if (h[i].id == want) return i + 1;
    return 0;
}

static int rank_of(lcx_index *ix, const char *q, lcx_fusion f, uint32_t want) { return rank_of_x(ix, q, f, want, false); }

static void add(lcx_index *ix, const char *t, uint32_t *id) { assert_int_equal(lcx_index_add(ix, t, strlen(t), NULL, id), 0); }

/* 1: the shape of the "...by running lanscan": many chunks share the question's
 * common words (get, hardware, address, unix, running), the target alone has the rare one */
static void test_rare_term_beats_dense_noise(void **st)
{
    (void)st;
    lcx_index *ix;
    assert_int_equal(lcx_index_new(g_emb, &ix), 0);
    static const char *const filler[] = {
        "def _ifconfig_getnode():\n    \"\"\"Get the hardware address on Unix by running ifconfig.\"\"\"\n    # This works on Linux ('' or '-a'), Tru64 ('-av'), but not all Unixes.\n    keywords = (b'hwaddr', b'ether', b'address:', b'lladdr')\n    for args in ('', '-a', '-av'):\n        mac = _find_mac_near_keyword('ifconfig', args, keywords, lambda i: i+1)\n        if mac:\n            return mac\n    return None",
        "def _ip_getnode():\n    \"\"\"Get the hardware address on Unix by running ip.\"\"\"\n    # This works on Linux with iproute2.\n    mac = _find_mac_near_keyword('ip', 'link', [b'link/ether'], lambda i: i+1)\n    if mac:\n        return mac\n    return None",
        "def _arp_getnode():\n    \"\"\"Get the hardware address on Unix by running arp.\"\"\"\n    import os, socket\n    try:\n        ip_addr = socket.gethostbyname(socket.gethostname())\n    except OSError:\n        return None\n    # Try getting the MAC addr from arp based on our IP address (Solaris).\n    mac = _find_mac_near_keyword('arp', '-an', [os.fsencode(ip_addr)], lambda i: -1)\n    if mac:\n        return mac\n    return None",
        "def _netstat_getnode():\n    \"\"\"Get the hardware address on Unix by running netstat.\"\"\"\n    # This works on AIX and might work on Tru64 UNIX.\n    return _find_mac_under_heading('netstat', '-ian', b'Address')",
        "def getnode():\n    \"\"\"Get the hardware address as a 48-bit positive integer.\n    The first time this runs, it may launch a separate program, which could\n    be quite slow.  If all attempts to obtain the hardware address fail, we\n    choose a random 48-bit number with its eighth bit set to 1 as recommended\n    in RFC 4122.\"\"\"\n    global _node\n    if _node is not None:\n        return _node\n    for getter in _GETTERS + [_random_getnode]:\n        try:\n            _node = getter()\n        except:\n            continue\n        if (_node is not None) and (0 <= _node < (1 << 48)):\n            return _node",
        "def _unix_getnode():\n    \"\"\"Get the hardware address on Unix using the _uuid extension module.\"\"\"\n    if _generate_time_safe:\n        uuid_time, _ = _generate_time_safe()\n        return UUID(bytes=uuid_time).node",
        "def _windll_getnode():\n    \"\"\"Get the hardware address on Windows using the _uuid extension module.\"\"\"\n    if _UuidCreate:\n        uuid_bytes = _UuidCreate()\n        return UUID(bytes_le=uuid_bytes).node",
        "def _random_getnode():\n    \"\"\"Get a random node ID.\"\"\"\n    import random\n    return random.getrandbits(48) | (1 << 40)",
    };
    for (size_t i = 0; i < sizeof filler / sizeof *filler; i++) add(ix, filler[i], NULL);
    /* the rest of the module: the question's common words are everywhere */
    char buf[512];
    for (int i = 0; i < 40; i++) {
        snprintf(buf, sizeof buf, "def _check_%d(addr):\n    # get the address while running on unix (case %d)\n    "
                 "if addr is None:\n        return None\n    return int(addr) & 0x%x", i, i, 0xff00 + i);
        add(ix, buf, NULL);
    }
    uint32_t target;
    add(ix, "def _lanscan_getnode():\n    # This might work on HP-UX.\n    return _find_mac_near_keyword('lanscan', '-ai', [b'lan0'], lambda i: 0)", &target);
    const char *q = "Get the hardware address on Unix by running lanscan.";
    assert_int_equal(rank_of(ix, q, LCX_FUSE_SCORE, target), 1);
    assert_int_equal(lcx_search_defaults().fusion, LCX_FUSE_SCORE);
    /* the corpus really has the failure shape: min-max fusion loses the target's lead */
    assert_true(rank_of(ix, q, LCX_FUSE_LINEAR, target) != 1);
    lcx_index_free(ix);
}

/* 2: near-duplicate needle keys among prose spans, in a small session (every word of the
 * question is rare there): a span holding two distractors that together have both key
 * words (term proximity: the target has them as a pair), and one that also says
 * "mentioned" twice (a query-side stop word: it refers to the prompt, not the content) */
static const char *const g_prose[] = {
    "The most important thing for a startup is to make something people want. Everything else is secondary, "
    "and founders who forget this tend to spend their time on things that do not matter, like fundraising "
    "events and conferences, instead of talking to users and writing code.",
    "When I was a kid I thought the way to get good at something was to practice it a lot, and that is mostly "
    "true, but what matters more is the quality of the practice: deliberate work on the parts you are bad at.",
    "Investors are surprisingly bad at predicting which companies will succeed. The ones that do well tend to "
    "have founders who are determined, flexible and who understand their users better than anyone else does.",
    "Essays are a way of figuring out what you think. You start with a question and a few ideas, and by the "
    "time you are done writing you usually believe something slightly different from what you started with.",
};

static void test_near_duplicate_key(void **st)
{
    (void)st;
    lcx_index *ix;
    assert_int_equal(lcx_index_new(g_emb, &ix), 0);
    char buf[2048];
    uint32_t target = 0;
    for (int round = 0; round < 5; round++)
        for (int i = 0; i < 4; i++) {
            if (round == 2 && i == 0)
                snprintf(buf, sizeof buf, "%s One of the special magic numbers for cracked flute is: 4000017. %s One of "
                         "the special magic numbers for rusty guitar is: 4001254. %s", g_prose[0], g_prose[1], g_prose[2]);
            else if (round == 2 && i == 1)
                snprintf(buf, sizeof buf, "%s As mentioned before, one of the special magic numbers for cracked lantern "
                         "is: 4002491. It was mentioned twice. %s", g_prose[1], g_prose[3]);
            else if (round == 2 && i == 2)
                snprintf(buf, sizeof buf, "%s One of the special magic numbers for cracked guitar is: 4003728. %s",
                         g_prose[2], g_prose[0]);
            else
                snprintf(buf, sizeof buf, "%s %s", g_prose[i], g_prose[(i + round) % 4]);
            add(ix, buf, round == 2 && i == 2 ? &target : NULL);
        }
    const char *q = "What is the special magic number for cracked guitar mentioned in the provided text?";
    assert_int_equal(rank_of(ix, q, LCX_FUSE_SCORE, target), 1);
    lcx_index_free(ix);
}

/* 2b: term proximity (BM25TP): the pair "cracked guitar" beats a span that has both
 * words more often but apart; and the feature's value by hand */
static void test_proximity(void **st)
{
    (void)st;
    lcx_rerank_query *rq;
    assert_int_equal(lcx__rerank_prepare("cracked guitar", 14, &rq), 0);   /* flat weights: 1 per word */
    float px;
    lcx__rerank_score_prox(rq, "a cracked guitar here", 21, &px);
    assert_float_equal(px, 1.0f, 1e-5);                                   /* 2.2·1/(1.2+1) */
    const char *far3 = "cracked red old guitar";
    lcx__rerank_score_prox(rq, far3, strlen(far3), &px);
    assert_float_equal(px, 2.2f * (1.0f / 9) / (1.2f + 1.0f / 9), 1e-5);  /* d = 3 */
    const char *far6 = "cracked one two three four five guitar";
    lcx__rerank_score_prox(rq, far6, strlen(far6), &px);
    assert_float_equal(px, 0.0f, 1e-6);                                   /* d = 6 > 5 */
    lcx__rerank_free(rq);

    lcx_index *ix;
    assert_int_equal(lcx_index_new(g_emb, &ix), 0);
    char buf[2048];
    uint32_t target = 0;
    for (int round = 0; round < 5; round++)
        for (int i = 0; i < 4; i++) {
            if (round == 2 && i == 0)
                snprintf(buf, sizeof buf, "The cracked bell rang. %s The old guitar was sold. %s A cracked cup and a "
                         "borrowed guitar. %s Cracked paint.", g_prose[0], g_prose[1], g_prose[3]);
            else if (round == 2 && i == 1)
                snprintf(buf, sizeof buf, "%s He fixed the cracked guitar before the show. %s %s", g_prose[2], g_prose[0], g_prose[1]);
            else
                snprintf(buf, sizeof buf, "%s %s", g_prose[i], g_prose[(i + round) % 4]);
            add(ix, buf, round == 2 && i == 1 ? &target : NULL);
        }
    const char *q = "the cracked guitar";
    assert_int_equal(rank_of(ix, q, LCX_FUSE_SCORE, target), 1);
    lcx_index_free(ix);
}

/* 3: the question sentence of a long user turn without a marker */
static void test_query_signal_qmark(void **st)
{
    (void)st;
    char msg[4096];
    size_t n = 0;
    n += (size_t)snprintf(msg + n, sizeof msg - n, "Here is the part I am asking about:\n\n");
    for (int i = 0; i < 12; i++)
        n += (size_t)snprintf(msg + n, sizeof msg - n, "Startups grow by making something users want, week after week. ");
    const char *qs = "What is the special magic number for cracked guitar mentioned in the provided text?";
    n += (size_t)snprintf(msg + n, sizeof msg - n, "\n\nThanks for the help earlier. %s Please keep the answer short; I only need the value.", qs);
    size_t off, len;
    lcx_rescue_query(msg, n, &off, &len);
    assert_int_equal(len, strlen(qs));
    assert_memory_equal(msg + off, qs, len);
    /* the marker still wins */
    char m2[4200];
    int l2 = snprintf(m2, sizeof m2, "%s\nQuestion: which one?", msg);
    lcx_rescue_query(m2, (size_t)l2, &off, &len);
    assert_int_equal(len, strlen("which one?"));
    /* a '?' deep inside pasted context (more than 1024 bytes from the end) is not the question */
    char m3[4096];
    int l3 = snprintf(m3, sizeof m3, "Is this it? ");
    for (int i = 0; i < 30; i++) l3 += snprintf(m3 + l3, sizeof m3 - (size_t)l3, "plain words without any mark here. ");
    lcx_rescue_query(m3, (size_t)l3, &off, &len);
    assert_int_equal(len, 512);
    /* too short a question ("Why?") falls back to the tail */
    lcx_rescue_query("Why?", 4, &off, &len);
    assert_int_equal(len, 4);
    assert_int_equal(off, 0);
}

/* 4: symbol pulls on a small project */
static void wr(const char *dir, const char *rel, const char *text)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, rel);
    assert_int_equal(tu_write(p, text, strlen(text)), 0);
}

static void test_symbol_pulls(void **st)
{
    (void)st;
    char *proj = tu_tmpdir(), *data = tu_tmpdir();
    char p[4096];
    snprintf(p, sizeof p, "%s/.git", proj);
    mkdir(p, 0755);
    wr(proj, "sets.py",
       "class Set:\n    \"\"\"An unordered collection of distinct items.\"\"\"\n    def __init__(self, items=()):\n"
       "        self._items = dict.fromkeys(items)\n    def add(self, x):\n        self._items[x] = None\n"
       "    def __contains__(self, x):\n        return x in self._items\n");
    wr(proj, "message.py",
       "class Message:\n    def __init__(self):\n        self._payload = None\n        self._headers = []\n\n"
       "    def set_payload(self, payload, charset=None):\n        self._payload = payload\n"
       "        if charset is not None:\n            self.set_charset(charset)\n");
    wr(proj, "future.py",
       "class Future:\n    def __init__(self, loop=None):\n        self._loop = loop\n        self._done = False\n"
       "    def done(self):\n        return self._done\n");
    for (int i = 0; i < 6; i++) {
        char rel[64], t[512];
        snprintf(rel, sizeof rel, "util%d.py", i);
        snprintf(t, sizeof t, "def helper_%d(values):\n    total = 0\n    for v in values:\n        total += v * %d\n    return total\n", i, i + 2);
        wr(proj, rel, t);
    }
    lcx_scopes_opts o = lcx_scopes_defaults();
    o.data_dir = data;
    o.watch = false;
    lcx_scopes *m;
    assert_int_equal(lcx_scopes_open(&o, g_emb, &m), 0);
    assert_int_equal(lcx_scopes_index(m, proj, NULL, NULL, NULL, NULL), 0);
    lcx_code_request rq = lcx_code_request_init();
    rq.explicit_scope = proj;
    rq.top_k = 4;
    lcx_code_result r;
    /* "Set" starts the sentence: English, not class Set */
    rq.query = "Set the payload to the given value.";
    rq.query_len = strlen(rq.query);
    assert_int_equal(lcx_code_retrieve(m, &rq, &r), 0);
    assert_true(r.n_hits >= 1);
    assert_non_null(strstr(r.hits[0].text, "def set_payload"));
    for (int i = 0; i < r.n_hits; i++) assert_false(r.hits[i].symbol_hit);
    lcx_code_result_free(&r);
    /* a code-shaped name still pulls its definition first */
    rq.query = "where is set_payload defined";
    rq.query_len = strlen(rq.query);
    assert_int_equal(lcx_code_retrieve(m, &rq, &r), 0);
    assert_true(r.hits[0].symbol_hit);
    assert_non_null(strstr(r.hits[0].text, "def set_payload"));
    lcx_code_result_free(&r);
    /* a Capitalised word inside a sentence is a boost, not rank 1: Future names a class,
     * but the question's other terms point at Message.set_payload */
    rq.query = "set the message payload and charset, then wait for the Future";
    rq.query_len = strlen(rq.query);
    assert_int_equal(lcx_code_retrieve(m, &rq, &r), 0);
    assert_true(r.n_hits >= 2);
    assert_non_null(strstr(r.hits[0].text, "def set_payload"));
    bool fut = false;
    for (int i = 1; i < r.n_hits; i++) fut |= r.hits[i].symbol_hit && strstr(r.hits[i].text, "class Future") != NULL;
    assert_true(fut);
    lcx_code_result_free(&r);
    lcx_scopes_close(m);
    tu_rmrf(proj);
    tu_rmrf(data);
    free(proj);
    free(data);
}

/* 5: the question is a doc sentence of buffer_trim_spaces; another header's comment
 * repeats its words (BM25 and the reranker prefer it), but defines only send() */
static const char *const g_names_c[][2] = {
    {"trim.h", "struct buffer;\nint buffer_trim_spaces(struct buffer *b);\nsize_t buffer_len(const struct buffer *b);\n"},
    {"send.h", "/* the buffer holds spaces at its end: trim the spaces, trim the buffer, then send it.\n"
               " * Spaces left in a buffer are sent as they are. */\nint send(struct buffer *b);\n"},
    {"a.h", "int open_socket(const char *host, int port);\nvoid close_socket(int fd);\n"},
    {"b.h", "double mean(const double *v, size_t n);\ndouble median(double *v, size_t n);\n"},
    {"c.h", "void log_line(const char *fmt, ...);\nvoid log_flush(void);\n"},
    {"d.h", "int parse_header(const char *line, struct header *h);\nvoid header_free(struct header *h);\n"},
    {NULL, NULL},
};
/* Perl: "sub NAME {" has no '(' */
static const char *const g_names_perl[][2] = {
    {"Trim.pm", "package Trim;\nsub buffer_trim_spaces {\n    my $b = shift;\n    $b =~ s/ +$//;\n    return $b;\n}\n1;\n"},
    {"Send.pm", "package Send;\n# the buffer holds spaces at its end: trim the spaces, trim the buffer, then send it.\n"
                "# Spaces left in a buffer are sent as they are.\nsub send_it {\n    return 1;\n}\n1;\n"},
    {"A.pm", "package A;\nsub open_socket {\n    my ($host, $port) = @_;\n    return 0;\n}\n1;\n"},
    {"B.pm", "package B;\nsub mean {\n    my @v = @_;\n    return 0;\n}\nsub median {\n    return 0;\n}\n1;\n"},
    {"C.pm", "package C;\nsub log_line {\n    print @_;\n}\nsub log_flush {\n    return;\n}\n1;\n"},
    {NULL, NULL},
};
#define NAMES_Q "Trim the spaces of a buffer."

static void names_case_q(const char *const (*files)[2], const char *query, const char *want);
static void names_case(const char *const (*files)[2], const char *want) { names_case_q(files, NAMES_Q, want); }
static void names_case_q(const char *const (*files)[2], const char *query, const char *want)
{
    size_t nf = 0;
    while (files[nf][0]) nf++;
    /* the corpus has the shape: the hybrid search alone ranks the comment (file 1) first */
    lcx_index *ix;
    assert_int_equal(lcx_index_new(g_emb, &ix), 0);
    for (size_t i = 0; i < nf; i++) add(ix, files[i][1], NULL);
    lcx_search_opts so = lcx_search_defaults();
    so.alpha = 0.3f;   /* the code search's (code.c CODE_ALPHA) */
    so.top_k = 2;
    lcx_hit h[2];
    assert_int_equal(lcx_index_search(ix, query, strlen(query), &so, h, 2), 2);
    assert_int_equal(h[0].id, 1);
    assert_int_equal(h[1].id, 0);
    lcx_index_free(ix);

    char *proj = tu_tmpdir(), *data = tu_tmpdir();
    char p[4096];
    snprintf(p, sizeof p, "%s/.git", proj);
    mkdir(p, 0755);
    for (size_t i = 0; i < nf; i++) wr(proj, files[i][0], files[i][1]);
    lcx_scopes_opts o = lcx_scopes_defaults();
    o.data_dir = data;
    o.watch = false;
    lcx_scopes *m;
    assert_int_equal(lcx_scopes_open(&o, g_emb, &m), 0);
    assert_int_equal(lcx_scopes_index(m, proj, NULL, NULL, NULL, NULL), 0);
    lcx_code_request rq = lcx_code_request_init();
    rq.explicit_scope = proj;
    rq.top_k = 3;
    rq.query = query;
    rq.query_len = strlen(rq.query);
    lcx_code_result r;
    assert_int_equal(lcx_code_retrieve(m, &rq, &r), 0);
    assert_true(r.n_hits >= 2);
    assert_false(r.hits[0].symbol_hit);   /* no name in the question: the rule, not a pull */
    assert_non_null(strstr(r.hits[0].text, want));
    for (int i = 0; i < r.n_hits; i++) assert_true(r.hits[i].score >= 0 && r.hits[i].score <= 1);
    lcx_code_result_free(&r);
    lcx_scopes_close(m);
    tu_rmrf(proj);
    tu_rmrf(data);
    free(proj);
    free(data);
}

static void test_definition_names(void **st)
{
    (void)st;
    names_case(g_names_c, "buffer_trim_spaces(");
    names_case(g_names_perl, "sub buffer_trim_spaces");
}

/* 6: query expansion in the BM25 channel. A doc sentence says "attributes" where the
 * code says attr, "Obtain" where it says get; the distractor repeats the one word both
 * share. */
static void test_query_expansion(void **st)
{
    (void)st;
    static const char *const docs[] = {
        "int attr_count(struct elem *e);\nvoid attr_free(struct attr *a);\n",
        "/* count the items */\nint count_items(struct list *l);\n",
        "int get_width(struct image *img);\nvoid image_free(struct image *img);\n",
        "/* the width of an image, in pixels: its width */\nint image_scale(struct image *img, int scale);\n",
        "int open_socket(const char *host, int port);\nvoid close_socket(int fd);\n",
        "double mean(const double *v, size_t n);\ndouble median(double *v, size_t n);\n",
        "void log_line(const char *fmt, ...);\nvoid log_flush(void);\n",
        "int parse_header(const char *line, struct header *h);\nvoid header_free(struct header *h);\n",
    };
    lcx_index *ix;
    assert_int_equal(lcx_index_new(g_emb, &ix), 0);
    for (size_t i = 0; i < sizeof docs / sizeof *docs; i++) add(ix, docs[i], NULL);
    /* prefixes the index knows: attributes → attr (and attribute, attrib: unknown) */
    assert_int_equal(rank_of_x(ix, "Count the attributes.", LCX_FUSE_SCORE, 0, true), 1);
    /* code synonyms: obtain → get */
    assert_int_equal(rank_of_x(ix, "Obtain the width.", LCX_FUSE_SCORE, 2, true), 1);
    /* off by default (the rescue path): there the distractors win, as without the rule */
    assert_int_equal(rank_of(ix, "Count the attributes.", LCX_FUSE_SCORE, 1), 1);
    assert_int_equal(rank_of(ix, "Obtain the width.", LCX_FUSE_SCORE, 3), 1);
    lcx_index_free(ix);
}

/* 7: the name match sees a doc word's prefixes and code synonyms: xml_get_attr_value is
 * "Obtain the attribute value." (another header's comment repeats those words) */
static const char *const g_forms[][2] = {
    {"xml.h", "struct node;\nconst char *xml_get_attr_value(struct node *n, const char *key);\nvoid xml_free(struct node *n);\n"},
    {"doc.h", "/* the value of an attribute */\n"
              "int node_print(struct node *n);\n"},
    {"a.h", "int open_socket(const char *host, int port);\nvoid close_socket(int fd);\n"},
    {"b.h", "double mean(const double *v, size_t n);\ndouble median(double *v, size_t n);\n"},
    {"c.h", "void log_line(const char *fmt, ...);\nvoid log_flush(void);\n"},
    {NULL, NULL},
};
/* 8: declarations without '(' are names: an enum member documented by the question */
static const char *const g_decls[][2] = {
    {"flags.h", "enum server_flag {\n  SERVER_NO_FLAG = 0,\n  SERVER_USE_DEBUG_LOG = 8,\n  SERVER_USE_TLS = 16\n};\n"},
    {"log.h", "/* the debug log: use the log flag */\nint log_write(const char *s);\n"},
    {"a.h", "int open_socket(const char *host, int port);\nvoid close_socket(int fd);\n"},
    {"b.h", "double mean(const double *v, size_t n);\ndouble median(double *v, size_t n);\n"},
    {"c.h", "void buf_line(const char *fmt, ...);\nvoid buf_flush(void);\n"},
    {NULL, NULL},
};
static void test_name_forms(void **st)
{
    (void)st;
    names_case_q(g_forms, "Obtain the attribute value.", "xml_get_attr_value(");
}
static void test_decl_names(void **st)
{
    (void)st;
    names_case_q(g_decls, "Use the debug log flag.", "SERVER_USE_DEBUG_LOG");
}

static int setup(void **st)
{
    (void)st;
    return lcx_embedder_hash_new(0, &g_emb);
}
static int teardown(void **st)
{
    (void)st;
    lcx_embedder_free(g_emb);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rare_term_beats_dense_noise),
        cmocka_unit_test(test_near_duplicate_key),
        cmocka_unit_test(test_proximity),
        cmocka_unit_test(test_query_signal_qmark),
        cmocka_unit_test(test_symbol_pulls),
        cmocka_unit_test(test_definition_names),
        cmocka_unit_test(test_query_expansion),
        cmocka_unit_test(test_name_forms),
        cmocka_unit_test(test_decl_names),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
