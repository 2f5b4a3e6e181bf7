#!/usr/bin/python3
"""Offline probe: would a corpus-derived semantic channel help the code set?

Reads the dump of `bench_quality --code-only --dump DIR` (DIR/<set>.chunks, DIR/<set>.q;
format in bench/quality/qset.h) and scores, with the same "one right chunk" rule:

  lsa     LSA: tf-idf chunk x term matrix (log(1+tf)*idf), rank-K SVD, query folded in as
          the idf-weighted sum of its term vectors; cosine ranking alone, and fused with the
          core search score (core + lam * max(0, cos); core = 0 outside its top 128)
  qe      query expansion with word vectors: PPMI of within-chunk co-occurrence (terms with
          df >= 2), rank-K eigendecomposition; each query term adds its `nexp` nearest
          terms with weight w * cosine to a BM25 (k1 1.2, b 0.75) over the same tokens;
          compared with that BM25 without expansion

Tokens: runs of [A-Za-z0-9_], split on camelCase / snake_case / digits like lcx_tokenize,
lower-cased, a short English stop list dropped. Needs numpy (Debian's /usr/bin/python3).
Usage: probe_semantic.py DIR lsa K[,K..] LAM[,LAM..]
       probe_semantic.py DIR qe K NEXP W
Numbers: docs/benchmarks/core.md "Quality, continued".
"""
import re
import sys

import numpy as np

STOP = set("a an the of to in is are was be by for on with as at it this that from or and not no if then "
           "else can will may into its their there these those which who what when where how does do did has "
           "have had been being than so such also only any all each other some more most use used using "
           "returns return get gets set sets".split())
SETS = ("C", "JS", "Perl")


