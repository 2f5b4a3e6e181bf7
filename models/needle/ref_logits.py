#!/usr/bin/env python3
"""Logits of the training framework's model (train.Model, PyTorch) for a GGUF the engine
loads: the weights are read back from the GGUF, so this checks export + engine against the
code that trained them.

    ref_logits.py MODEL.gguf IDS POS      (comma lists) -> JSON {"logits": [...]} (last token)
Exit 3 when torch is missing (the test skips)."""
import json
import os
import struct
import sys

try:
    import torch
except ImportError:
    sys.exit(3)
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train  # noqa: E402


def read_gguf(path):
    d = open(path, "rb").read()
    off = 8

    def u(fmt):
        nonlocal off
        v = struct.unpack_from("<" + fmt, d, off)[0]
        off += struct.calcsize("<" + fmt)
        return v

    def s():
        nonlocal off
        n = u("Q")
        off += n
        return d[off - n:off].decode("utf-8", "replace")
    sc = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}

    def val(t):
        if t == 8:
            return s()
        if t == 9:
            et, n = u("I"), u("Q")
            return [val(et) for _ in range(n)]
        return u(sc[t])
    nt, nkv = u("Q"), u("Q")
    kv = {}
    for _ in range(nkv):
        k = s()
        kv[k] = val(u("I"))
    infos = []
    for _ in range(nt):
        name = s()
        ne = [u("Q") for _ in range(u("I"))]
        infos.append((name, ne, u("I"), u("Q")))
    al = kv.get("general.alignment", 32)
    base = (off + al - 1) // al * al
    ts = {}
    for name, ne, ty, o in infos:
        assert ty == 0
        ts[name] = np.frombuffer(d, "<f4", int(np.prod(ne)), base + o).reshape(list(reversed(ne))).copy()
    return kv, ts


def load(path):
    kv, ts = read_gguf(path)
    # the configuration the weights were trained with, not the file's claims: a wrong RoPE
    # or norm key written by the export then shows up as a logit mismatch
    c = dict(train.CFG)
    m = train.Model(c)
    T = lambda a: torch.from_numpy(a)
    with torch.no_grad():
        m.emb.weight.copy_(T(ts["token_embd.weight"]))
        m.norm.copy_(T(ts["output_norm.weight"]))
        for i, L in enumerate(m.layers):
            p = "blk.%d." % i
            L.an.copy_(T(ts[p + "attn_norm.weight"]))
            L.fn.copy_(T(ts[p + "ffn_norm.weight"]))
            for a, b in (("wq", "attn_q"), ("wk", "attn_k"), ("wv", "attn_v"), ("wo", "attn_output"),
                         ("w1", "ffn_gate"), ("w2", "ffn_down"), ("w3", "ffn_up")):
                getattr(L, a).weight.copy_(T(ts[p + b + ".weight"]))
    assert "output.weight" not in ts   # tied, as train.Model
    return m


if __name__ == "__main__":
    torch.set_num_threads(1)
    m = load(sys.argv[1]).double()
    # float64 everywhere except the RoPE angles, which follow the engine's documented float32
    # recurrence (train.engine_rope_angles): the test then measures export + engine arithmetic
    # (float32 matmuls, 1e-3), not the angle contract the engine shares with llama.cpp
    m.rope_angles = "engine"
    ids = torch.tensor([[int(x) for x in sys.argv[2].split(",")]])
    pos = torch.tensor([[int(x) for x in sys.argv[3].split(",")]])
    with torch.no_grad():
        lg = m(ids, pos)[0, -1]
    print(json.dumps({"logits": [float(v) for v in lg]}))
