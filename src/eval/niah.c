/* NIAH strict grader (SPEC §6): PASS only for the exact, case-sensitive answer phrase in the
 * generated text; partial credit is reported separately for the word part and the number
 * part so a model that says "purple elephant" or "7742" alone is told apart from one that
 * found nothing. Matches respect token boundaries ("7742" does not match inside "77421",
 * "ELEPHANT" not inside "ELEPHANTS"). Only generated text is graded: an echoed prompt in
 * front of it is stripped first, because the prompt contains the needle. */
#include "eval/lcx_eval.h"
#include <ctype.h>
#include <string.h>

static int is_tok(unsigned char c) { return isalnum(c) || c >= 0x80; }

/* occurrence of needle[0..n) in hay bounded by non-token characters */
static int has_bounded(const char *hay, const char *needle, size_t n)
{
    if (!n) return 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++) {
        int left = p == hay || !is_tok((unsigned char)p[-1]);
        int right = !is_tok((unsigned char)p[n]);
        if (left && right) return 1;
    }
    return 0;
}

/* bounded search for a token given as (ptr, len) */
static int has_tok(const char *hay, const char *t, size_t n)
{
    char buf[256];
    if (n == 0 || n >= sizeof buf) return 0;
    memcpy(buf, t, n);
    buf[n] = 0;
    return has_bounded(hay, buf, n);
}

int lcx__niah_grade(const char *generated, const char *prompt, const char *answer)
{
    if (!generated || !answer || !*answer) return LCX_EINVAL;
    const char *g = generated;
    if (prompt && *prompt) {
        size_t pl = strlen(prompt);
        if (!strncmp(g, prompt, pl)) g += pl;
    }
    /* the answer without trailing sentence punctuation */
    char ans[512];
    size_t al = strlen(answer);
    if (al >= sizeof ans) return LCX_ELIMIT;
    memcpy(ans, answer, al + 1);
    while (al && (ans[al - 1] == '.' || ans[al - 1] == '!' || isspace((unsigned char)ans[al - 1]))) ans[--al] = 0;
    if (has_bounded(g, ans, al)) return LCX_NIAH_PASS;
    int words = 0, words_hit = 0, nums = 0, nums_hit = 0;
    for (size_t i = 0; i < al;) {
        while (i < al && !is_tok((unsigned char)ans[i])) i++;
        size_t b = i;
        while (i < al && is_tok((unsigned char)ans[i])) i++;
        if (i == b) break;
        int digit = 1;
        for (size_t k = b; k < i; k++) if (!isdigit((unsigned char)ans[k])) digit = 0;
        int hit = has_tok(g, ans + b, i - b);
        if (digit) { nums++; nums_hit += hit; }
        else { words++; words_hit += hit; }
    }
    if (words && words_hit == words) return LCX_NIAH_PARTIAL_WORD;
    if (nums && nums_hit == nums) return LCX_NIAH_PARTIAL_NUMBER;
    return LCX_NIAH_FAIL;
}

const char *lcx__niah_grade_name(int g)
{
    switch (g) {
    case LCX_NIAH_PASS: return "PASS";
    case LCX_NIAH_PARTIAL_WORD: return "PARTIAL_WORD";
    case LCX_NIAH_PARTIAL_NUMBER: return "PARTIAL_NUMBER";
    case LCX_NIAH_FAIL: return "FAIL";
    default: return "?";
    }
}
