/* Query-side vocabulary bridges between doc prose and code (docs/core.md "Query
 * expansion"): what a doc sentence says and what the code it documents is named differ
 * in regular ways, and neither needs a trained model. */
#include "index/index.h"
#include <string.h>

/* Doc-prose words and the code words that usually stand for them, where the code word is
 * not a prefix of the prose word (prefixes — attribute/attr, initialize/init,
 * listening/listen — are found in the index itself, lcx__index_search). General
 * programming usage, not mined from any benchmark corpus. */
static const struct { const char *w; const char *c[3]; } SYN[] = {
    {"obtain", {"get"}},          {"retrieve", {"get"}},          {"fetch", {"get"}},
    {"return", {"get"}},          {"returns", {"get"}},           {"determine", {"is", "has"}},
    {"whether", {"is", "has"}},   {"check", {"is", "has"}},       {"test", {"is"}},
    {"create", {"new"}},          {"creates", {"new"}},           {"construct", {"new", "create"}},
    {"constructs", {"new", "create"}}, {"make", {"new", "create"}}, {"allocate", {"new", "alloc"}},
    {"dispose", {"free", "destroy"}}, {"destroy", {"free"}},      {"release", {"free"}},
    {"deallocate", {"free"}},     {"delete", {"remove", "del"}}, {"erase", {"remove", "delete"}},
    {"remove", {"delete", "del"}}, {"append", {"add", "push"}},   {"insert", {"add"}},
    {"number", {"num", "count"}}, {"length", {"len", "size"}},    {"size", {"len", "length"}},
    {"text", {"str", "string"}},  {"string", {"str"}},            {"message", {"msg"}},
    {"context", {"ctx"}},         {"source", {"src"}},            {"destination", {"dst", "dest"}},
    {"pointer", {"ptr"}},         {"count", {"cnt", "num"}},      {"index", {"idx"}},
    {"descriptor", {"fd"}},       {"callback", {"cb"}},           {"character", {"char", "chr"}},
    {"execute", {"exec", "run"}}, {"run", {"exec"}},              {"start", {"begin", "init"}},
    {"begin", {"start"}},         {"finish", {"end"}},            {"compare", {"cmp"}},
    {"copy", {"dup", "cpy"}},     {"duplicate", {"dup", "copy"}}, {"temporary", {"tmp"}},
    {"reference", {"ref"}},       {"previous", {"prev"}},         {"current", {"cur"}},
    {"read", {"get", "load"}},    {"write", {"put", "save"}},     {"print", {"dump", "write"}},
};

int lcx__code_synonyms(const char *w, size_t n, const char *out[3])
{
    for (size_t i = 0; i < sizeof SYN / sizeof *SYN; i++)
        if (strlen(SYN[i].w) == n && !memcmp(SYN[i].w, w, n)) {
            int k = 0;
            while (k < 3 && SYN[i].c[k]) { out[k] = SYN[i].c[k]; k++; }
            return k;
        }
    return 0;
}
