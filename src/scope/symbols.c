/* Symbol table by lightweight line patterns (no parser): definitions of functions,
 * classes, structs, methods and types in C/C++, Python, JS/TS, Go, Rust, Java and Swift.
 *
 * The idea: a query that names an identifier ("why does parse_header crash",
 * "HttpServer.start") should pull in the chunk that DEFINES it, even when BM25 prefers a
 * chunk that merely calls it many times. Line patterns are enough for that: a missed
 * definition costs a boost, a false one (a macro call at column 0 in C) costs a slot.
 * Heuristics per language, all on one line at a time:
 *   C/C++  : "#define NAME"; "struct|class|union|enum NAME" not ending in ';';
 *            "} NAME;" closing a typedef at column 0; "typedef … NAME;";
 *            a function definition = a line starting at column 0 with an identifier,
 *            not a keyword, holding '(' with the identifier (or A::b) right before it, no
 *            '=' before that '(' and no ';' at the end ("int\nmain(void)" GNU style works).
 *   Python : "def NAME" / "async def NAME" (method when indented under a class), "class NAME".
 *   JS/TS  : [export|default|declare|abstract|async]* then "function NAME", "class NAME",
 *            "interface|type|enum NAME", "const|let|var NAME = (…)|function|async|…=>";
 *            indented "NAME(…) {" methods inside a class body.
 *   Go     : "func NAME(", "func (r *T) NAME(" (method of T), "type NAME".
 *   Rust   : [pub[(…)]|async|unsafe|const|extern "C"]* then "fn|struct|enum|union|trait|type|mod
 *            NAME", "impl[<…>] [Trait for] NAME" sets the owner, "macro_rules! NAME".
 *   Java   : modifiers then "class|interface|enum|record NAME"; indented
 *            "[modifiers] Type NAME(" not ending in ';' = method.
 *   Swift  : modifiers/attributes then "func NAME", "class|struct|enum|protocol|extension|actor NAME".
 * Known misses: multi-line signatures whose name is not on the first line, definitions
 * produced by macros, nested functions in C++ namespaces indented by a formatter. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "scope/scope_int.h"

enum { L_NONE, L_C, L_PY, L_JS, L_GO, L_RS, L_JAVA, L_SWIFT };

static int lang_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    const char *b = slash ? slash + 1 : path;
    const char *dot = strrchr(b, '.');
    if (!dot) return L_NONE;
    const char *e = dot + 1;
    static const struct { const char *ext; int lang; } t[] = {
        {"c", L_C}, {"h", L_C}, {"cc", L_C}, {"cpp", L_C}, {"cxx", L_C}, {"hpp", L_C},
        {"hh", L_C}, {"hxx", L_C}, {"c++", L_C}, {"h++", L_C}, {"cu", L_C}, {"m", L_C},
        {"mm", L_C}, {"ino", L_C}, {"py", L_PY}, {"pyi", L_PY}, {"js", L_JS}, {"jsx", L_JS},
        {"mjs", L_JS}, {"cjs", L_JS}, {"ts", L_JS}, {"tsx", L_JS}, {"mts", L_JS}, {"cts", L_JS},
        {"go", L_GO}, {"rs", L_RS}, {"java", L_JAVA}, {"kt", L_JAVA}, {"scala", L_JAVA},
        {"swift", L_SWIFT},
    };
    for (size_t i = 0; i < sizeof t / sizeof *t; i++)
        if (!strcmp(e, t[i].ext)) return t[i].lang;
    return L_NONE;
}

const char *lcx__symbol_kind_name(int k)
{
    switch (k) {
    case LCX_SYM_FUNC: return "function";
    case LCX_SYM_CLASS: return "class";
    case LCX_SYM_STRUCT: return "struct";
    case LCX_SYM_METHOD: return "method";
    case LCX_SYM_TYPE: return "type";
    case LCX_SYM_MACRO: return "macro";
    case LCX_SYM_ENUM: return "enum";
    case LCX_SYM_VAR: return "variable";
    default: return "symbol";
    }
}

static bool id0(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$'; }
static bool id1(char c) { return id0(c) || (c >= '0' && c <= '9'); }

typedef struct {
    const char *p, *e;   /* cursor within the line */
} cur;

