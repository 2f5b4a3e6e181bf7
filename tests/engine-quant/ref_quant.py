#!/usr/bin/python3
"""Independent reference for the engine-quant tests (numpy; written from the GGUF/ggml
format description, sharing no code with src/engine/quant.c).

  ref_quant.py extract GGUF TENSOR OUT   -> OUT.raw (tensor bytes), OUT.f32 (numpy dequant),
                                            prints "type ne0 ne1"
  ref_quant.py dequant TYPE IN.raw OUT.f32  -> numpy dequant of a raw row buffer
"""
import struct
import sys

import numpy as np

QK_K = 256
# type -> (block elems, block bytes)
TYPES = {0: (1, 4), 1: (1, 2), 2: (32, 18), 6: (32, 22), 8: (32, 34), 12: (256, 144),
         13: (256, 176), 14: (256, 210), 15: (256, 292), 30: (1, 2)}


def f16(a):
    return np.frombuffer(np.ascontiguousarray(a).tobytes(), dtype="<f2").astype(np.float32)


def scale_min_k4(sc):  # sc: (nb, 12) uint8 -> (nb, 8) scales, (nb, 8) mins
    sc = sc.astype(np.int32)
    d = np.zeros((sc.shape[0], 8), np.int32)
    m = np.zeros((sc.shape[0], 8), np.int32)
    for j in range(8):
        if j < 4:
            d[:, j] = sc[:, j] & 63
            m[:, j] = sc[:, j + 4] & 63
        else:
            d[:, j] = (sc[:, j + 4] & 0xF) | ((sc[:, j - 4] >> 6) << 4)
            m[:, j] = (sc[:, j + 4] >> 4) | ((sc[:, j] >> 6) << 4)
    return d, m


def dequant(t, raw):
    be, bb = TYPES[t]
    b = np.frombuffer(raw, dtype=np.uint8)
    if t == 0:
        return np.frombuffer(raw, dtype="<f4").copy()
    if t == 1:
        return f16(b)
    if t == 30:
        return (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
    b = b.reshape(-1, bb)
    nb = b.shape[0]
    if t == 2:
        d = f16(b[:, 0:2])[:, None]
        qs = b[:, 2:18].astype(np.int32)
        q = np.concatenate([(qs & 0xF) - 8, (qs >> 4) - 8], axis=1)
        return (d * q).reshape(-1).astype(np.float32)
    if t == 6:
        d = f16(b[:, 0:2])[:, None]
        qh = b[:, 2:6].copy().view("<u4").astype(np.int64)  # (nb,1)
        qs = b[:, 6:22].astype(np.int32)
        bits = (qh >> np.arange(32)) & 1
        q = np.concatenate([qs & 0xF, qs >> 4], axis=1) | (bits << 4)
        return (d * (q - 16)).reshape(-1).astype(np.float32)
    if t == 8:
        d = f16(b[:, 0:2])[:, None]
        return (d * b[:, 2:34].view(np.int8)).reshape(-1).astype(np.float32)
    if t in (12, 13):
        d = f16(b[:, 0:2])[:, None]
        dmin = f16(b[:, 2:4])[:, None]
        sc, mn = scale_min_k4(b[:, 4:16])
        if t == 12:
            qs = b[:, 16:144].astype(np.int32).reshape(nb, 4, 32)
            qh = None
        else:
            qh = b[:, 16:48].astype(np.int32)  # (nb,32)
            qs = b[:, 48:176].astype(np.int32).reshape(nb, 4, 32)
        q = np.zeros((nb, 8, 32), np.int32)
        for j in range(4):
            q[:, 2 * j] = qs[:, j] & 0xF
            q[:, 2 * j + 1] = qs[:, j] >> 4
            if qh is not None:
                q[:, 2 * j] += ((qh >> (2 * j)) & 1) * 16
                q[:, 2 * j + 1] += ((qh >> (2 * j + 1)) & 1) * 16
        y = (d * sc)[:, :, None].astype(np.float32) * q - (dmin * mn)[:, :, None].astype(np.float32)
        return y.reshape(-1).astype(np.float32)
    if t == 14:
        ql = b[:, 0:128].astype(np.int32)
        qh = b[:, 128:192].astype(np.int32)
        sc = b[:, 192:208].view(np.int8).astype(np.float32)
        d = f16(b[:, 208:210])[:, None]
        y = np.zeros((nb, 256), np.float32)
        for n in range(2):
            l0, l1, h = ql[:, 64 * n:64 * n + 32], ql[:, 64 * n + 32:64 * n + 64], qh[:, 32 * n:32 * n + 32]
            parts = [(l0 & 0xF) | ((h & 3) << 4), (l1 & 0xF) | (((h >> 2) & 3) << 4),
                     (l0 >> 4) | (((h >> 4) & 3) << 4), (l1 >> 4) | (((h >> 6) & 3) << 4)]
            for k, p in enumerate(parts):
                base = 128 * n + 32 * k
                for half in range(2):
                    s = sc[:, base // 16 + half][:, None]
                    y[:, base + 16 * half: base + 16 * half + 16] = \
                        (d * s) * (p[:, 16 * half:16 * half + 16] - 32)
        return y.reshape(-1)
    if t == 15:
        d = b[:, 0:4].copy().view("<f4")
        return (d * b[:, 4:260].view(np.int8)).reshape(-1).astype(np.float32)
    raise SystemExit("unsupported type %d" % t)


class Reader:
    def __init__(self, data):
        self.d, self.o = data, 0

    def u(self, fmt):
        v = struct.unpack_from("<" + fmt, self.d, self.o)[0]
        self.o += struct.calcsize("<" + fmt)
        return v

    def s(self):
        n = self.u("Q")
        v = self.d[self.o:self.o + n]
        self.o += n
        return v.decode("utf-8", "replace")

    def val(self, t):
        f = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
        if t in f:
            return self.u(f[t])
        if t == 8:
            return self.s()
        if t == 9:
            at, n = self.u("I"), self.u("Q")
            return [self.val(at) for _ in range(n)]
        raise SystemExit("bad kv type")


def extract(path, name, out):
    data = open(path, "rb").read()
    r = Reader(data)
    assert r.u("I") == 0x46554747
    ver = r.u("I")
    nt, nkv = r.u("Q"), r.u("Q")
    align = 32
    for _ in range(nkv):
        k = r.s()
        v = r.val(r.u("I"))
        if k == "general.alignment":
            align = v
    infos = []
    for _ in range(nt):
        nm = r.s()
        nd = r.u("I")
        ne = [r.u("Q") for _ in range(nd)]
        t = r.u("I")
        off = r.u("Q")
        infos.append((nm, ne, t, off))
    base = (r.o + align - 1) // align * align
    for nm, ne, t, off in infos:
        if nm != name:
            continue
        n = int(np.prod(ne))
        be, bb = TYPES[t]
        nbytes = n // be * bb
        raw = data[base + off: base + off + nbytes]
        open(out + ".raw", "wb").write(raw)
        dequant(t, raw).astype("<f4").tofile(out + ".f32")
        print(t, ne[0], ne[1] if len(ne) > 1 else 1)
        return
    raise SystemExit("tensor not found: " + name)


if __name__ == "__main__":
    if sys.argv[1] == "extract":
        extract(sys.argv[2], sys.argv[3], sys.argv[4])
    elif sys.argv[1] == "dequant":
        raw = open(sys.argv[3], "rb").read()
        dequant(int(sys.argv[2]), raw).astype("<f4").tofile(sys.argv[4])
    else:
        raise SystemExit(__doc__)
