#!/usr/bin/env python3
"""Deterministic data for the needle model (models/needle/README.md): long filler, 1-3 planted
facts of the SPEC §6 shape, questions at the end in the ChatML rendering the engine applies
to a model without a chat template (src/engine/chat.c), answers = the digits then EOS.

Needs only the standard library. Held-out facts: a name or a code is HELD OUT when
crc32(it) % HOLD_MOD == 0, and NOVA / 481729 (the ramp's fact) always are. Training facts are
never held out and their codes contain no held-out digit run; evaluation facts are drawn
only from the held-out class.

    needle_data.py sample --seed S [--n N]     training samples (text view) to stdout
    needle_data.py eval --seed S --size T --depth D --n N   held-out single-fact prompts (JSONL)
    needle_data.py tokcheck --seed S [--n N]   texts and the ids this tokenizer gives them
"""
import json
import os
import struct
import sys
import zlib

FILLER = ("the routine quarterly procedure required careful review of the documented "
          "operational records during the assessment cycle.")
FACT = ("IMPORTANT: Project {name} was provisioned with access code {code}. All technicians "
        "must memorize this code prior to deployment.")
QUESTION = "What is the access code for Project {name}? Answer with only the digits."
TURN1_ASK = "Please respond with just 'OK'"
RESCUE_HEAD = ("[Recovered context from earlier in this session (evicted from KV cache, restored "
               "via longctx)]:\n")
RESCUE_BLOCK = "\n--- evicted span (tokens {a}..{b}, layer {l}) ---\n{text}\n"
HOLD_MOD = 16
ALWAYS_HELD = {"NOVA", "481729"}
BOS, EOS = 1, 2
WORDS = ("the of and to in is was that for it as with be on not this by are or at from but have "
         "an they which one you were all we her she there would their will when who him been has "
         "more if no out so said what up its about into than them can only other new some time "
         "could these two may then do first any my now such like our over man me even most made "
         "after also did many before must through back years where much your way well down should "
         "because each just those people how too little state good very make world still own see "
         "men work long get here between both life being under never day same another know while "
         "last might us great old year off come since against go came right used take three "
         "system report review record cycle budget office staff audit memo policy schedule "
         "meeting quarter account ledger vendor contract invoice storage archive network server "
         "signal module sensor console cable panel valve engine rotor").split()


def here():
    return os.path.dirname(os.path.abspath(__file__))


def fixtures():
    f = os.environ.get("LCX_FIXTURES")
    if f:
        return f
    return os.path.normpath(os.path.join(here(), "..", "..", "..", "shared", "fixtures"))


class Rng:
    """splitmix64: the same stream on every Python version (random.Random is not promised)."""

    def __init__(self, seed):
        self.s = (seed * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019) & (2**64 - 1)

    def u64(self):
        self.s = (self.s + 0x9E3779B97F4A7C15) & (2**64 - 1)
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & (2**64 - 1)
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & (2**64 - 1)
        return z ^ (z >> 31)

    def below(self, n):
        return self.u64() % n

    def uniform(self):
        return (self.u64() >> 11) / float(1 << 53)

    def choice(self, seq):
        return seq[self.below(len(seq))]

    def range(self, a, b):  # inclusive
        return a + self.below(b - a + 1)


def held(s):
    return s in ALWAYS_HELD or zlib.crc32(s.encode()) % HOLD_MOD == 0


def code_has_held_run(code):
    return any(held(code[i:j]) for i in range(len(code)) for j in range(i + 4, len(code) + 1))


def make_name(r):
    return "".join(chr(65 + r.below(26)) for _ in range(r.range(3, 8)))


def make_code(r):
    n = r.range(4, 8)
    return str(r.range(1, 9)) + "".join(str(r.below(10)) for _ in range(n - 1))


def train_name(r):
    while True:
        s = make_name(r)
        if not held(s):
            return s