static void ws(cur *c) { while (c->p < c->e && (*c->p == ' ' || *c->p == '\t')) c->p++; }

static size_t ident(const cur *c)
{
    if (c->p >= c->e || !id0(*c->p)) return 0;
    const char *q = c->p + 1;
    while (q < c->e && id1(*q)) q++;
    return (size_t)(q - c->p);
}

/* Consumes keyword w (followed by a non-identifier char) and the blanks after it.
 * hot: ~10 keyword tries per source line (qualifiers, typedef, struct/class/union/enum,
 * then 23 non-function words on column-0 lines); the first-byte test rejects almost all
 * of them without the strlen + memcmp calls (0.4 of the build's 4.7 CPU-s on /usr/include
 * before). Every keyword is non-empty. */
static inline bool kw(cur *c, const char *w)
{
    if (c->p >= c->e || *c->p != *w) return false;
    size_t n = strlen(w);
    if ((size_t)(c->e - c->p) < n || memcmp(c->p, w, n)) return false;
    if (c->p + n < c->e && id1(c->p[n])) return false;
    c->p += n;
    ws(c);
    return true;
}

static bool any_kw(cur *c, const char *const *ws_, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (kw(c, ws_[i])) return true;
    return false;
}

typedef struct {
    lcx_symtmp *v;
    int n, cap;
    int err;
} syms;

static void add(syms *s, const char *name, size_t n, uint32_t line, int kind, const char *owner)
{
    if (s->err || n == 0 || n >= sizeof s->v[0].name) return;
    if (s->n == s->cap) {
        int nc = s->cap ? s->cap * 2 : 32;
        lcx_symtmp *nv = realloc(s->v, (size_t)nc * sizeof *nv);
        if (!nv) { s->err = LCX_ENOMEM; return; }
        s->v = nv;
        s->cap = nc;
    }
    lcx_symtmp *y = &s->v[s->n++];
    memset(y, 0, sizeof *y);
    memcpy(y->name, name, n);
    y->line = line;
    y->kind = (uint8_t)kind;
    if (owner) snprintf(y->owner, sizeof y->owner, "%s", owner);
}

static void add_ident(syms *s, cur *c, uint32_t line, int kind, const char *owner)
{
    size_t n = ident(c);
    if (n) add(s, c->p, n, line, kind, owner);
}

