#!/usr/bin/env python3
"""Independent float64 numpy reference forward pass for F32 GGUF models (llama / qwen2 /
qwen3), used by tests/engine/test_runtime.c to check architectures and options that have no
llama.cpp fixture (qwen3 q/k norms, explicit head size, linear rope scaling).

    ref_forward.py MODEL.gguf 1,2,3      -> prints JSON {"logits": [...]} (last position)
    ref_forward.py MODEL.gguf --evict F.json -> {"logits": [[...], ...]} (every position)

--evict replays KV-cache eviction (tests/engine/test_v3.c): F.json holds {"tokens": [...],
"ubatch": U, "evicted_after": [e_0, ...]} where e_s is the index of the ubatch after which
position s was evicted (-1 = never). Token t (ubatch t // U) attends to position s iff s <= t
and s was not evicted before its ubatch ran (e_s < 0 or e_s >= t // U): attention over exactly
the cells that survived, in every layer.

Written from the GGUF spec and the architectures' definitions, not from the C code: its
own GGUF parser, direct RoPE angles pos * base^(-2i/n_rot) / scale, float64 throughout."""
import json
import struct
import sys

import numpy as np


def read_gguf(path):
    d = open(path, "rb").read()
    off = 0

    def u(fmt):
        nonlocal off
        v = struct.unpack_from("<" + fmt, d, off)
        off += struct.calcsize("<" + fmt)
        return v[0]

    def s():
        n = u("Q")
        nonlocal off
        v = d[off:off + n].decode("utf-8", "replace")
        off += n
        return v

    scal = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def val(t):
        if t == 8:
            return s()
        if t == 9:
            et = u("I")
            n = u("Q")
            return [val(et) for _ in range(n)]
        return u(scal[t])

    assert d[:4] == b"GGUF"
    off = 4
    u("I")
    nt = u("Q")
    nkv = u("Q")
    kv = {}
    for _ in range(nkv):
        k = s()
        kv[k] = val(u("I"))
    infos = []
    for _ in range(nt):
        name = s()
        nd = u("I")
        ne = [u("Q") for _ in range(nd)]
        ty = u("I")
        o = u("Q")
        infos.append((name, ne, ty, o))
    align = kv.get("general.alignment", 32)
    base = (off + align - 1) // align * align
    ts = {}
    for name, ne, ty, o in infos:
        assert ty == 0, "reference handles F32 only"
        n = int(np.prod(ne))
        a = np.frombuffer(d, dtype="<f4", count=n, offset=base + o).astype(np.float64)
        ts[name] = a.reshape(list(reversed(ne)))  # numpy (rows, cols) = ggml ne reversed
    return kv, ts


def rmsnorm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope(x, pos, n_rot, base, scale, neox, ff=None):
    # x: (n_heads, hd); ff: per-pair frequency divisors (rope_freqs.weight, Llama 3.1)
    x = x.copy()
    i = np.arange(n_rot // 2)
    th = pos * base ** (-2.0 * i / n_rot) * scale
    if ff is not None:
        th = th / ff
    c, s = np.cos(th), np.sin(th)
    if neox:
        a, b = x[:, i].copy(), x[:, i + n_rot // 2].copy()
        x[:, i], x[:, i + n_rot // 2] = a * c - b * s, a * s + b * c
    else:
        a, b = x[:, 2 * i].copy(), x[:, 2 * i + 1].copy()
        x[:, 2 * i], x[:, 2 * i + 1] = a * c - b * s, a * s + b * c
    return x


def forward(kv, ts, toks, allowed=None, all_pos=False):
    arch = kv["general.architecture"]
    g = lambda k, d=None: kv.get(arch + "." + k, d)
    E, L, H = g("embedding_length"), g("block_count"), g("attention.head_count")
    HKV = g("attention.head_count_kv", H)
    hd = g("attention.key_length", E // H)
    n_rot = g("rope.dimension_count", hd)
    base = g("rope.freq_base", 10000.0)
    eps = g("attention.layer_norm_rms_epsilon", 1e-5)
    scale = 1.0
    if g("rope.scaling.type") == "linear":
        scale = 1.0 / g("rope.scaling.factor")
    neox = arch in ("qwen2", "qwen3")
    x = ts["token_embd.weight"][toks]
    T = len(toks)
    for l in range(L):
        p = "blk.%d." % l
        h = rmsnorm(x, ts[p + "attn_norm.weight"], eps)
        q = h @ ts[p + "attn_q.weight"].T
        k = h @ ts[p + "attn_k.weight"].T
        v = h @ ts[p + "attn_v.weight"].T
        if p + "attn_q.bias" in ts:
            q, k, v = q + ts[p + "attn_q.bias"], k + ts[p + "attn_k.bias"], v + ts[p + "attn_v.bias"]
        q = q.reshape(T, H, hd)
        k = k.reshape(T, HKV, hd)
        v = v.reshape(T, HKV, hd)
        if p + "attn_q_norm.weight" in ts:
            q = rmsnorm(q, ts[p + "attn_q_norm.weight"], eps)
            k = rmsnorm(k, ts[p + "attn_k_norm.weight"], eps)
        ff = ts.get("rope_freqs.weight")
        q = np.stack([rope(q[t], t, n_rot, base, scale, neox, ff) for t in range(T)])
        k = np.stack([rope(k[t], t, n_rot, base, scale, neox, ff) for t in range(T)])
        out = np.zeros((T, H, hd))
        for hh in range(H):
            kh = hh // (H // HKV)
            sc = q[:, hh, :] @ k[:, kh, :].T / np.sqrt(hd)
            if allowed is None:
                sc = sc + np.triu(np.full((T, T), -np.inf), 1)
            else:
                sc = np.where(allowed, sc, -np.inf)
            sc = np.exp(sc - sc.max(axis=1, keepdims=True))
            sc /= sc.sum(axis=1, keepdims=True)
            out[:, hh, :] = sc @ v[:, kh, :]
        x = x + out.reshape(T, H * hd) @ ts[p + "attn_output.weight"].T
        h = rmsnorm(x, ts[p + "ffn_norm.weight"], eps)
        gt = h @ ts[p + "ffn_gate.weight"].T
        up = h @ ts[p + "ffn_up.weight"].T
        x = x + (gt / (1 + np.exp(-gt)) * up) @ ts[p + "ffn_down.weight"].T
    w = ts.get("output.weight", ts["token_embd.weight"])
    if all_pos:
        return rmsnorm(x, ts["output_norm.weight"], eps) @ w.T
    h = rmsnorm(x[-1], ts["output_norm.weight"], eps)
    return h @ w.T


if __name__ == "__main__":
    kv, ts = read_gguf(sys.argv[1])
    if sys.argv[2] == "--evict":
        spec = json.load(open(sys.argv[3]))
        toks, U, ev = spec["tokens"], spec["ubatch"], np.array(spec["evicted_after"])
        T = len(toks)
        t = np.arange(T)[:, None]
        s = np.arange(T)[None, :]
        allowed = (s <= t) & ((ev[None, :] < 0) | (ev[None, :] >= t // U))
        lg = forward(kv, ts, toks, allowed, True)
        print(json.dumps({"logits": [[float(v) for v in row] for row in lg]}))
        sys.exit(0)
    toks = [int(t) for t in sys.argv[2].split(",")]
    print(json.dumps({"logits": [float(v) for v in forward(kv, ts, toks)]}))