def train_code(r):
    while True:
        c = make_code(r)
        if not code_has_held_run(c):
            return c


def heldout_name(r):
    while True:
        s = make_name(r)
        if held(s) and len(s) >= 4:
            return s


def heldout_code(r):
    while True:
        c = make_code(r)
        if held(c):
            return c


# ---- tokenizer: tok512 as the engine's SPM tokenizer runs it (src/engine/tok_spm.c) ----------
class Tok:
    """Score-driven BPE with a dummy prefix and byte fallback. No tok512 piece holds a space
    except as its first character, and none holds a newline, so a text splits into segments
    (before every space, around every newline) that tokenize independently: cached per segment."""

    def __init__(self, path=None):
        path = path or os.path.join(fixtures(), "llama2c", "tok512.bin")
        d = open(path, "rb").read()
        o = 4
        self.pieces, self.score = [], {}
        for i in range(struct.unpack_from("<i", d, 0)[0] and 512):
            sc, ln = struct.unpack_from("<fi", d, o)
            o += 8
            p = d[o:o + ln].decode("utf-8")
            o += ln
            self.pieces.append(p)
            if i >= 259:  # 0..2 specials, 3..258 byte tokens
                self.score[p] = (sc, i)
        self.cache = {}

    def _seg(self, s):
        t = self.cache.get(s)
        if t is not None:
            return t
        syms = list(s)
        while True:
            best, bi = None, -1
            for i in range(len(syms) - 1):
                e = self.score.get(syms[i] + syms[i + 1])
                if e and (best is None or e[0] > best):
                    best, bi = e[0], i
            if bi < 0:
                break
            syms[bi:bi + 2] = [syms[bi] + syms[bi + 1]]
        out = []
        for sy in syms:
            e = self.score.get(sy)
            if e:
                out.append(e[1])
            else:
                out.extend(b + 3 for b in sy.encode("utf-8"))
        self.cache[s] = out
        return out

    def encode(self, text, first=False):
        """Ids of text as a piece of a longer text; first=True adds the dummy prefix (the
        engine's tokenize of a whole string). Pieces must start at a segment boundary."""
        if first:
            text = " " + text
        ids, cur = [], ""
        for ch in text:
            if ch == " " or ch == "\n":
                if cur:
                    ids += self._seg(cur)
                cur = ""
                if ch == "\n":
                    ids.append(10 + 3)
                    continue
            cur += ch
        if cur:
            ids += self._seg(cur)
        return ids

    def decode(self, ids):
        b = b""
        for i in ids:
            if 3 <= i <= 258:
                b += bytes([i - 3])
            elif i > 258:
                b += self.pieces[i].encode()
        return b.decode("utf-8", "replace")


# ---- filler ------------------------------------------------------------------------------
_ESSAYS = None


def essays():
    global _ESSAYS
    if _ESSAYS is None:
        d = os.path.join(fixtures(), "haystack", "paul_graham")
        out = []
        if os.path.isdir(d):
            for f in sorted(os.listdir(d)):
                t = open(os.path.join(d, f), encoding="utf-8", errors="replace").read()
                out.append(" ".join(t.split()))
        _ESSAYS = out
    return _ESSAYS


def filler_sentences(r, kind, n_chars):
    """A list of sentences (no leading space) of about n_chars characters."""
    out, tot = [], 0
    if kind == "essay" and not essays():
        kind = "words"
    if kind == "essay":
        e = r.choice(essays())
        at = r.below(max(1, len(e) - n_chars))
        txt = e[at:at + n_chars]
        # start at a word, keep the digits of the essays out of codes' way by words only
        parts = txt.split(" ")[1:]
        while parts:
            chunk = parts[:r.range(8, 24)]
            parts = parts[len(chunk):]
            out.append(" ".join(chunk))
        return out
    while tot < n_chars:
        if kind == "spec" or (kind == "mix" and r.below(2) == 0):
            s = FILLER
        else:
            s = " ".join(r.choice(WORDS) for _ in range(r.range(6, 20))) + "."
        out.append(s)
        tot += len(s) + 1
    return out