static bool ends_with_char(const char *p, const char *e, char ch)
{
    while (e > p && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r')) e--;
    /* ignore a trailing // comment */
    return e > p && e[-1] == ch;
}

/* ---- C / C++ */
static const char *const c_nonfunc[] = {
    "if", "else", "for", "while", "do", "switch", "case", "return", "goto", "typedef",
    "sizeof", "default", "break", "continue", "extern", "using", "namespace", "template",
    "public", "private", "protected", "static_assert", "_Static_assert",
};

static void c_line(syms *s, const char *p, const char *e, uint32_t line)
{
    cur c = {p, e};
    ws(&c);
    if (c.p < c.e && *c.p == '#') {
        c.p++;
        ws(&c);
        if (kw(&c, "define")) add_ident(s, &c, line, LCX_SYM_MACRO, NULL);
        return;
    }
    if (p < e && *p == '}') {   /* "} Name;" closing a typedef */
        c.p = p + 1;
        ws(&c);
        size_t n = ident(&c);
        if (n && c.p + n < c.e && c.p[n] == ';') add(s, c.p, n, line, LCX_SYM_TYPE, NULL);
        return;
    }
    cur k = c;
    static const char *const quals[] = {"static", "inline", "export", "extern", "constexpr"};
    while (any_kw(&k, quals, 5)) {}
    if (kw(&k, "typedef")) {
        if (ends_with_char(k.p, k.e, ';')) {
            /* last identifier before ';' or inside (*name) */
            const char *q = memchr(k.p, '(', (size_t)(k.e - k.p));
            if (q && q + 1 < k.e && q[1] == '*') {
                cur t = {q + 2, k.e};
                ws(&t);
                add_ident(s, &t, line, LCX_SYM_TYPE, NULL);
            } else {
                const char *semi = k.e;
                while (semi > k.p && semi[-1] != ';') semi--;
                const char *z = semi - 1;
                while (z > k.p && (z[-1] == ' ' || z[-1] == ']' || id1(z[-1]) || z[-1] == '[')) {
                    if (z[-1] == ' ') break;
                    z--;
                }
                cur t = {z, semi - 1};
                add_ident(s, &t, line, LCX_SYM_TYPE, NULL);
            }
            return;
        }
    }
    static const char *const rec[] = {"struct", "class", "union", "enum"};
    for (int i = 0; i < 4; i++) {
        cur t = k;
        if (kw(&t, rec[i])) {
            if (i == 3) { cur u = t; if (kw(&u, "class") || kw(&u, "struct")) t = u; }
            /* skip attributes like __attribute__((x)) or alignas() crudely: need ident */
            size_t n = ident(&t);
            if (!n || ends_with_char(t.p, t.e, ';')) {
                /* "struct X;" forward decl or "struct X var;" */
                if (!n) return;
                const char *after = t.p + n;
                while (after < t.e && (*after == ' ' || *after == '\t')) after++;
                if (!(after < t.e && (*after == '{' || *after == ':'))) {
                    if (ends_with_char(t.p, t.e, ';')) return;
                }
            }
            const char *after = t.p + n;
            while (after < t.e && (*after == ' ' || *after == '\t')) after++;
            /* a definition: "{", ":" (base/enum type), or end of line */
            if (after >= t.e || *after == '{' || *after == ':' || *after == '\r' || *after == '/') {
                add(s, t.p, n, line, i == 3 ? LCX_SYM_ENUM : i == 1 ? LCX_SYM_CLASS : LCX_SYM_STRUCT, NULL);
                return;
            }
            break;   /* e.g. "struct foo *make_foo(void)": maybe a function, fall through */
        }
    }
    /* function definition at column 0 */
    if (p >= e || !id0(*p)) return;
    cur f = {p, e};
    if (any_kw(&f, c_nonfunc, sizeof c_nonfunc / sizeof *c_nonfunc)) return;
    if (ends_with_char(p, e, ';') || ends_with_char(p, e, ',')) return;
    const char *par = memchr(p, '(', (size_t)(e - p));
    if (!par) return;
    if (memchr(p, '=', (size_t)(par - p))) return;
    const char *z = par;
    while (z > p && (z[-1] == ' ' || z[-1] == '\t')) z--;
    const char *ne = z;
    while (z > p && id1(z[-1])) z--;
    if (z == ne || !id0(*z)) return;
    char owner[64] = "";
    if (z - p >= 3 && z[-1] == ':' && z[-2] == ':') {
        const char *o = z - 2;
        const char *oe = o;
        while (o > p && (id1(o[-1]) || o[-1] == '>' || o[-1] == '<')) o--;
        size_t on = (size_t)(oe - o);
        if (on && on < sizeof owner) { memcpy(owner, o, on); owner[on] = 0; }
    }
    add(s, z, (size_t)(ne - z), line, owner[0] ? LCX_SYM_METHOD : LCX_SYM_FUNC, owner[0] ? owner : NULL);
}

/* ---- Python */
typedef struct { char name[64]; int indent; bool on; } scope_t;

/* Enters a class/impl block: its name owns the methods found at deeper indentation.
 * n < sizeof sc->name (callers check). */
static void scope_enter(scope_t *sc, const char *name, size_t n, int indent)
{
    memcpy(sc->name, name, n);
    sc->name[n] = 0;
    sc->indent = indent;
    sc->on = true;
}

static void py_line(syms *s, const char *p, const char *e, uint32_t line, scope_t *cls)
{
    cur c = {p, e};
    ws(&c);
    int indent = (int)(c.p - p);
    if (c.p >= c.e || *c.p == '#') return;
    if (cls->on && indent <= cls->indent) cls->on = false;
    if (kw(&c, "class")) {
        size_t n = ident(&c);
        if (n && n < sizeof cls->name) {
            add(s, c.p, n, line, LCX_SYM_CLASS, NULL);
            scope_enter(cls, c.p, n, indent);
        }
        return;
    }
    kw(&c, "async");
    if (kw(&c, "def")) {
        bool m = cls->on && indent > cls->indent;
        add_ident(s, &c, line, m ? LCX_SYM_METHOD : LCX_SYM_FUNC, m ? cls->name : NULL);
    }
}

/* ---- JS / TS */
static const char *const js_nonmethod[] = {
    "if", "for", "while", "switch", "catch", "function", "return", "with", "else", "new",
    "typeof", "await", "yield", "super", "this", "constructor",
};

static void js_line(syms *s, const char *p, const char *e, uint32_t line, scope_t *cls)
{
    cur c = {p, e};
    ws(&c);
    int indent = (int)(c.p - p);
    if (c.p >= c.e) return;
    if (cls->on && indent <= cls->indent && *c.p == '}') { cls->on = false; return; }
    static const char *const mods[] = {"export", "default", "declare", "abstract"};
    bool had_mod = false;
    for (;;) {
        if (any_kw(&c, mods, 4)) had_mod = true;
        else if (!kw(&c, "async")) break;
    }
    if (kw(&c, "function")) {
        if (c.p < c.e && *c.p == '*') { c.p++; ws(&c); }
        add_ident(s, &c, line, LCX_SYM_FUNC, NULL);
        return;
    }
    if (kw(&c, "class")) {
        size_t n = ident(&c);
        if (n && n < sizeof cls->name) {
            add(s, c.p, n, line, LCX_SYM_CLASS, NULL);
            scope_enter(cls, c.p, n, indent);
        }
        return;
    }
    if (kw(&c, "interface")) { add_ident(s, &c, line, LCX_SYM_TYPE, NULL); return; }
    if (kw(&c, "enum")) { add_ident(s, &c, line, LCX_SYM_ENUM, NULL); return; }
    {
        cur t = c;
        if (kw(&t, "type")) {
            size_t n = ident(&t);
            if (n && memchr(t.p + n, '=', (size_t)(t.e - t.p - n))) { add(s, t.p, n, line, LCX_SYM_TYPE, NULL); return; }
        }
    }
    static const char *const decl[] = {"const", "let", "var"};
    if (any_kw(&c, decl, 3)) {
        size_t n = ident(&c);
        if (!n) return;
        cur t = {c.p + n, c.e};
        ws(&t);
        if (t.p < t.e && *t.p == ':') {   /* TS type annotation: skip to '=' */
            const char *eq = memchr(t.p, '=', (size_t)(t.e - t.p));
            if (!eq) return;
            t.p = eq;
        }
        if (t.p >= t.e || *t.p != '=' || (t.p + 1 < t.e && t.p[1] == '=')) return;
        t.p++;
        ws(&t);
        bool fn = kw(&t, "async") || kw(&t, "function") || (t.p < t.e && *t.p == '(');
        if (!fn) {
            /* "x => …" */
            size_t m = ident(&t);
            cur u = {t.p + m, t.e};
            ws(&u);
            fn = m && u.e - u.p >= 2 && u.p[0] == '=' && u.p[1] == '>';
        }
        if (fn) add(s, c.p, n, line, LCX_SYM_FUNC, NULL);
        return;
    }
    /* method inside a class body: "name(args) {" possibly with static/get/set/async */
    if (!cls->on || indent <= cls->indent || had_mod) return;
    static const char *const mm[] = {"static", "get", "set", "public", "private", "protected",
                                     "readonly", "override", "async"};
    while (any_kw(&c, mm, sizeof mm / sizeof *mm)) {}
    if (c.p < c.e && *c.p == '#') c.p++;
    size_t n = ident(&c);
    if (!n) return;
    for (size_t i = 0; i < sizeof js_nonmethod / sizeof *js_nonmethod; i++)
        if (strlen(js_nonmethod[i]) == n && !memcmp(js_nonmethod[i], c.p, n)) return;
    cur t = {c.p + n, c.e};
    ws(&t);
    if (t.p < t.e && *t.p == '<') { const char *g = memchr(t.p, '>', (size_t)(t.e - t.p)); if (g) t.p = g + 1; }
    if (t.p >= t.e || *t.p != '(') return;
    if (!ends_with_char(t.p, t.e, '{')) return;
    add(s, c.p, n, line, LCX_SYM_METHOD, cls->name);
}

/* ---- Go */
static void go_line(syms *s, const char *p, const char *e, uint32_t line)
{
    cur c = {p, e};
    if (kw(&c, "func")) {
        char owner[64] = "";
        if (c.p < c.e && *c.p == '(') {
            const char *close = memchr(c.p, ')', (size_t)(c.e - c.p));
            if (!close) return;
            /* receiver type: last identifier inside the parentheses */
            const char *z = close;
            while (z > c.p && !id1(z[-1])) z--;
            const char *ze = z;
            while (z > c.p && id1(z[-1])) z--;
            size_t on = (size_t)(ze - z);
            if (on && on < sizeof owner) { memcpy(owner, z, on); owner[on] = 0; }
            c.p = close + 1;
            ws(&c);
        }
        add_ident(s, &c, line, owner[0] ? LCX_SYM_METHOD : LCX_SYM_FUNC, owner[0] ? owner : NULL);
        return;
    }
    if (kw(&c, "type")) {
        size_t n = ident(&c);
        if (!n) return;
        cur t = {c.p + n, c.e};
        ws(&t);
        int k = (kw(&t, "struct") || kw(&t, "interface")) ? LCX_SYM_STRUCT : LCX_SYM_TYPE;
        add(s, c.p, n, line, k, NULL);
    }
}

/* ---- Rust */
static void rs_line(syms *s, const char *p, const char *e, uint32_t line, scope_t *impl)
{
    cur c = {p, e};
    ws(&c);
    int indent = (int)(c.p - p);
    if (c.p >= c.e) return;
    if (impl->on && indent <= impl->indent && *c.p == '}') { impl->on = false; return; }
    for (;;) {
        if (kw(&c, "pub")) {
            if (c.p < c.e && *c.p == '(') {
                const char *q = memchr(c.p, ')', (size_t)(c.e - c.p));
                if (!q) return;
                c.p = q + 1;
                ws(&c);
            }
            continue;
        }
        if (kw(&c, "async") || kw(&c, "unsafe") || kw(&c, "default")) continue;
        {
            cur t = c;
            if (kw(&t, "const")) { cur u = t; if (kw(&u, "fn") || kw(&u, "unsafe") || kw(&u, "async")) { c = t; continue; } }
        }
        if (kw(&c, "extern")) {
            if (c.p < c.e && *c.p == '"') {
                const char *q = memchr(c.p + 1, '"', (size_t)(c.e - c.p - 1));
                if (!q) return;
                c.p = q + 1;
                ws(&c);
            }
            continue;
        }
        break;
    }
    if (kw(&c, "fn")) {
        bool m = impl->on && indent > impl->indent;
        add_ident(s, &c, line, m ? LCX_SYM_METHOD : LCX_SYM_FUNC, m ? impl->name : NULL);
        return;
    }
    if (kw(&c, "impl")) {
        if (c.p < c.e && *c.p == '<') {
            int depth = 0;
            while (c.p < c.e) {
                if (*c.p == '<') depth++;
                else if (*c.p == '>' && --depth == 0) { c.p++; break; }
                c.p++;
            }
            ws(&c);
        }
        /* "impl Trait for Type" → Type */
        const char *f = NULL;
        for (const char *q = c.p; q + 5 <= c.e; q++)
            if (!memcmp(q, " for ", 5)) { f = q + 5; break; }
        cur t = {f ? f : c.p, c.e};
        ws(&t);
        size_t n = ident(&t);
        if (n && n < sizeof impl->name) {
            scope_enter(impl, t.p, n, indent);
        }
        return;
    }
    static const struct { const char *w; int k; } defs[] = {
        {"struct", LCX_SYM_STRUCT}, {"enum", LCX_SYM_ENUM}, {"union", LCX_SYM_STRUCT},
        {"trait", LCX_SYM_TYPE}, {"type", LCX_SYM_TYPE}, {"mod", LCX_SYM_TYPE},
    };
    for (size_t i = 0; i < sizeof defs / sizeof *defs; i++)
        if (kw(&c, defs[i].w)) { add_ident(s, &c, line, defs[i].k, NULL); return; }
    if (c.e - c.p > 12 && !memcmp(c.p, "macro_rules!", 12)) {
        c.p += 12;
        ws(&c);
        add_ident(s, &c, line, LCX_SYM_MACRO, NULL);
    }
}

/* ---- Java (and Kotlin/Scala class lines) */
static const char *const java_mods[] = {
    "public", "private", "protected", "static", "final", "abstract", "synchronized", "native",
    "default", "sealed", "strictfp", "transient", "open", "data", "override", "internal",
};
static const char *const java_non[] = {
    "if", "for", "while", "switch", "catch", "return", "new", "else", "throw", "try", "do",
    "super", "this", "synchronized",
};

static void java_line(syms *s, const char *p, const char *e, uint32_t line, scope_t *cls)
{
    cur c = {p, e};
    ws(&c);
    int indent = (int)(c.p - p);
    if (c.p >= c.e || *c.p == '@' || *c.p == '/' || *c.p == '*') return;
    while (any_kw(&c, java_mods, sizeof java_mods / sizeof *java_mods)) {}
    static const char *const cl[] = {"class", "interface", "enum", "record", "object"};
    for (int i = 0; i < 5; i++) {
        if (kw(&c, cl[i])) {
            size_t n = ident(&c);
            if (n && n < sizeof cls->name) {
                add(s, c.p, n, line, i == 2 ? LCX_SYM_ENUM : LCX_SYM_CLASS, NULL);
                scope_enter(cls, c.p, n, indent);
            }
            return;
        }
    }
    if (kw(&c, "fun")) {   /* Kotlin */
        add_ident(s, &c, line, cls->on ? LCX_SYM_METHOD : LCX_SYM_FUNC, cls->on ? cls->name : NULL);
        return;
    }
    if (!cls->on || ends_with_char(c.p, c.e, ';')) return;
    const char *par = memchr(c.p, '(', (size_t)(c.e - c.p));
    if (!par || memchr(c.p, '=', (size_t)(par - c.p))) return;
    const char *z = par;
    while (z > c.p && (z[-1] == ' ' || z[-1] == '\t')) z--;
    const char *ne = z;
    while (z > c.p && id1(z[-1])) z--;
    if (z == ne || z == c.p) return;   /* need a return type (or the class name for ctors) before */
    cur f = c;
    if (any_kw(&f, java_non, sizeof java_non / sizeof *java_non)) return;
    /* the text before the name must look like a type: identifiers, <>, [], '.', ',', ' ' */
    for (const char *q = c.p; q < z; q++)
        if (!(id1(*q) || strchr(" \t<>[],.?", *q))) return;
    add(s, z, (size_t)(ne - z), line, LCX_SYM_METHOD, cls->name);
}

/* ---- Swift */
static void swift_line(syms *s, const char *p, const char *e, uint32_t line, scope_t *cls)
{
    cur c = {p, e};
    ws(&c);
    int indent = (int)(c.p - p);
    if (c.p >= c.e) return;
    if (cls->on && indent <= cls->indent && *c.p == '}') { cls->on = false; return; }
    static const char *const mods[] = {
        "public", "private", "internal", "fileprivate", "open", "static", "final", "override",
        "mutating", "nonmutating", "class", "convenience", "required", "dynamic", "lazy",
        "indirect", "async", "nonisolated",
    };
    for (;;) {
        if (c.p < c.e && *c.p == '@') {   /* @objc, @MainActor, @available(…) */
            c.p++;
            size_t n = ident(&c);
            c.p += n;
            if (c.p < c.e && *c.p == '(') {
                const char *q = memchr(c.p, ')', (size_t)(c.e - c.p));
                c.p = q ? q + 1 : c.e;
            }
            ws(&c);
            continue;
        }
        cur t = c;
        if (kw(&t, "class")) {   /* "class func" vs "class Name" */
            cur u = t;
            if (kw(&u, "func") || kw(&u, "var")) { c = t; continue; }
            size_t n = ident(&t);
            if (n && n < sizeof cls->name) {
                add(s, t.p, n, line, LCX_SYM_CLASS, NULL);
                scope_enter(cls, t.p, n, indent);
            }
            return;
        }
        if (any_kw(&c, mods, sizeof mods / sizeof *mods)) continue;
        break;
    }
    if (kw(&c, "func")) {
        bool m = cls->on && indent > cls->indent;
        add_ident(s, &c, line, m ? LCX_SYM_METHOD : LCX_SYM_FUNC, m ? cls->name : NULL);
        return;
    }
    static const struct { const char *w; int k; } defs[] = {
        {"struct", LCX_SYM_STRUCT}, {"enum", LCX_SYM_ENUM}, {"protocol", LCX_SYM_TYPE},
        {"extension", LCX_SYM_TYPE}, {"actor", LCX_SYM_CLASS},
    };
    for (size_t i = 0; i < sizeof defs / sizeof *defs; i++) {
        if (kw(&c, defs[i].w)) {
            size_t n = ident(&c);
            if (n && n < sizeof cls->name) {
                if (defs[i].k != LCX_SYM_TYPE || strcmp(defs[i].w, "extension"))
                    add(s, c.p, n, line, defs[i].k, NULL);
                scope_enter(cls, c.p, n, indent);
            }
            return;
        }
    }
}

/* Whether [p, e) holds a closing block-comment mark. */
static bool has_comment_end(const char *p, const char *e)
{
    while (p + 1 < e) {
        const char *q = memchr(p, '*', (size_t)(e - p - 1));
        if (!q) return false;
        if (q[1] == '/') return true;
        p = q + 1;
    }
    return false;
}

int lcx__symbols_extract(const char *relpath, const char *text, size_t len, lcx_symbol **out)
{
    *out = NULL;
    int lang = lang_of(relpath);
    if (lang == L_NONE) return 0;
    syms s = {0};
    scope_t cls = {{0}, 0, false};
    uint32_t line = 0;
    size_t i = 0;
    bool in_block_comment = false;
    while (i < len && !s.err) {
        size_t b = i;
        const char *nl = memchr(text + i, '\n', len - i);   /* libc's vector scan, not a byte loop */
        i = nl ? (size_t)(nl - text) : len;
        const char *p = text + b, *e = text + i;
        i++;
        line++;
        if (e - p > 1024) continue;   /* minified code: no useful definitions per line */
        /* C-family block comments: skip lines inside / starting a comment */
        if (lang != L_PY) {
            cur c = {p, e};
            ws(&c);
            if (in_block_comment) {
                if (has_comment_end(p, e)) in_block_comment = false;
                continue;
            }
            if (c.e - c.p >= 2 && c.p[0] == '/' && c.p[1] == '*') {
                in_block_comment = !has_comment_end(c.p + 2, e);
                continue;
            }
            if (c.e - c.p >= 2 && c.p[0] == '/' && c.p[1] == '/') continue;
        }
        switch (lang) {
        case L_C: c_line(&s, p, e, line); break;
        case L_PY: py_line(&s, p, e, line, &cls); break;
        case L_JS: js_line(&s, p, e, line, &cls); break;
        case L_GO: go_line(&s, p, e, line); break;
        case L_RS: rs_line(&s, p, e, line, &cls); break;
        case L_JAVA: java_line(&s, p, e, line, &cls); break;
        case L_SWIFT: swift_line(&s, p, e, line, &cls); break;
        }
    }
    if (s.err) { free(s.v); return s.err; }
    int rc = lcx__symbols_pack(s.v, s.n, out);
    free(s.v);
    return rc < 0 ? rc : s.n;
}

int lcx__symbols_pack(const lcx_symtmp *v, int n, lcx_symbol **out)
{
    *out = NULL;
    if (n <= 0) return 0;
    size_t bytes = (size_t)n * sizeof(lcx_symbol);
    for (int i = 0; i < n; i++) bytes += strlen(v[i].name) + strlen(v[i].owner) + 2;
    lcx_symbol *o = malloc(bytes);
    if (!o) return LCX_ENOMEM;
    char *p = (char *)(o + n);
    for (int i = 0; i < n; i++) {
        size_t a = strlen(v[i].name) + 1, b = strlen(v[i].owner) + 1;
        memcpy(p, v[i].name, a);
        o[i].name = p;
        p += a;
        memcpy(p, v[i].owner, b);
        o[i].owner = p;
        p += b;
        o[i].line = v[i].line;
        o[i].kind = v[i].kind;
    }
    *out = o;
    return 0;
}
