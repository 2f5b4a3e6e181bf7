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

    def rope(self, x, pos):
        # x (B, T, H, hd); NORM pairs (2i, 2i+1) for i < n_rot/2
        nr = self.c["n_rot"]
        i = torch.arange(nr // 2, dtype=torch.float64)
        ang = pos.to(torch.float64)[..., None] * self.c["theta"] ** (-2.0 * i / nr)
        cos, sin = ang.cos().to(x.dtype)[:, :, None, :], ang.sin().to(x.dtype)[:, :, None, :]
        a, b = x[..., 0:nr:2], x[..., 1:nr:2]
        ra, rb = a * cos - b * sin, a * sin + b * cos
        rot = torch.stack((ra, rb), dim=-1).flatten(-2)
        return torch.cat((rot, x[..., nr:]), dim=-1)

    def forward(self, ids, pos, q_chunk=0):
        B, T = ids.shape
        H, KV, hd = self.c["n_heads"], self.c["n_kv_heads"], self.hd
        x = self.emb(ids)
        mask = pos[:, None, :] <= pos[:, :, None]          # (B, Tq, Tk): by position
        for m in self.layers:
            h = self.rms(x, m.an)
            q = self.rope(m.wq(h).view(B, T, H, hd), pos)
            k = self.rope(m.wk(h).view(B, T, KV, hd), pos)
            v = m.wv(h).view(B, T, KV, hd)
            k = k.repeat_interleave(H // KV, dim=2)
            v = v.repeat_interleave(H // KV, dim=2)
            q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
            s = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
            s = s.masked_fill(~mask[:, None], float("-inf"))
            o = torch.softmax(s, dim=-1) @ v
            x = x + m.wo(o.transpose(1, 2).reshape(B, T, H * hd))
            h = self.rms(x, m.fn)
            x = x + m.w2(F.silu(m.w1(h)) * m.w3(h))
        return self.rms(x, self.norm) @ self.emb.weight.T


def batches(seed, bsz, easy=False):
    tok = nd.Tok()
    r = nd.Rng(seed)
    while True:
        if easy:   # curriculum stage: one fact, short blob, single turn, no holes
            ss = [nd.build(tok, r, n_blob_tokens=8 + r.below(56), fmt="single", evict=0.0, n_facts=1)[0]
                  for _ in range(bsz)]
        else:
            ss = [nd.build(tok, r)[0] for _ in range(bsz)]
        T = max(len(s.ids) for s in ss)
        ids = torch.zeros(bsz, T, dtype=torch.long)
        pos = torch.zeros(bsz, T, dtype=torch.long)
        tgt = torch.full((bsz, T), -1, dtype=torch.long)
        for b, s in enumerate(ss):
            n = len(s.ids)
            ids[b, :n] = torch.tensor(s.ids)
            pos[b, :n] = torch.tensor(s.pos)
            pos[b, n:] = s.pos[-1] + 1 + torch.arange(T - n)   # padding after: never seen
            tgt[b, :n] = torch.tensor(s.tgt)
        yield ids, pos, tgt


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
    ap.add_argument("--steps", type=int, default=4000)
    ap.add_argument("--minutes", type=float, default=0, help="stop early after this wall time")
    ap.add_argument("--seed", type=int, default=17)
    ap.add_argument("--bsz", type=int, default=8)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--easy", action="store_true", help="curriculum stage only (see batches)")
    a = ap.parse_args()
    torch.set_num_threads(THREADS)
    torch.manual_seed(a.seed)
    os.makedirs(a.out, exist_ok=True)
    model = Model(CFG)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.98), weight_decay=0.01)
    warm = 100
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1, (s + 1) / warm) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1, s / a.steps)))))
    t0 = time.time()
    log = open(os.path.join(a.out, "train.log"), "w")
    it = batches(a.seed, a.bsz, a.easy)
    ema = None
    for step in range(a.steps):
        ids, pos, tgt = next(it)
        logits = model(ids, pos)
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), tgt.view(-1), ignore_index=-1)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        with torch.no_grad():
            m = tgt >= 0
            acc = (logits.argmax(-1)[m] == tgt[m]).float().mean().item()
        ema = loss.item() if ema is None else 0.95 * ema + 0.05 * loss.item()
        if step % 25 == 0 or step == a.steps - 1:
            line = "step %d loss %.4f ema %.4f tokacc %.3f T %d  %.0fs" % (step, loss.item(), ema, acc, ids.shape[1], time.time() - t0)
            print(line, flush=True)
            log.write(line + "\n")
            log.flush()
        if a.minutes and time.time() - t0 > a.minutes * 60:
            break
    torch.save(model.state_dict(), os.path.join(a.out, "needle.pt"))
    export_llama2c(model, os.path.join(a.out, "needle.bin"))
    json.dump(dict(CFG, steps=step + 1, seed=a.seed, bsz=a.bsz, lr=a.lr, seconds=round(time.time() - t0)),
              open(os.path.join(a.out, "train.json"), "w"))
    print("wrote", a.out, "in %.0fs" % (time.time() - t0))


if __name__ == "__main__":
    main()