# ---- samples -----------------------------------------------------------------------------
def chatml(role, content):
    return "<|im_start|>" + role + "\n" + content + "<|im_end|>\n"


class Sample:
    """ids, pos, tgt (-1 = no loss): the model's view of one conversation. Dropped tokens
    (evicted cells) still use up their positions, so survivors keep theirs."""

    def __init__(self, offset=0):
        self.ids, self.pos, self.tgt, self.text = [BOS], [offset], [-1], []
        self.fill = [0]    # 1 = a filler token of the blob (train.py's long-context stage)
        self.next = offset + 1

    def add(self, tok, text, first=False, keep=None, reply=False, fill=False):
        t = tok.encode(text, first)
        self.text.append(text)
        n0 = len(self.ids)
        for i, x in enumerate(t):
            if keep is None or keep(i):
                self.ids.append(x)
                self.pos.append(self.next + i)
                self.tgt.append(-1)
                self.fill.append(1 if fill else 0)
        self.next += len(t)
        if reply:
            # each reply token is predicted at the position before it; EOS after the last
            for i in range(len(t)):
                self.tgt[n0 + i - 1] = t[i]
            self.tgt[-1] = EOS
        return t

    def hole(self, g):
        self.next += g


def build(tok, r, n_blob_tokens=None, facts=None, ask=None, fmt=None, evict=None, offset=None,
          kinds=("spec", "spec", "essay", "words", "mix"), depths=None, n_facts=None, partial=0.0,
          spans=0.0):
    """One sample. Everything random comes from r; the arguments pin what eval needs.
    partial: probability that a fact which comes back in the rescue message loses only some
    of its tokens in the blob (runs dropped, as V3 leaves it when it evicts by score) instead
    of all or none; 0 draws nothing (the streams of earlier stages stay byte-identical).
    spans: probability that the rescue message has the engine's shape (span_blocks) instead of
    whole sentences; 0 draws nothing."""
    if n_blob_tokens is None:
        n_blob_tokens = int(16 * (2 ** (r.uniform() * 4.0)))   # 16 .. 256 tokens, log-uniform
    if facts is None:
        k = n_facts or (1 if r.below(10) < 6 else r.range(2, 3))
        names, facts = set(), []
        while len(facts) < k:
            nm = train_name(r)
            if any(nm.startswith(x) or x.startswith(nm) for x in names):
                continue
            names.add(nm)
            facts.append((nm, train_code(r)))
    kind = r.choice(kinds)
    chars_per_tok = 1.25 if kind != "essay" else 2.4
    sents = filler_sentences(r, kind, int(n_blob_tokens * chars_per_tok))
    if depths is None:
        depths = [r.uniform() for _ in facts]
    at = sorted((min(len(sents), int(d * len(sents) + 0.5)), i) for i, d in enumerate(depths))
    pieces, j = [], 0   # (text, fact index or None)
    for s_i in range(len(sents) + 1):
        while j < len(at) and at[j][0] == s_i:
            nm, cd = facts[at[j][1]]
            pieces.append((FACT.format(name=nm, code=cd), at[j][1]))
            j += 1
        if s_i < len(sents):
            pieces.append((sents[s_i], None))
    if ask is None:
        ask = [r.below(len(facts)) for _ in range(r.range(1, 2))]
    if fmt is None:
        fmt = r.choice(["single", "single", "two", "rescue", "rescue2"])
    if evict is None:
        evict = 0.0 if r.below(2) else r.uniform() * 0.95
    if offset is None:
        offset = 0 if r.below(2) else r.below(1 << 18)
    rescued = set()
    if fmt in ("rescue", "rescue2"):
        rescued = set(i for i in range(len(facts)) if r.below(3) > 0) | {ask[0]}

    S = Sample(offset)
    S.add(tok, "<|im_start|>user\n", first=True)
    # the blob: filler cells are dropped in runs at rate `evict` (V3's holes; positions stay)
    state = {"drop": False}

    def filler_keep(_i):
        if state["drop"]:
            if r.uniform() < 1 / 24:
                state["drop"] = False
        elif r.uniform() < evict / 24 / max(1e-3, 1 - evict):
            state["drop"] = True
        return not state["drop"]

    for n, (text, fi) in enumerate(pieces):
        t = text if n == 0 else " " + text
        if fi is None:
            S.add(tok, t, keep=filler_keep if evict > 0 else None, fill=True)
        else:
            if fi in rescued and partial > 0 and r.uniform() < partial:
                # partly evicted: runs of the fact's tokens dropped, the rest kept in place
                st = {"drop": r.below(2) == 0}

                def fact_keep(_i):
                    if r.below(4) == 0:
                        st["drop"] = not st["drop"]
                    return not st["drop"]
                S.add(tok, t, keep=fact_keep)
            else:
                gone = fi in rescued and r.below(4) > 0      # evicted, comes back in the rescue
                S.add(tok, t, keep=(lambda i: False) if gone else None)
        if r.below(64) == 0:     # a larger hole, as when a whole span was evicted
            S.hole(r.below(1 << 14))
    if fmt == "single":
        S.add(tok, " \n\n" + QUESTION.format(name=facts[ask[0]][0]) + "<|im_end|>\n<|im_start|>assistant\n")
    elif fmt in ("two", "rescue2"):
        S.add(tok, " \n\n" + TURN1_ASK + "<|im_end|>\n<|im_start|>assistant\n")
        S.add(tok, "OK", reply=True)
        S.add(tok, "<|im_end|>\n")
    else:
        S.add(tok, "<|im_end|>\n")
    if fmt in ("rescue", "rescue2") and spans > 0 and r.uniform() < spans:
        body = RESCUE_HEAD
        for a, l, text in span_blocks(r, kind, [facts[fi] for fi in sorted(rescued)]):
            body += RESCUE_BLOCK.format(a=a, b=a + 128, l=l, text=text)
        S.add(tok, chatml("system", body))
    elif fmt in ("rescue", "rescue2"):
        blocks = []
        for fi in sorted(rescued):
            nm, cd = facts[fi]
            ctx = filler_sentences(r, kind, r.range(0, 80))
            cut = r.below(len(ctx) + 1)
            blocks.append(" ".join(ctx[:cut] + [FACT.format(name=nm, code=cd)] + ctx[cut:]))
        for _ in range(r.range(0, 2)):
            blocks.insert(r.below(len(blocks) + 1), " ".join(filler_sentences(r, kind, r.range(20, 100))))
        body = RESCUE_HEAD
        for b in blocks:
            a = r.below(1 << 16)
            body += RESCUE_BLOCK.format(a=a, b=a + r.range(16, 512), l=r.below(4), text=b)
        S.add(tok, chatml("system", body))
    for qi, f in enumerate(ask):
        if not (qi == 0 and fmt == "single"):
            S.add(tok, "<|im_start|>user\n" + QUESTION.format(name=facts[f][0]) + "<|im_end|>\n<|im_start|>assistant\n")
        S.add(tok, facts[f][1], reply=True)
        S.add(tok, "<|im_end|>\n")
    return S, facts, ask


