"""Independent numpy (float64) BERT for test_neural's reference check.

  ref_bert.py make DIR VOCAB   write a random HF folder: hidden 48 (3 heads of 16: widths that
                               are not multiples of the 32-row GEMM panel), FFN 80, 2 layers,
                               erf GELU, CLS pooling + Normalize; dense weights stored F16,
                               the rest F32, a BF16 position table
  ref_bert.py forward DIR IDS  IDS: one line of token ids per sequence; prints each
                               sequence's L2-normalised [CLS] vector, one line each
Own safetensors parser; no torch / transformers."""
import json
import math
import os
import struct
import sys

import numpy as np

H, NH, FF, NL, V, NPOS = 48, 3, 80, 2, 1024, 64


def write_st(path, tensors):
    hdr, blobs, off = {}, [], 0
    for name in sorted(tensors):
        dt, arr = tensors[name]
        if dt == "BF16":
            raw = (np.asarray(arr, np.float32).view(np.uint32) >> 16).astype(np.uint16).tobytes()
        else:
            raw = np.asarray(arr, {"F32": np.float32, "F16": np.float16}[dt]).tobytes()
        hdr[name] = {"dtype": dt, "shape": list(arr.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    js = json.dumps(hdr).encode()
    js += b" " * (-len(js) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(js)) + js + b"".join(blobs))


def read_st(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    hdr = json.loads(b[8:8 + n])
    out = {}
    for k, v in hdr.items():
        if k == "__metadata__":
            continue
        s, e = v["data_offsets"]
        raw = b[8 + n + s:8 + n + e]
        if v["dtype"] == "BF16":
            a = (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            a = np.frombuffer(raw, {"F32": np.float32, "F16": np.float16}[v["dtype"]])
        out[k] = a.astype(np.float64).reshape(v["shape"])
    return out


def make(d, vocab):
    rng = np.random.default_rng(7)
    os.makedirs(os.path.join(d, "1_Pooling"), exist_ok=True)
    t = {}

    def lin(name, o, i):
        t[name + ".weight"] = ("F16", rng.standard_normal((o, i)) / math.sqrt(i))
        t[name + ".bias"] = ("F32", rng.standard_normal(o) * 0.1)

    def ln(name):
        t[name + ".weight"] = ("F32", 1 + rng.standard_normal(H) * 0.1)
        t[name + ".bias"] = ("F32", rng.standard_normal(H) * 0.1)

    t["embeddings.word_embeddings.weight"] = ("F32", rng.standard_normal((V, H)))
    t["embeddings.position_embeddings.weight"] = ("BF16", rng.standard_normal((NPOS, H)) * 0.5)
    t["embeddings.token_type_embeddings.weight"] = ("F32", rng.standard_normal((2, H)) * 0.5)
    ln("embeddings.LayerNorm")
    for l in range(NL):
        p = "encoder.layer.%d." % l
        for n in ("query", "key", "value"):
            lin(p + "attention.self." + n, H, H)
        lin(p + "attention.output.dense", H, H)
        ln(p + "attention.output.LayerNorm")
        lin(p + "intermediate.dense", FF, H)
        lin(p + "output.dense", H, FF)
        ln(p + "output.LayerNorm")
    write_st(os.path.join(d, "model.safetensors"), t)
    json.dump({"model_type": "bert", "architectures": ["BertModel"], "vocab_size": V, "hidden_size": H,
               "num_hidden_layers": NL, "num_attention_heads": NH, "intermediate_size": FF, "hidden_act": "gelu",
               "max_position_embeddings": NPOS, "type_vocab_size": 2, "layer_norm_eps": 1e-12},
              open(os.path.join(d, "config.json"), "w"))
    json.dump({"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False},
              open(os.path.join(d, "1_Pooling", "config.json"), "w"))
    json.dump([{"type": "sentence_transformers.models.Transformer"}, {"type": "sentence_transformers.models.Pooling"},
               {"type": "sentence_transformers.models.Normalize"}], open(os.path.join(d, "modules.json"), "w"))
    open(os.path.join(d, "vocab.txt"), "wb").write(open(vocab, "rb").read())


erf = np.vectorize(math.erf)


def ln(x, w, b):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + 1e-12) * w + b


def forward(d, ids_path):
    w = read_st(os.path.join(d, "model.safetensors"))
    for line in open(ids_path):
        ids = np.array([int(x) for x in line.split()])
        n = len(ids)
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:n] + \
            w["embeddings.token_type_embeddings.weight"][0]
        x = ln(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        hd = H // NH
        for l in range(NL):
            p = "encoder.layer.%d." % l

            def lin(name, v):
                return v @ w[p + name + ".weight"].T + w[p + name + ".bias"]

            q, k, vv = (lin("attention.self." + s, x).reshape(n, NH, hd).transpose(1, 0, 2) for s in ("query", "key", "value"))
            s = q @ k.transpose(0, 2, 1) / math.sqrt(hd)
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            a = (s @ vv).transpose(1, 0, 2).reshape(n, H)
            x = ln(x + lin("attention.output.dense", a), w[p + "attention.output.LayerNorm.weight"],
                   w[p + "attention.output.LayerNorm.bias"])
            h = lin("intermediate.dense", x)
            h = 0.5 * h * (1 + erf(h / math.sqrt(2)))
            x = ln(x + lin("output.dense", h), w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"])
        c = x[0] / np.linalg.norm(x[0])
        print(" ".join("%.9g" % v for v in c))


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2], sys.argv[3])
    else:
        forward(sys.argv[2], sys.argv[3])
