"""The BERT forward bench_neural times, in numpy + OpenBLAS (float32), for comparison.

usage: numpy_forward.py BATCH SEQ REPS   (OPENBLAS_NUM_THREADS sets the threads)
Prints the wall time and the process CPU time (all threads) of each forward in ms, one
forward per line. Same shape as bench_neural's
model (6 x 384, 12 heads, FFN 1536, vocab 30522), random weights; GELU in the tanh form
(numpy has no vectorised erf; the cost is the same order)."""
import sys
import time

import numpy as np

L_, D, H, F, V = 6, 384, 12, 1536, 30522
B, S, REPS = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(1)
f32 = np.float32


def w(*shape, sc=0.05):
    return (rng.standard_normal(shape) * sc).astype(f32)


tok, pos, typ = w(V, D), w(512, D), w(2, D)
layers = [dict(q=w(D, D), bq=w(D), k=w(D, D), bk=w(D), v=w(D, D), bv=w(D), o=w(D, D), bo=w(D),
               g1=np.ones(D, f32), b1=w(D), up=w(F, D), bu=w(F), dn=w(D, F), bd=w(D),
               g2=np.ones(D, f32), b2=w(D)) for _ in range(L_)]


def ln(x, g, b):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + f32(1e-12)) * g + b


def gelu(x):
    return f32(0.5) * x * (f32(1) + np.tanh(f32(0.7978845608) * (x + f32(0.044715) * x * x * x)))


def forward(ids):
    x = tok[ids] + pos[np.arange(S)][None] + typ[0]
    x = ln(x.reshape(B * S, D), np.ones(D, f32), np.zeros(D, f32))
    d = D // H
    for p in layers:
        q = (x @ p["q"].T + p["bq"]).reshape(B, S, H, d).transpose(0, 2, 1, 3)
        k = (x @ p["k"].T + p["bk"]).reshape(B, S, H, d).transpose(0, 2, 1, 3)
        v = (x @ p["v"].T + p["bv"]).reshape(B, S, H, d).transpose(0, 2, 1, 3)
        s = q @ k.transpose(0, 1, 3, 2) / f32(np.sqrt(d))
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        a = (s @ v).transpose(0, 2, 1, 3).reshape(B * S, D)
        x = ln(x + a @ p["o"].T + p["bo"], p["g1"], p["b1"])
        x = ln(x + gelu(x @ p["up"].T + p["bu"]) @ p["dn"].T + p["bd"], p["g2"], p["b2"])
    e = x.reshape(B, S, D).mean(1)
    return e / np.linalg.norm(e, axis=1, keepdims=True)


ids = rng.integers(5, V, size=(B, S))
forward(ids)  # warm-up
for _ in range(REPS):
    t, c = time.perf_counter(), time.process_time()
    forward(ids)
    print((time.perf_counter() - t) * 1e3, (time.process_time() - c) * 1e3, flush=True)