def span_blocks(r, kind, facts):
    """Rescue blocks as longctx returns them (seen in the ramp at 2K): several overlapping
    windows of one fixed length cut out of the evicted text at arbitrary characters, one or
    more around each fact, some holding only part of it (cut before or inside the code), in
    no particular order. One window per fact holds it whole. Cuts never fall inside a name
    (a piece of a name could be a held-out name). Returns [(token start, layer, text)]."""
    W = r.range(150, 230)                  # ~128 tokens of this text
    out = []
    for nm, cd in facts:
        pre = " ".join(filler_sentences(r, kind, r.range(60, 400)))
        post = " ".join(filler_sentences(r, kind, r.range(60, 400)))
        fact = FACT.format(name=nm, code=cd)
        ctx = pre + " " + fact + " " + post
        fs, fe = len(pre) + 1, len(pre) + 1 + len(fact)
        ns = fs + fact.index(nm)
        ne = ns + len(nm)
        base = r.below(1 << 16)

        def window(a):
            a = max(0, min(a, len(ctx) - 1))
            b = min(len(ctx), a + W)
            if ns < a < ne:
                a = ns
            if ns < b < ne:
                b = ne
            return (base + int(a * 0.7), 0 if r.below(4) else r.below(4), ctx[a:b])
        out.append(window(r.range(max(0, fe - W), max(max(0, fe - W), fs))))
        for _ in range(r.range(0, 5)):
            out.append(window(r.range(max(0, fs - W + 8), fe - 4)))
    for i in range(len(out) - 1, 0, -1):     # Fisher-Yates with the deterministic stream
        j = r.below(i + 1)
        out[i], out[j] = out[j], out[i]
    return out


