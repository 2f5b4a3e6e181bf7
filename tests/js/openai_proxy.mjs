// The official `openai` npm client against longctx-svc's proxy (Mode A), with a fake
// OpenAI-compatible upstream served by this script. Checks a plain and a streamed chat
// completion, that the code splice reached the upstream, and that the stream arrives as
// several chunks. Exit status 0 = pass. Needs LCX_BIN (directory of longctx-svc).
import OpenAI from 'openai';
import http from 'node:http';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import assert from 'node:assert/strict';

const bin = path.join(process.env.LCX_BIN || 'build/bin', 'longctx-svc');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'lcx-openai-'));
const proj = path.join(tmp, 'proj');
fs.mkdirSync(path.join(proj, '.git'), { recursive: true });
fs.mkdirSync(path.join(proj, 'src'));
fs.writeFileSync(path.join(proj, '.git', 'HEAD'), 'ref: refs/heads/main\n');
fs.writeFileSync(path.join(proj, 'src', 'checksum.c'),
  '/* Adler-style rolling checksum of a buffer. */\nunsigned rolling_checksum(const unsigned char *p, int n)\n' +
  '{\n    unsigned a = 1, b = 0;\n    while (n--) { a += *p++; b += a; }\n    return b << 16 | a;\n}\n');

let seen = [];
const upstream = http.createServer((req, res) => {
  let body = '';
  req.on('data', (c) => (body += c));
  req.on('end', () => {
    seen.push({ headers: req.headers, body });
    const j = JSON.parse(body);
    if (j.stream) {
      res.writeHead(200, { 'Content-Type': 'text/event-stream' });
      const words = ['The', ' checksum', ' is', ' rolling', '.'];
      let i = 0;
      const tick = () => {
        if (i < words.length) {
          res.write(`data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 0, model: 'm',
            choices: [{ index: 0, delta: { content: words[i] }, finish_reason: null }] })}\n\n`);
          i++;
          setTimeout(tick, 30);
        } else {
          res.write('data: [DONE]\n\n');
          res.end();
        }
      };
      tick();
    } else {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ id: 'chatcmpl-1', object: 'chat.completion', created: 0, model: 'm',
        choices: [{ index: 0, message: { role: 'assistant', content: 'It returns b << 16 | a.' }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } }));
    }
  });
});
await new Promise((r) => upstream.listen(0, '127.0.0.1', r));
const upPort = upstream.address().port;

// a free port for the service
const probe = http.createServer();
await new Promise((r) => probe.listen(0, '127.0.0.1', r));
const port = probe.address().port;
await new Promise((r) => probe.close(r));

const svc = spawn(bin, ['serve', '--host', '127.0.0.1', '--port', String(port), '--data-dir', path.join(tmp, 'data'),
  '--upstream', `http://127.0.0.1:${upPort}`, '--quiet'], { stdio: ['ignore', 'inherit', 'inherit'] });
let ok = false;
try {
  for (let i = 0; i < 400; i++) {
    try {
      const r = await fetch(`http://127.0.0.1:${port}/healthz`);
      if (r.status === 200) break;
    } catch { /* not up yet */ }
    await new Promise((r) => setTimeout(r, 50));
  }
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'sk-test-openai' });
  const question = `What does rolling_checksum in ${proj}/src/checksum.c return?`;

  const plain = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: question }] });
  assert.equal(plain.choices[0].message.content, 'It returns b << 16 | a.');
  const up1 = JSON.parse(seen.at(-1).body);
  assert.equal(up1.messages[0].role, 'system');
  assert.match(up1.messages[0].content, /^## Retrieved code context/);
  assert.match(up1.messages[0].content, /rolling_checksum/);
  assert.equal(seen.at(-1).headers.authorization, 'Bearer sk-test-openai');

  const stream = await client.chat.completions.create({ model: 'm', stream: true,
    messages: [{ role: 'user', content: question }] });
  let text = '', chunks = 0;
  for await (const ev of stream) {
    chunks++;
    text += ev.choices[0]?.delta?.content ?? '';
  }
  assert.equal(text, 'The checksum is rolling.');
  assert.equal(chunks, 5);
  console.log('openai client: plain + stream through the proxy OK');
  ok = true;
} catch (e) {
  console.error('FAIL', e);
} finally {
  svc.kill('SIGTERM');
  upstream.close();
  fs.rmSync(tmp, { recursive: true, force: true });
}
process.exit(ok ? 0 : 1);
