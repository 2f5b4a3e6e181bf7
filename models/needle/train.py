#!/usr/bin/env python3
"""Trains the needle model (models/needle/README.md) with Debian's PyTorch and writes it as a
llama2.c checkpoint, which `longctx-engine convert-llama2c` turns into GGUF (then
`needle-gguf-set` sets the RoPE keys llama2.c's header cannot carry).

    /usr/bin/python3 models/needle/train.py --out DIR [--steps N] [--minutes M] [--seed S]

Deterministic: fixed seeds, torch.set_num_threads(THREADS), data from needle_data.Rng.
The model is llama as the engine runs it: RMSNorm, RoPE NORM (adjacent pairs) on the first
N_ROT dims of each head (the rest carry no position, so matching by content works at any
distance), GQA, SwiGLU, tied output."""
import argparse
import json
import math
import os
import struct
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import needle_data as nd  # noqa: E402

CFG = dict(dim=128, hidden=384, n_layers=3, n_heads=4, n_kv_heads=2, vocab=512, n_rot=16,
           theta=10000.0, eps=1e-5)
THREADS = 1   # OpenMP spin-waits badly on a loaded 2-core host: 1 thread was 6x faster


class Model(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        d, h, L = c["dim"], c["hidden"], c["n_layers"]
        self.hd = d // c["n_heads"]
        kv = self.hd * c["n_kv_heads"]
        self.emb = torch.nn.Embedding(c["vocab"], d)
        self.layers = torch.nn.ModuleList()
        for _ in range(L):
            m = torch.nn.Module()
            m.an = torch.nn.Parameter(torch.ones(d))
            m.wq = torch.nn.Linear(d, d, bias=False)
            m.wk = torch.nn.Linear(d, kv, bias=False)
            m.wv = torch.nn.Linear(d, kv, bias=False)
            m.wo = torch.nn.Linear(d, d, bias=False)
            m.fn = torch.nn.Parameter(torch.ones(d))
            m.w1 = torch.nn.Linear(d, h, bias=False)
            m.w2 = torch.nn.Linear(h, d, bias=False)
            m.w3 = torch.nn.Linear(d, h, bias=False)
            self.layers.append(m)
        self.norm = torch.nn.Parameter(torch.ones(d))
        torch.nn.init.normal_(self.emb.weight, std=0.02)
        for m in self.layers:
            for w in (m.wq, m.wk, m.wv, m.w1, m.w3):
                torch.nn.init.normal_(w.weight, std=0.02)
            for w in (m.wo, m.w2):
                torch.nn.init.normal_(w.weight, std=0.02 / math.sqrt(2 * L))

    def rms(self, x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.c["eps"]) * w

    # "exact": float64 angles (training). "engine": the angles the engine computes (ggml /
    # llama.cpp contract, src/engine/forward.c rope_cache), for the engine-vs-reference test.
    rope_angles = "exact"

    def rope_tables(self, pos, dtype):
        # one table per forward for every layer
        nr = self.c["n_rot"]
        if self.rope_angles == "engine":
            ang = torch.from_numpy(engine_rope_angles(pos.numpy(), nr, self.c["theta"]))
        else:   # float64 (positions up to 256K)
            i = torch.arange(nr // 2, dtype=torch.float64)
            ang = pos.to(torch.float64)[..., None] * self.c["theta"] ** (-2.0 * i / nr)
        return ang.cos().to(dtype)[:, :, None, :], ang.sin().to(dtype)[:, :, None, :]

    def rope(self, x, tab):
        # x (B, T, H, hd); NORM pairs (2i, 2i+1) for i < n_rot/2
        nr = self.c["n_rot"]
        cos, sin = tab
        a, b = x[..., 0:nr:2], x[..., 1:nr:2]
        ra, rb = a * cos - b * sin, a * sin + b * cos
        rot = torch.stack((ra, rb), dim=-1).flatten(-2)
        return torch.cat((rot, x[..., nr:]), dim=-1)

    def forward(self, ids, pos, q_chunk=0, kbias=None):
        """kbias (B, T): added to every head's score on that key (training only: ln K on a
        filler token stands for K copies of it, a K-times longer context; the engine has no
        such input and runs with 0)."""
        B, T = ids.shape
        H, KV, hd = self.c["n_heads"], self.c["n_kv_heads"], self.hd
        x = self.emb(ids)
        # (B, 1, Tq, Tk) additive: causal by position, so padding placed after is never seen
        mask = torch.zeros(B, 1, T, T, dtype=x.dtype).masked_fill(
            (pos[:, None, :] > pos[:, :, None])[:, None], float("-inf"))
        if kbias is not None:
            mask = mask + kbias.to(x.dtype)[:, None, None, :]
        tab = self.rope_tables(pos, x.dtype)
        for m in self.layers:
            h = self.rms(x, m.an)
            q = self.rope(m.wq(h).view(B, T, H, hd), tab)
            k = self.rope(m.wk(h).view(B, T, KV, hd), tab)
            v = m.wv(h).view(B, T, KV, hd)
            k = k.repeat_interleave(H // KV, dim=2)
            v = v.repeat_interleave(H // KV, dim=2)
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
            s = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
            s = s + mask
            o = torch.softmax(s, dim=-1) @ v
            x = x + m.wo(o.transpose(1, 2).reshape(B, T, H * hd))
            h = self.rms(x, m.fn)
            x = x + m.w2(F.silu(m.w1(h)) * m.w3(h))
        return self.rms(x, self.norm) @ self.emb.weight.T


def engine_rope_angles(pos, n_rot, base):
    """RoPE angles as the engine computes them (ggml_rope_cache_init, forward.c rope_cache):
    float32 throughout, theta = (float)pos, then theta *= powf(base, -2.0f / n_rot) once per
    pair. At position 200000 the float32 angles are off the exact pos·base^(-2i/n) by up to
    1.5e-3 rad (pair 1; float32 spacing there is 3.9e-3), which with trained query/key norms
    moved logits by 2.3e-3; the engine keeps it (llama.cpp-exact), so the reference does too. powf is glibc's
    (computed in double, rounded once): numpy's own float32 power differs from it in the last
    bit for some bases, the float64 power rounded to float32 does not. Returns float64
    (the cos/sin after it are taken in float64 of these float32 angles)."""
    import numpy as np
    scale = np.float32(float(base) ** float(np.float32(-2.0) / np.float32(n_rot)))
    theta = np.asarray(pos).astype(np.float32)
    out = np.empty(theta.shape + (n_rot // 2,), dtype=np.float32)
    for i in range(n_rot // 2):
        out[..., i] = theta
        theta = (theta * scale).astype(np.float32)
    return out.astype(np.float64)


@torch.no_grad()
def induction_init(model, seed):
    """Starts training from a copy circuit instead of discovering one (on a shared 2-core
    host the optimizer gets ~1K steps, fewer than a small transformer needs to form one).
    Residual layout at init: dims 0..63 token identity (the embedding; the 10 digits
    orthogonal in dims 0..15), 64..95 the previous token's dims 0..31 (written by layer 0
    head 0), 96..126 the token two back (head 1), 127 a constant (every embedding row = 1)
    that position-only heads read. Layer 0 heads 0/1: RoPE-only queries/keys on the
    constant, peaked at relative distance 1 / 2 (amplitudes per frequency PREV_AMP: > 9 nats
    over every other distance out to 64K). Layer 1 head 0: query = current token (dims
    0..15), key = previous token (64..79), in the position-free dims 16..31 — it attends to
    where the current token was seen before and copies the token after it (value = dims
    0..31, written back into 0..31, which the tied output reads). Everything else keeps its
    random init, and all of it is trained."""
    c, hd = model.c, model.hd
    g = torch.Generator().manual_seed(seed)
    E = model.emb.weight
    E.zero_()
    E[:, 0:64] = torch.randn(c["vocab"], 64, generator=g) / 8.0
    q, _ = torch.linalg.qr(torch.randn(16, 16, generator=g))
    for k, t in enumerate(DIGITS):
        E[t, 0:16] = q[k] * 0.6
    E[:, 127] = 1.0
    h_const = 8.0     # rms of an embedding row is 1/8: the constant reads 8 after RMSNorm
    th = torch.tensor([c["theta"] ** (-2.0 * i / c["n_rot"]) for i in range(c["n_rot"] // 2)])
    amp = torch.tensor(PREV_AMP)
    L0 = model.layers[0]
    for qh, back in ((0, 1), (1, 2)):
        # head qh uses kv head qh // 2 = 0; heads 0 and 1 need their own keys -> head 1's
        # offset is carried by its query (rotation by -back·θ), the key is unrotated
        a = torch.sqrt(amp * math.sqrt(hd))
        for i in range(len(PREV_AMP)):
            L0.wq.weight[qh * hd + 2 * i].zero_()
            L0.wq.weight[qh * hd + 2 * i + 1].zero_()
            L0.wq.weight[qh * hd + 2 * i, 127] = a[i] * math.cos(-back * th[i]) / h_const
            L0.wq.weight[qh * hd + 2 * i + 1, 127] = a[i] * math.sin(-back * th[i]) / h_const
    for i in range(len(PREV_AMP)):
        a = math.sqrt(PREV_AMP[i] * math.sqrt(hd))
        L0.wk.weight[2 * i].zero_()
        L0.wk.weight[2 * i + 1].zero_()
        L0.wk.weight[2 * i, 127] = a / h_const
    L0.wk.weight[c["n_rot"]:hd].zero_()
    L0.wq.weight[c["n_rot"]:hd].zero_()
    L0.wq.weight[hd + c["n_rot"]:2 * hd].zero_()
    L0.wv.weight[0:hd].zero_()
    L0.wv.weight[0:hd, 0:32] = torch.eye(32)
    L0.wo.weight[64:127].zero_()
    L0.wo.weight[:, 0:2 * hd].zero_()
    L0.wo.weight[64:96, 0:32] = torch.eye(32) / h_const
    L0.wo.weight[96:127, hd:hd + 31] = torch.eye(31) / h_const
    # layer 1 head 0: induction (after layer 0 the row rms is ~0.15 -> ~6.5 after RMSNorm)
    L1 = model.layers[1]
    beta = 2.5
    L1.wq.weight[0:hd].zero_()
    L1.wk.weight[0:hd].zero_()
    L1.wq.weight[16:32, 0:16] = torch.eye(16) * beta
    L1.wk.weight[16:32, 64:80] = torch.eye(16) * beta
    L1.wv.weight[0:hd].zero_()
    L1.wv.weight[0:hd, 0:32] = torch.eye(32)
    L1.wo.weight[:, 0:hd].zero_()
    L1.wo.weight[0:32, 0:hd] = torch.eye(32) * 1.5


PREV_AMP = [20.0, 14.0, 10.0, 8.0, 8.0, 8.0, 8.0, 8.0]
RETRIEVAL_SHARPEN = 2.0


@torch.no_grad()
def finalize(model):
    """After training: layer 1 head 0 is the head that finds the code (it attends from the
    answer's start to the first digit, then copies digit by digit). Trained on contexts of
    <= 320 tokens, its query learned a RoPE (distance) component that loses facts at 4K+
    depths of 10-40 %, and its content gap is sized for short contexts. Zero the rotary
    part of its query (the match is by content only, at any distance) and scale the content
    part by RETRIEVAL_SHARPEN (a larger gap against ln(context) of softmax dilution).
    Measured (teacher-forced, 6 held-out facts at 4K): 2/6 -> 6/6; 8K: 4/4 at x2."""
    nr, hd = model.c["n_rot"], model.hd
    w = model.layers[1].wq.weight
    w[0:nr].zero_()
    w[nr:hd].mul_(RETRIEVAL_SHARPEN)


def make_sample(tok, r, blob_lo, blob_hi, easy_frac, max_len=0, rescue=0.0, partial=0.0, spans=0.0):
    while True:
        s = make_sample1(tok, r, blob_lo, blob_hi, easy_frac, rescue, partial, spans)
        if not max_len or len(s.ids) <= max_len:
            return s


def make_sample1(tok, r, blob_lo, blob_hi, easy_frac, rescue=0.0, partial=0.0, spans=0.0):
    """One training conversation. Blob length log-uniform in [blob_lo, blob_hi] tokens; with
    probability easy_frac the ramp's own shape (one fact, SPEC filler, single turn, no holes),
    else needle_data.build's full mix; with 2-3 facts every fact is asked once (more answer
    tokens per conversation: the answer loss is the signal that matters)."""
    n_blob = int(blob_lo * (blob_hi / blob_lo) ** r.uniform())
    if rescue > 0 and r.uniform() < rescue:
        # the rescue stage: the engine's single-turn (blob, rescue system message, question)
        # or two-turn rescue shape; half of them the ramp's blob (one fact, SPEC filler)
        ramp = r.below(2) == 0
        return nd.build(tok, r, n_blob_tokens=n_blob, fmt=r.choice(["rescue", "rescue2"]),
                        n_facts=1 if ramp else None,
                        kinds=("spec",) if ramp else ("spec", "spec", "essay", "words", "mix"),
                        partial=partial, spans=spans)[0]
    if r.uniform() < easy_frac:
        return nd.build(tok, r, n_blob_tokens=n_blob, fmt=r.choice(["single", "two"]), evict=0.0,
                        offset=0 if r.below(2) else r.below(1 << 18), n_facts=1,
                        kinds=("spec",))[0]
    k = 1 if r.below(2) else r.range(2, 3)
    names, facts = set(), []
    while len(facts) < k:
        nm = nd.train_name(r)
        if any(nm.startswith(x) or x.startswith(nm) for x in names):
            continue
        names.add(nm)
        facts.append((nm, nd.train_code(r)))
    ask = list(range(k))
    for i in range(k - 1, 0, -1):        # Fisher-Yates with the deterministic stream
        j = r.below(i + 1)
        ask[i], ask[j] = ask[j], ask[i]
    return nd.build(tok, r, n_blob_tokens=n_blob, facts=facts, ask=ask)[0]


def long_view(s, r, mult_max, hole_frac, hole_max):
    """The long-context stage's view of a sample (needle_data.build stays as it is): with
    probability hole_frac one position hole of log-uniform 1K..hole_max positions at a random
    filler token of the blob (facts end up up to hole_max positions before the question, as
    after a long context or V3's evictions); and a multiplicity K, log-uniform in
    [1, mult_max], for every filler token (kbias ln K: the softmax sees each filler key K
    times, the dilution of a K-times longer filler). Returns the kbias list."""
    fill = [i for i, f in enumerate(s.fill) if f]
    if fill and hole_frac > 0 and r.uniform() < hole_frac:
        at = fill[r.below(len(fill))]
        g = int(1024 * (hole_max / 1024) ** r.uniform())
        s.pos = s.pos[:at] + [p + g for p in s.pos[at:]]
    lk = math.log(mult_max) * r.uniform() if mult_max > 1 else 0.0
    return [lk * f for f in s.fill]


def batches(seed, bsz, blob_lo=16, blob_hi=256, easy_frac=0.3, max_len=0, mult_max=0,
            hole_frac=0.0, hole_max=65536, rescue=0.0, partial=0.0, spans=0.0):
    tok = nd.Tok()
    r = nd.Rng(seed)
    r2 = nd.Rng(seed ^ 0x10C6)     # the long stage's own stream: the samples stay the same
    while True:
        ss = [make_sample(tok, r, blob_lo, blob_hi, easy_frac, max_len, rescue, partial, spans)
              for _ in range(bsz)]
        kb = [long_view(s, r2, mult_max, hole_frac, hole_max) if (mult_max or hole_frac) else None
              for s in ss]
        T = max(len(s.ids) for s in ss)
        ids = torch.zeros(bsz, T, dtype=torch.long)
        pos = torch.zeros(bsz, T, dtype=torch.long)
        tgt = torch.full((bsz, T), -1, dtype=torch.long)
        lm = torch.full((bsz, T), -1, dtype=torch.long)
        kbias = torch.zeros(bsz, T) if kb[0] is not None else None
        for b, s in enumerate(ss):
            n = len(s.ids)
            ids[b, :n] = torch.tensor(s.ids)
            pos[b, :n] = torch.tensor(s.pos)
            pos[b, n:] = s.pos[-1] + 1 + torch.arange(T - n)   # padding after: never seen
            tgt[b, :n] = torch.tensor(s.tgt)
            lm[b, :n - 1] = ids[b, 1:n]     # next token everywhere (repeated filler: induction)
            if kbias is not None:
                kbias[b, :n] = torch.tensor(kb[b])
        lm[tgt >= 0] = -1
        yield ids, pos, tgt, lm, kbias


DIGITS = list(range(48 + 3, 58 + 3))      # tok512 ids of '0'..'9' (byte tokens)


def drill_batches(seed, bsz, T=160):
    """Induction drill: random token strings with a segment that comes back later; the loss
    is on the segment's second occurrence (a copy circuit: find where the current context
    was seen, emit what followed). Half the segments are digit strings, where one token of
    context is ambiguous (repeated digits), as in the codes. Positions start at a random
    offset up to 256K in half the rows."""
    r = nd.Rng(seed ^ 0xD211)
    while True:
        ids = torch.zeros(bsz, T, dtype=torch.long)
        pos = torch.zeros(bsz, T, dtype=torch.long)
        tgt = torch.full((bsz, T), -1, dtype=torch.long)
        for b in range(bsz):
            row = [nd.BOS] + [259 + r.below(512 - 259) for _ in range(T - 1)]
            L = r.range(6, min(40, T // 4))
            digits = r.below(2) == 0
            seg = [r.choice(DIGITS) if digits and k >= 3 else 259 + r.below(512 - 259) for k in range(L)]
            a = r.range(1, T // 2 - L)
            c = r.range(a + L + 1, T - L)
            row[a:a + L] = seg
            row[c:c + L] = seg
            ids[b] = torch.tensor(row)
            off = 0 if r.below(2) else r.below(1 << 18)
            pos[b] = off + torch.arange(T)
            for k in range(c + 3, c + L):        # 3 tokens of key, then copy
                tgt[b, k - 1] = row[k]
        yield ids, pos, tgt


@torch.no_grad()
def greedy_eval(model, cases, max_gen=10):
    """Held-out single-fact prompts (needle_data eval cases), greedy in PyTorch, batched by
    right padding (positions = indices; padding lies after every real token, so it is never
    attended). Returns (exact-answer accuracy, replies)."""
    tok = nd.Tok()
    seqs = [[nd.BOS] + tok.encode(c["prompt"], first=True) for c in cases]
    B, L = len(seqs), max(len(s) for s in seqs) + max_gen
    ids = torch.zeros(B, L, dtype=torch.long)
    for b, s in enumerate(seqs):
        ids[b, :len(s)] = torch.tensor(s)
    n = torch.tensor([len(s) for s in seqs])
    pos = torch.arange(L)[None].expand(B, L)
    out = [[] for _ in range(B)]
    done = [False] * B
    for _ in range(max_gen):
        lg = model(ids[:, :int(n.max())], pos[:, :int(n.max())])
        nxt = lg[torch.arange(B), n - 1].argmax(-1)
        for b in range(B):
            if done[b]:
                continue
            t = int(nxt[b])
            if t == nd.EOS:
                done[b] = True
                continue
            out[b].append(t)
            ids[b, n[b]] = t
            n[b] += 1
        if all(done):
            break
    replies = [tok.decode(o) for o in out]
    ok = sum(1 for c, rp, d in zip(cases, replies, done) if d and rp == c["answer"])
    return ok / B, replies


@torch.no_grad()
def tf_eval(model, seed, blob, n, mult):
    """Teacher-forced held-out accuracy (every digit and the EOS right) on single-fact SPEC
    conversations of `blob` tokens, depths 5..95 %, with every filler key counted `mult`
    times (kbias ln mult): a cheap stand-in for a mult-times longer context."""
    tok = nd.Tok()
    r = nd.Rng(seed * 7919 + 29)
    ok = 0
    for i in range(n):
        f = (nd.heldout_name(r), nd.heldout_code(r))
        s = nd.build(tok, r, n_blob_tokens=blob, facts=[f], ask=[0], fmt="single", evict=0.0,
                     offset=0, kinds=("spec",), depths=[0.05 + 0.9 * i / max(1, n - 1)])[0]
        ids, pos, tgt = torch.tensor([s.ids]), torch.tensor([s.pos]), torch.tensor([s.tgt])
        kb = torch.tensor([s.fill], dtype=torch.float32) * math.log(mult)
        lg = model(ids, pos, kbias=kb)
        m = tgt >= 0
        ok += bool((lg.argmax(-1)[m] == tgt[m]).all())
    return ok / n


def eval_cases(seed, size, n):
    """n held-out prompts of about size tokens, depths spread over 0.05..0.95."""
    tok = nd.Tok()
    r = nd.Rng(seed * 7919 + 17)
    per = len(tok.encode(" " + nd.FILLER))
    over = len(tok.encode(nd.render_prompt([("NOVA", "481729")], 0, 0.5, 0), first=True)) + 1
    out = []
    for i in range(n):
        nm, cd = nd.heldout_name(r), nd.heldout_code(r)
        nf = max(0, (size - over - 16) // per)
        out.append(dict(prompt=nd.render_prompt([(nm, cd)], nf, 0.05 + 0.9 * i / max(1, n - 1), 0),
                        answer=cd))
    return out


def export_llama2c(model, path, seq_len=2048):
    c = model.c
    L = model.layers
    hd = model.hd
    with open(path, "wb") as f:
        f.write(struct.pack("<7i", c["dim"], c["hidden"], c["n_layers"], c["n_heads"],
                            c["n_kv_heads"], c["vocab"], seq_len))

        def w(t):
            f.write(t.detach().to(torch.float32).contiguous().numpy().tobytes())
        w(model.emb.weight)
        for name in ("an",):
            for m in L:
                w(getattr(m, name))
        for name in ("wq", "wk", "wv", "wo"):
            for m in L:
                w(getattr(m, name).weight)
        for m in L:
            w(m.fn)
        for name in ("w1", "w2", "w3"):
            for m in L:
                w(getattr(m, name).weight)
        w(model.norm)
        f.write(b"\0" * (seq_len * (hd // 2) * 4 * 2))   # freq_cis_real/imag (ignored)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=4000, help="optimizer steps (the schedule's length)")
    ap.add_argument("--minutes", type=float, default=0, help="stop early after this wall time")
    ap.add_argument("--stop", type=int, default=0, help="stop after this many steps (the schedule keeps --steps)")
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--bsz", type=int, default=16)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warm", type=int, default=200)
    ap.add_argument("--blob", type=int, nargs=2, default=(16, 256), metavar=("LO", "HI"),
                    help="blob length range in tokens (log-uniform)")
    ap.add_argument("--max-len", type=int, default=0, help="redraw conversations longer than this (tokens)")
    ap.add_argument("--easy", type=float, default=0.3, help="fraction of ramp-shaped conversations")
    ap.add_argument("--lm", type=float, default=0.1, help="weight of the next-token loss on all other tokens")
    ap.add_argument("--drill", type=int, default=0, help="every Nth step is an induction-drill batch (0: none)")
    ap.add_argument("--drill-bsz", type=int, default=24)
    ap.add_argument("--drill-len", type=int, default=160)
    ap.add_argument("--induction-init", action="store_true", help="start from a copy circuit (induction_init)")
    ap.add_argument("--finalize", action="store_true", help="only apply finalize() to --init and write the model")
    ap.add_argument("--init", help="start from this needle.pt or needle.gguf (a later stage)")
    ap.add_argument("--mult", type=float, default=0, help="long stage: filler multiplicity up to this (long_view)")
    ap.add_argument("--hole-frac", type=float, default=0, help="long stage: fraction of samples with a long position hole")
    ap.add_argument("--hole-max", type=int, default=65536)
    ap.add_argument("--rescue", type=float, default=0, help="rescue stage: fraction of samples in a rescue format (make_sample1)")
    ap.add_argument("--spans", type=float, default=0, help="rescue stage: P(rescue message in the engine's span shape) (needle_data.span_blocks)")
    ap.add_argument("--partial", type=float, default=0, help="rescue stage: P(a rescued fact is partly evicted from the blob) (needle_data.build)")
    ap.add_argument("--tf-eval", type=float, nargs="*", default=[], metavar="MULT",
                    help="also teacher-forced held-out accuracy at these multiplicities (tf_eval)")
    ap.add_argument("--keep", action="store_true", help="keep every evaluated checkpoint (needle_sSTEP.pt)")
    ap.add_argument("--tf-blob", type=int, default=1000)
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--eval-size", type=int, default=400)
    ap.add_argument("--eval-n", type=int, default=24)
    a = ap.parse_args()
    torch.set_num_threads(THREADS)
    torch.manual_seed(a.seed)
    os.makedirs(a.out, exist_ok=True)
    model = Model(CFG)
    if a.induction_init:
        induction_init(model, a.seed)
    if a.init and a.init.endswith(".gguf"):   # a shipped model: its F32 weights, exactly
        import ref_logits
        model = ref_logits.load(a.init)
    elif a.init:
        model.load_state_dict(torch.load(a.init))
    if a.finalize:
        finalize(model)
        torch.save(model.state_dict(), os.path.join(a.out, "needle.pt"))
        export_llama2c(model, os.path.join(a.out, "needle.bin"))
        print("finalized", a.init, "->", a.out)
        return
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.98), weight_decay=0.01)
    warm = a.warm
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1, (s + 1) / warm) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1, s / a.steps)))))
    t0 = time.time()
    log = open(os.path.join(a.out, "train.log"), "a")

    def say(line):
        print(line, flush=True)
        log.write(line + "\n")
        log.flush()
    say("args " + json.dumps(vars(a)))
    it = batches(a.seed, a.bsz, a.blob[0], a.blob[1], a.easy, a.max_len, a.mult, a.hole_frac,
                 a.hole_max, a.rescue, a.partial, a.spans)
    drill = drill_batches(a.seed, a.drill_bsz, a.drill_len)
    cases = eval_cases(1, a.eval_size, a.eval_n)
    ema = None
    best = -1.0

    def checkpoint(tag):
        torch.save(model.state_dict(), os.path.join(a.out, "needle%s.pt" % tag))
        export_llama2c(model, os.path.join(a.out, "needle%s.bin" % tag))
    for step in range(a.steps):
        is_drill = a.drill and step % a.drill == 0
        if is_drill:
            ids, pos, tgt = next(drill)
            lm = torch.full_like(tgt, -1)
        else:
            ids, pos, tgt, lm, kbias = next(it)
        logits = model(ids, pos, kbias=None if is_drill else kbias)
        lf = logits.view(-1, logits.shape[-1])
        loss = F.cross_entropy(lf, tgt.view(-1), ignore_index=-1)
        lml = F.cross_entropy(lf, lm.view(-1), ignore_index=-1) if a.lm > 0 and not is_drill else torch.zeros(())
        opt.zero_grad()
        (loss + a.lm * lml).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        with torch.no_grad():
            m = tgt >= 0
            acc = (logits.argmax(-1)[m] == tgt[m]).float().mean().item()
        if is_drill:
            if step % (25 * a.drill) < a.drill:
                say("drill step %d loss %.4f tokacc %.3f" % (step, loss.item(), acc))
        else:
            ema = loss.item() if ema is None else 0.95 * ema + 0.05 * loss.item()
        if not is_drill and (step % 25 == 1 or step == a.steps - 1):
            say("step %d loss %.4f ema %.4f lm %.3f tokacc %.3f T %d  %.0fs" % (
                step, loss.item(), ema, lml.item(), acc, ids.shape[1], time.time() - t0))
        if (step + 1) % a.eval_every == 0 or step == a.steps - 1:
            model.eval()
            ea, rep = greedy_eval(model, cases)
            tfs = " ".join("tf@%dx%g %.3f" % (a.tf_blob, mu, tf_eval(model, 3, a.tf_blob, a.eval_n, mu))
                           for mu in a.tf_eval)
            if tfs:
                say("eval step %d %s  %.0fs" % (step + 1, tfs, time.time() - t0))
            model.train()
            say("eval step %d heldout@%d acc %.3f  e.g. %s / %s  %.0fs" % (
                step + 1, a.eval_size, ea, rep[:3], [c["answer"] for c in cases[:3]], time.time() - t0))
            checkpoint("")
            if a.keep:
                torch.save(model.state_dict(), os.path.join(a.out, "needle_s%d.pt" % (step + 1)))
        if a.minutes and time.time() - t0 > a.minutes * 60:
            break
        if a.stop and step + 1 >= a.stop:
            break
    checkpoint("")
    json.dump(dict(CFG, steps=step + 1, seed=a.seed, bsz=a.bsz, lr=a.lr, blob=a.blob, easy=a.easy,
                   lm=a.lm, init=a.init, mult=a.mult, hole_frac=a.hole_frac, hole_max=a.hole_max, rescue=a.rescue, partial=a.partial, spans=a.spans, max_len=a.max_len, induction_init=a.induction_init, drill=a.drill, drill_bsz=a.drill_bsz, drill_len=a.drill_len, seconds=round(time.time() - t0)),
              open(os.path.join(a.out, "train.json"), "w"))
    print("wrote", a.out, "in %.0fs" % (time.time() - t0))


if __name__ == "__main__":
    main()
