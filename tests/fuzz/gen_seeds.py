#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/): small, real
examples of each input kind, built here (no fixture is copied; scripts/fuzz.sh adds the
fixtures as extra seeds at run time when ../shared is there). Standard library only; run
from anywhere: python3 tests/fuzz/gen_seeds.py. Re-running rewrites the same bytes."""
import json
import os
import random
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus")


def put(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def req(method, path, body=b"", headers=()):
    if isinstance(body, str):
        body = body.encode()
    h = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"] + list(headers)
    if body or method == "POST":
        h.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(h) + "\r\n\r\n").encode() + body


WRITE_A = json.dumps({"session_id": "s1", "chunks": [
    {"text": "access code 481729", "token_range": [0, 31], "layer": 0, "score": 0.4},
    {"text": "caf\u00e9 \"quoted\" \\ tab\tline\n", "token_range": [32, 63], "layer": 3, "round": 2, "score": -0.5e-3}]})
WRITE_B = json.dumps({"chunks": [{"text": "alpha beta", "tokens": [791, 6460, 13], "round": 3, "layer": 0},
                                 {"text": "", "tokens": []}, {"text": "gamma", "tokens": [1, 2]}]})
RETRIEVE = json.dumps({"session_id": "s1", "query": "What is the access code?", "top_k": 8, "score_floor": 0.2})
CODE_RETRIEVE = json.dumps({"query": "where is open_vault defined? see @P/src/vault.c", "session_id": "c1", "top_k": 4})
CHAT = json.dumps({"model": "m", "messages": [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "In @P/src/vault.c what does open_vault check?"}], "stream": False})
CHAT_PARTS = json.dumps({"model": "m", "messages": [
    {"role": "system", "content": [{"type": "text", "text": "sys"}]},
    {"role": "user", "content": [{"type": "text", "text": "explain parse_header"}, {"type": "image_url", "image_url": {"url": "x"}}]}],
    "stream": True, "session_id": "p1"})
COMPLETIONS = json.dumps({"model": "m", "prompt": "def parse_header(line):", "max_tokens": 4})
MCP = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "fz", "version": "1"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "search_codebase", "arguments": {"query": "open_vault code", "project": "@P", "top_k": 3}}},
    {"jsonrpc": "2.0", "id": "x", "method": "tools/call", "params": {"name": "search_codebase", "arguments": {"query": "parse_header", "cwd": "@P/src"}}},
    {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "list_projects", "arguments": {}}},
    {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "index_status", "arguments": {"project": "@P"}}},
    {"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "find_related", "arguments": {"file": "@P/src/vault.c", "top_k": 2}}},
    {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "add_project", "arguments": {"path": "@P"}}},
    {"jsonrpc": "2.0", "id": 8, "method": "ping"},
    {"jsonrpc": "2.0", "id": 9, "result": {}},
]


def seeds_http():
    put("http", "healthz", req("GET", "/healthz"))
    put("http", "status_text", req("GET", "/longctx/status", headers=["Accept: text/plain"]))
    put("http", "metrics", req("GET", "/metrics"))
    put("http", "write_a", req("POST", "/evict/write", WRITE_A, ["Content-Type: application/json"]))
    put("http", "write_b", req("POST", "/evict/write?session_id=s1", WRITE_B))
    put("http", "retrieve", req("POST", "/evict/retrieve", RETRIEVE))
    put("http", "dump", req("GET", "/evict/dump?session_id=s1&x=%41%00b"))
    put("http", "code_retrieve", req("POST", "/retrieve", CODE_RETRIEVE))
    put("http", "chat", req("POST", "/v1/chat/completions", CHAT))
    put("http", "mcp", req("POST", "/mcp", json.dumps(MCP[0]), ["Accept: application/json, text/event-stream"]))
    chunked = b"POST /evict/write HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    body = WRITE_A.encode()
    chunked += b"%x\r\n" % 10 + body[:10] + b"\r\n" + b"%x\r\n" % (len(body) - 10) + body[10:] + b"\r\n0\r\n\r\n"
    put("http", "chunked", chunked)
    put("http", "pipelined", req("GET", "/healthz") + req("POST", "/evict/retrieve", RETRIEVE) + req("GET", "/v1/models"))
    put("http", "expect", req("POST", "/evict/write", WRITE_A, ["Expect: 100-continue", "Connection: keep-alive"]))
    put("http", "hibernate", req("POST", "/sessions/s1/hibernate") + req("GET", "/sessions/s1/hibernation-status") +
        req("POST", "/sessions/s1/resume"))
    put("http", "bad_line", b"GET /healthz HTTP/1.1 extra\r\n\r\n")
    put("http", "http10", b"GET /healthz HTTP/1.0\r\n\r\n")
    put("http", "auth", req("GET", "/longctx/status", headers=["Authorization: Bearer abc", "X-Session-Id: s1"]))
    put("http", "method", req("DELETE", "/evict/write") + req("OPTIONS", "*"))


def seeds_routes():
    bodies = [(0, "write_a", WRITE_A), (1, "write_b", WRITE_B), (2, "retrieve", RETRIEVE), (3, "code", CODE_RETRIEVE),
              (4, "chat", CHAT), (4, "chat_parts", CHAT_PARTS), (5, "completions", COMPLETIONS), (6, "mcp", json.dumps(MCP[3])),
              (6, "mcp_init", json.dumps(MCP[0])), (7, "index", ""), (8, "hibernate", ""), (9, "resume", ""),
              (10, "dump", ""), (11 | 0x80, "status_text", ""), (0, "write_bad", '{"session_id":"s1","chunks":[{"text":1}]}'),
              (2, "retrieve_text", json.dumps({"session_id": "s1", "query": "x", "format": "text"}))]
    for sel, name, body in bodies:
        put("routes", name, bytes([sel]) + body.encode())


def seeds_evict_write():
    put("evict_write", "form_a", b"\x00" + WRITE_A.encode())
    put("evict_write", "form_b", b"\x01" + WRITE_B.encode())
    put("evict_write", "tight", b"\x02" + WRITE_A.encode())
    put("evict_write", "escapes", b"\x00" + b'{"session_id":"s\\u00e9","chunks":[{"text":"\\ud83d\\ude80 \\/ \\b\\f\\n\\r\\t \\u0001","token_range":[0,255],"layer":3}]}')
    put("evict_write", "nested", b"\x01" + b' {"chunks":[{"text":"a","tokens":[1,2],"x":{"a":[1,{"b":[true,false,null]}]}}],"extra":-1.5E+3}')
    put("evict_write", "dup", b"\x00" + b'{"session_id":"a","session_id":"b","chunks":[]}')


def seeds_proxy():
    put("proxy_body", "chat", CHAT)
    put("proxy_body", "parts", CHAT_PARTS)
    put("proxy_body", "no_system", json.dumps({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": None},
                                                             {"role": "user", "content": [{"type": "text", "text": "again"}]}]}))
    put("proxy_body", "sys_null", json.dumps({"messages": [{"role": "system"}, {"role": "user", "content": "q"}]}))
    put("proxy_body", "array", json.dumps([{"role": "user", "content": "bare array"}]))


def seeds_mcp():
    for i, m in enumerate(MCP):
        put("mcp", f"msg{i:02d}", json.dumps(m))
    put("mcp", "batch", json.dumps(MCP[2:4]))
    put("mcp", "bad", '{"jsonrpc":"2.0","id":1,"method":')


# ---- GGUF
T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR = 4, 5, 6, 7, 8, 9


def gstr(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def gval(t, v):
    if t == T_U32:
        return struct.pack("<I", v)
    if t == T_I32:
        return struct.pack("<i", v)
    if t == T_F32:
        return struct.pack("<f", v)
    if t == T_BOOL:
        return struct.pack("<B", v)
    if t == T_STR:
        return gstr(v)
    et, items = v
    return struct.pack("<IQ", et, len(items)) + b"".join(gval(et, x) for x in items)


def gguf(kvs, tensors, align=32):
    """kvs: [(key, type, value)], tensors: [(name, dims, floats)] (F32)."""
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    for k, t, v in kvs:
        out += gstr(k) + struct.pack("<I", t) + gval(t, v)
    off = 0
    datas = []
    for name, dims, vals in tensors:
        out += gstr(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", 0, off)
        data = struct.pack(f"<{len(vals)}f", *vals)
        datas.append(data)
        off += (len(data) + align - 1) // align * align
    out += b"\0" * ((-len(out)) % align)
    for d in datas:
        out += d + b"\0" * ((-len(d)) % align)
    return out


SPM_TOKENS = ["<unk>", "<s>", "</s>", "<0x0A>", "<0x20>", "\u2581", "\u2581a", "a", "b", "ab", "\u2581the", "e", "h"]


def spm_kvs():
    return [("general.architecture", T_STR, "llama"),
            ("tokenizer.ggml.model", T_STR, "llama"),
            ("tokenizer.ggml.tokens", T_ARR, (T_STR, SPM_TOKENS)),
            ("tokenizer.ggml.scores", T_ARR, (T_F32, [0.0, 0.0, 0.0, 0.0, 0.0, -1.0, -2.0, -3.0, -3.0, -2.5, -1.5, -4.0, -4.0])),
            ("tokenizer.ggml.token_type", T_ARR, (T_I32, [2, 3, 3, 6, 6, 1, 1, 1, 1, 1, 1, 1, 1])),
            ("tokenizer.ggml.bos_token_id", T_U32, 1), ("tokenizer.ggml.eos_token_id", T_U32, 2)]


def byte_level_vocab():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for c in cs]


def seeds_gguf():
    rnd = random.Random(24)
    put("gguf", "spm_tokenizer.gguf", gguf(spm_kvs(), []))
    V, E, F = len(SPM_TOKENS), 8, 16
    w = lambda *d: [round(rnd.uniform(-0.5, 0.5), 3) for _ in range(eval("*".join(map(str, d))))]
    tensors = [("token_embd.weight", [E, V], w(E, V)), ("output_norm.weight", [E], [1.0] * E)]
    tensors += [("blk.0.attn_norm.weight", [E], [1.0] * E), ("blk.0.attn_q.weight", [E, E], w(E, E)),
                ("blk.0.attn_k.weight", [E, E], w(E, E)), ("blk.0.attn_v.weight", [E, E], w(E, E)),
                ("blk.0.attn_output.weight", [E, E], w(E, E)), ("blk.0.ffn_norm.weight", [E], [1.0] * E),
                ("blk.0.ffn_gate.weight", [E, F], w(E, F)), ("blk.0.ffn_up.weight", [E, F], w(E, F)),
                ("blk.0.ffn_down.weight", [F, E], w(F, E))]
    model_kvs = spm_kvs() + [("llama.embedding_length", T_U32, E), ("llama.block_count", T_U32, 1),
                             ("llama.attention.head_count", T_U32, 2), ("llama.feed_forward_length", T_U32, F),
                             ("llama.context_length", T_U32, 64), ("llama.attention.layer_norm_rms_epsilon", T_F32, 1e-5),
                             ("general.alignment", T_U32, 32)]
    put("gguf", "tiny_llama.gguf", gguf(model_kvs, tensors))
    toks = byte_level_vocab() + ["\u0120t", "he", "\u0120the", "<|endoftext|>", "<|im_start|>"]
    types = [1] * (len(toks) - 2) + [3, 3]
    put("gguf", "bpe_tokenizer.gguf", gguf([
        ("general.architecture", T_STR, "qwen2"), ("tokenizer.ggml.model", T_STR, "gpt2"), ("tokenizer.ggml.pre", T_STR, "qwen2"),
        ("tokenizer.ggml.tokens", T_ARR, (T_STR, toks)), ("tokenizer.ggml.token_type", T_ARR, (T_I32, types)),
        ("tokenizer.ggml.merges", T_ARR, (T_STR, ["\u0120 t", "h e", "\u0120t he"])),
        ("tokenizer.ggml.eos_token_id", T_U32, len(toks) - 2),
        ("tokenizer.chat_template", T_STR, "{% for m in messages %}<|im_start|>{{ m.role }}{% endfor %}")], []))
    bert = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "##s", "the", ",", "\u4e2d"]
    put("gguf", "bert_tokenizer.gguf", gguf([
        ("general.architecture", T_STR, "bert"), ("tokenizer.ggml.model", T_STR, "bert"),
        ("tokenizer.ggml.tokens", T_ARR, (T_STR, bert)), ("tokenizer.ggml.token_type", T_ARR, (T_I32, [3, 2, 3, 3, 3] + [1] * 6)),
        ("tokenizer.ggml.cls_token_id", T_U32, 2), ("tokenizer.ggml.seperator_token_id", T_U32, 3),
        ("bert.embedding_length", T_U32, 4), ("bert.block_count", T_U32, 1), ("bert.attention.head_count", T_U32, 1),
        ("bert.feed_forward_length", T_U32, 8), ("bert.context_length", T_U32, 8)],
        [("token_embd.weight", [4, len(bert)], w(4, len(bert)))]))


def safetensors(D=4, F=8, V=16, P=8, T=2, reranker=False):
    names = [("embeddings.word_embeddings.weight", [V, D]), ("embeddings.position_embeddings.weight", [P, D]),
             ("embeddings.token_type_embeddings.weight", [T, D]), ("embeddings.LayerNorm.weight", [D]),
             ("embeddings.LayerNorm.bias", [D])]
    for suf, shape in [("attention.self.query.weight", [D, D]), ("attention.self.query.bias", [D]),
                       ("attention.self.key.weight", [D, D]), ("attention.self.key.bias", [D]),
                       ("attention.self.value.weight", [D, D]), ("attention.self.value.bias", [D]),
                       ("attention.output.dense.weight", [D, D]), ("attention.output.dense.bias", [D]),
                       ("attention.output.LayerNorm.weight", [D]), ("attention.output.LayerNorm.bias", [D]),
                       ("intermediate.dense.weight", [F, D]), ("intermediate.dense.bias", [F]),
                       ("output.dense.weight", [D, F]), ("output.dense.bias", [D]),
                       ("output.LayerNorm.weight", [D]), ("output.LayerNorm.bias", [D])]:
        names.append(("encoder.layer.0." + suf, shape))
    if reranker:
        names += [("pooler.dense.weight", [D, D]), ("pooler.dense.bias", [D]), ("classifier.weight", [1, D]), ("classifier.bias", [1])]
    hdr, data, off = {"__metadata__": {"format": "pt"}}, b"", 0
    rnd = random.Random(10)
    for n, shape in names:
        cnt = 1
        for s in shape:
            cnt *= s
        vals = [1.0] * cnt if n.endswith("LayerNorm.weight") else [round(rnd.uniform(-0.1, 0.1), 3) for _ in range(cnt)]
        b = struct.pack(f"<{cnt}f", *vals)
        hdr[n] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + len(b)]}
        data += b
        off += len(b)
    h = json.dumps(hdr, separators=(",", ":")).encode()
    return struct.pack("<Q", len(h)) + h + data


def seeds_safetensors():
    put("safetensors", "tiny_default_config", b"\xff\xff" + safetensors())
    cfg = json.dumps({"architectures": ["BertForSequenceClassification"], "model_type": "bert", "vocab_size": 16,
                      "hidden_size": 4, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 8,
                      "hidden_act": "gelu_new", "max_position_embeddings": 8, "type_vocab_size": 2}).encode()
    put("safetensors", "with_config", struct.pack("<H", len(cfg)) + cfg + safetensors(reranker=True))
    put("safetensors", "bf16_header", b"\xff\xff" + struct.pack("<Q", 60) + b'{"a":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}}    ' + b"\0" * 4)


def seeds_text():
    texts = ["Hello world, the vault code is 481729.", "parseHTTPHeader snake_case_name 90210-ALPHA a.b.c",
             "caf\u00e9 na\u00efve \u00c5ngstr\u00f6m \u4e2d\u6587 \U0001F680 emoji", "  \t\n\r  ", "<|im_start|>user\nhi<|im_end|>",
             "[CLS] hello [SEP] world [MASK]", "don't stop--won't 3.14159 1,000,000 0x1F", "\xff\xfe invalid \xc3"]
    for i, t in enumerate(texts):
        b = t.encode("utf-8", "surrogateescape") if "\xff" not in t else t.encode("latin-1")
        put("lexer", f"t{i}", b)
        put("tok", f"t{i}", bytes([i * 37 % 256]) + b)
        put("wordpiece", f"t{i}", bytes([(i * 11) % 256]) + b)


def seeds_chunk():
    c = "#include <stdio.h>\n#define MAX 4\nstruct point { int x, y; };\ntypedef struct { int a; } pair;\n" \
        "static int\nparse_header(const char *line)\n{\n    return line[0];\n}\n" + "".join(f"int f{i}(void) {{ return {i}; }}\n" for i in range(60))
    py = "import os\n\nclass Vault:\n    def open(self, code):\n        return code == 481729\n\nasync def main():\n    pass\n"
    js = "export default class Server {\n  start(port) { return port; }\n}\nconst handler = async (req) => req;\nfunction go() {}\n"
    rs = "pub struct S;\nimpl Trait for S {\n    fn run(&self) {}\n}\nmacro_rules! m { () => {} }\npub(crate) async fn f() {}\n"
    go = "package main\n\ntype T struct{}\n\nfunc (t *T) Run() {}\nfunc main() {}\n"
    md = "# Title\n\nFirst paragraph about the vault.\n\n## Section\n\n- item\n- item\n\n```c\ncode\n```\n"
    cfg = '{"name": "x", "version": "1.0", "scripts": {"test": "make"}}\n'
    java = "public class A {\n  private int x;\n  public static void main(String[] a) {}\n}\n"
    for sel, name, t in [(0, "c", c), (3, "py", py), (4, "js", js), (7, "rs", rs), (6, "go", go), (10, "md", md),
                         (13, "json", cfg), (8, "java", java), (16, "makefile", "all:\n\tcc -o x x.c\n"), (11, "empty", "")]:
        put("chunk", name, bytes([sel]) + t.encode())


def seeds_paths():
    put("paths", "detect", b"\x00" + b"see @P/src/main.c:12 and `@P/pkg/sub/x.py` (also /usr/include/stdio.h)")
    put("paths", "detect_rel", b"\x05" + b"look at src/main.c, pkg/sub/x.py: and ../other/Cargo.toml.")
    put("paths", "detect_any", b"\x06" + b"@P/other/Cargo.toml @P/proj/.env @P/proj/.ssh/id_rsa")
    put("paths", "gitignore", b"\x01" + b"src\n*.o\n/build/\n!keep.o\n**/gen/**\n\\#hash\n# comment\n[a-c]?.log\n--\nsrc/a.o\nsrc/keep.o\nbuild\nx/gen/y/z.c\nb1.log\n")
    put("paths", "wildmatch", b"\x02" + b"**/[!a-z]*.c\0src/deep/X.c")
    put("paths", "wildmatch_class", b"\x02" + b"[[:alpha:]]*[\\]]?\0a]b")
    put("paths", "canon", b"\x03" + b"@P/proj/./src/../pkg//sub/")
    put("paths", "canon_secret", b"\x03" + b"@P/proj/.ssh/id_ed25519")
    put("paths", "canon_rel", b"\x03" + b"relative/../../x")


def seeds_mrcr():
    prompt = [{"role": "user", "content": "write a poem about tapirs"}, {"role": "assistant", "content": "Tapirs roam."},
              {"role": "user", "content": "Prepend ab12 to the 1st poem about tapirs"}]
    rec = {"prompt": json.dumps(prompt), "answer": "ab12Tapirs roam.", "random_string_to_prepend": "ab12", "n_needles": 2,
           "desired_msg_index": 0, "total_messages": 3, "n_chars": 120}
    rec2 = dict(rec, prompt=prompt, n_needles=4, n_chars=20000)
    put("mrcr", "two_lines.jsonl", json.dumps(rec) + "\n" + json.dumps(rec2) + "\n\n")
    put("mrcr", "bad.jsonl", '{"prompt":"[{\\"role\\":\\"user\\"}]","answer":1}\n' + json.dumps(dict(rec, desired_msg_index=9)) + "\n")


def seeds_triatt():
    sel = {"format": "triattention-selection-golden/1", "cases": [
        {"id": "c1", "positions": list(range(0, 40)), "scores": [round(((i * 37) % 17) / 17.0, 3) for i in range(40)],
         "budget": 20, "window": 4, "divide_length": 8, "prefix_protect": 6, "n_segments": 4, "direction": "keep_high", "n_used": 40},
        {"id": "c2", "positions": [0, 5, 9, 11], "scores": [0.5, 0.5, 0.1, 0.9], "budget": 2, "window": 1, "divide_length": 1,
         "prefix_protect": 0, "n_segments": 1, "direction": "evict_high"}]}
    put("triatt_replay", "selection.json", json.dumps(sel))
    rnd = random.Random(7)
    L, H, KV, D, C, K = 1, 2, 1, 8, 4, 6
    r = lambda *shape: [r(*shape[1:]) for _ in range(shape[0])] if len(shape) > 1 else [round(rnd.uniform(-1, 1), 3) for _ in range(shape[0])]
    cfg = {"n_layers": L, "n_heads": H, "n_kv_heads": KV, "gqa_group": H // KV, "head_dim": D, "n_rot": D, "freq_count": D // 2,
           "rope_theta": 10000.0, "n_calib_tokens": C, "n_keys": K, "round_start_P": 20, "offset_max_length": 65536,
           "freq_scale_sq": 1.0, "attention_scaling": 1.0, "kv_head_of_head": [0, 0]}
    inp = {"positions": [0, 2, 3, 7, 11, 15], "q_pre_rope_half": r(L, C, H, D), "k_rot_half": r(L, KV, K, D),
           "q_pre_rope_adjacent": r(L, C, H, D), "k_rot_adjacent": r(L, KV, K, D)}
    put("triatt_replay", "scoring.json", json.dumps({"format": "triattention-scoring-golden/1", "config": cfg, "inputs": inp}))


if __name__ == "__main__":
    seeds_http()
    seeds_routes()
    seeds_evict_write()
    seeds_proxy()
    seeds_mcp()
    seeds_gguf()
    seeds_safetensors()
    seeds_text()
    seeds_chunk()
    seeds_paths()
    seeds_mrcr()
    seeds_triatt()