def sample_stream(seed, tok=None):
    tok = tok or Tok()
    r = Rng(seed)
    while True:
        yield build(tok, r)


def render_prompt(facts, n_fill_sents, depth, ask, kind="spec", r=None):
    """A single-turn prompt as the ramp renders it (text, without BOS)."""
    r = r or Rng(0)
    sents = filler_sentences(r, kind, n_fill_sents * (len(FILLER) + 1)) if kind != "spec" else [FILLER] * n_fill_sents
    at = min(len(sents), int(depth * len(sents) + 0.5))
    parts = sents[:at] + [FACT.format(name=n, code=c) for n, c in facts] + sents[at:]
    blob = " ".join(parts) + " "
    return chatml("user", blob + "\n\n" + QUESTION.format(name=facts[ask][0])) + "<|im_start|>assistant\n"


def main(argv):
    cmd = argv[1] if len(argv) > 1 else "sample"
    args = dict(zip(argv[2::2], argv[3::2]))
    seed = int(args.get("--seed", 1))
    tok = Tok()
    if cmd == "sample":
        n = int(args.get("--n", 10))
        r = Rng(seed)
        for _ in range(n):
            S, facts, ask = build(tok, r)
            sys.stdout.write(json.dumps({"text": "".join(S.text), "facts": facts, "ask": ask,
                                         "ids": S.ids, "pos": S.pos, "tgt": S.tgt}) + "\n")
    elif cmd == "tokcheck":
        # whole conversations without dropped cells: text and the ids training uses for it
        r = Rng(seed)
        for i in range(int(args.get("--n", 8))):
            S, _, _ = build(tok, r, evict=0.0, fmt=("single", "two")[i % 2])
            sys.stdout.write(json.dumps({"text": "".join(S.text), "ids": S.ids}) + "\n")
    elif cmd == "eval":
        # held-out single-fact prompts: --size tokens of rendered prompt, --depth, --n
        size, depth, n = int(args["--size"]), float(args["--depth"]), int(args.get("--n", 10))
        kind = args.get("--kind", "spec")
        r = Rng(seed * 7919 + 17)
        per = len(tok.encode(" " + FILLER))
        over = len(tok.encode(render_prompt([("NOVA", "481729")], 0, 0.5, 0), first=True)) + 1
        for _ in range(n):
            nm, cd = heldout_name(r), heldout_code(r)
            nf = max(0, (size - over - 16) // per)
            p = render_prompt([(nm, cd)], nf, depth, 0, kind, r)
            sys.stdout.write(json.dumps({"prompt": p, "answer": cd, "name": nm, "size": size,
                                         "depth": depth}) + "\n")
    else:
        sys.exit("usage: needle_data.py sample|eval --seed S ...")


if __name__ == "__main__":
    main(sys.argv)