def toks(s):
    out = []
    for w in re.findall(r"[A-Za-z0-9_]+", s):
        parts = [p.lower() for p in re.findall(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+", w)]
        out.extend(parts if len(parts) > 1 or "_" in w else [w.lower()])
    return [t for t in out if t not in STOP and len(t) > 1]


def load(d, name):
    docs = [l.rstrip("\n").split("\t", 2) for l in open(f"{d}/{name}.chunks")]
    qs = []
    for l in open(f"{d}/{name}.q"):
        q, tg, hits = l.rstrip("\n").split("\t")
        core = {}
        for h in hits.split(","):
            if h:
                i, sc = h.split(":")
                core[int(i)] = float(sc)
        qs.append((q, {int(x) for x in tg.split(",") if x}, core))
    return docs, qs


def rank_of(sc, tg):
    for j, d in enumerate(np.argsort(-sc, kind="stable")[:10]):
        if d in tg and sc[d] > 0:
            return j + 1
    return 0


class Acc:
    def __init__(self):
        self.n = self.r1 = self.r10 = self.mrr = 0.0

    def add(self, rk):
        self.n += 1
        self.r1 += rk == 1
        self.r10 += rk > 0
        self.mrr += 1 / rk if rk else 0

    def __str__(self):
        return f"R@1 {self.r1 / self.n:.3f} R@10 {self.r10 / self.n:.3f} MRR@10 {self.mrr / self.n:.3f}"


def index(docs, with_path):
    vocab, dt = {}, []
    for _, path, text in docs:
        c = {}
        for t in toks(text) + (toks(path) if with_path else []):
            c[t] = c.get(t, 0) + 1
        dt.append(c)
        for t in c:
            vocab.setdefault(t, len(vocab))
    D, V = len(docs), len(vocab)
    df = np.zeros(V)
    for c in dt:
        for t in c:
            df[vocab[t]] += 1
    return vocab, dt, df, np.log(1 + (D - df + 0.5) / (df + 0.5))


def lsa(d, K, lam, accs):
    for name in SETS:
        docs, qs = load(d, name)
        vocab, dt, df, idf = index(docs, True)
        X = np.zeros((len(docs), len(vocab)), dtype=np.float32)
        for i, c in enumerate(dt):
            for t, n in c.items():
                X[i, vocab[t]] = np.log1p(n) * idf[vocab[t]]
        w, U = np.linalg.eigh((X @ X.T).astype(np.float64))   # SVD through the chunk Gram matrix
        idx = np.argsort(w)[::-1][:K]
        S = np.sqrt(np.maximum(w[idx], 1e-9))
        U = U[:, idx]
        tv = (X.T @ U) / S
        dv = U * S
        dv /= np.linalg.norm(dv, axis=1, keepdims=True) + 1e-9
        for q, tg, core in qs:
            qv = np.zeros(K)
            for t in set(toks(q)):
                if t in vocab:
                    qv += idf[vocab[t]] * tv[vocab[t]]
            nq = np.linalg.norm(qv)
            cos = dv @ (qv / nq) if nq > 0 else np.zeros(len(docs))
            cs = np.zeros(len(docs))
            for i, s in core.items():
                cs[i] = s
            accs["core"].add(rank_of(cs, tg))
            accs["lsa alone"].add(rank_of(cos, tg))
            for l in lam:
                accs[f"core + {l} lsa"].add(rank_of(cs + l * np.maximum(cos, 0), tg))


def qe(d, K, nexp, wexp, accs):
    for name in SETS:
        docs, qs = load(d, name)
        vocab, dt, df, idf = index(docs, False)
        D = len(docs)
        dl = np.array([sum(c.values()) for c in dt], dtype=np.float64)
        avg = dl.mean()
        post = [[] for _ in vocab]
        for i, c in enumerate(dt):
            for t, n in c.items():
                post[vocab[t]].append((i, n))
        keep = np.where(df >= 2)[0]
        kpos = {int(v): i for i, v in enumerate(keep)}
        B = np.zeros((D, len(keep)), dtype=np.float32)
        for i, c in enumerate(dt):
            for t in c:
                if vocab[t] in kpos:
                    B[i, kpos[vocab[t]]] = 1
        C = (B.T @ B).astype(np.float64)
        rs = C.sum(1)
        with np.errstate(divide="ignore", invalid="ignore"):
            P = np.log(C * C.sum() / np.outer(rs, rs))
        P[~np.isfinite(P)] = 0
        P = np.maximum(P, 0)
        w, U = np.linalg.eigh(P)
        idx = np.argsort(-np.abs(w))[:K]
        W = U[:, idx] * np.sqrt(np.abs(w[idx]))
        W /= np.linalg.norm(W, axis=1, keepdims=True) + 1e-9

        def bm25(qw):
            s = np.zeros(D)
            for t, wt in qw.items():
                for i, n in post[t]:
                    s[i] += wt * idf[t] * n * 2.2 / (n + 1.2 * (0.25 + 0.75 * dl[i] / avg))
            return s

        for q, tg, _ in qs:
            qt = [vocab[t] for t in set(toks(q)) if t in vocab]
            qw = {t: 1.0 for t in qt}
            accs["bm25"].add(rank_of(bm25(qw), tg))
            qw2 = dict(qw)
            for t in qt:
                if t in kpos:
                    sims = W @ W[kpos[t]]
                    for j in np.argsort(-sims)[1:nexp + 1]:
                        tj = int(keep[j])
                        if tj not in qw:
                            qw2[tj] = max(qw2.get(tj, 0), wexp * float(sims[j]))
            accs[f"bm25 + {nexp} neighbours x {wexp}"].add(rank_of(bm25(qw2), tg))


def main():
    if len(sys.argv) < 5 or sys.argv[2] not in ("lsa", "qe"):
        sys.exit(__doc__)
    d, mode = sys.argv[1], sys.argv[2]
    for K in (int(x) for x in sys.argv[3].split(",")):
        accs = {}

        class Auto(dict):
            def __missing__(self, k):
                self[k] = Acc()
                return self[k]
        accs = Auto()
        if mode == "lsa":
            lsa(d, K, [float(x) for x in sys.argv[4].split(",")], accs)
        else:
            qe(d, K, int(sys.argv[4]), float(sys.argv[5]), accs)
        for k, a in accs.items():
            print(f"K {K:4d}  {k:32s} n={int(a.n)}  {a}")


if __name__ == "__main__":
    main()
