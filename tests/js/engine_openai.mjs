// The official `openai` npm client against `longctx-engine serve` (a tiny random-weight
// model made by `longctx eval ramp-model`): plain and streamed chat (same text under greedy),
// max_tokens and stop honoured, a two-turn session (x-session-id) whose second turn reuses
// the cache (usage.prompt_tokens_details.cached_tokens), OpenAI-shaped errors surfacing as
// the client's APIError, and Mode A: `longctx-svc serve --upstream` in front, streamed
// through. Exit status 0 = pass. Needs LCX_BIN (longctx, longctx-engine, longctx-svc).
import OpenAI from 'openai';
import http from 'node:http';
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import assert from 'node:assert/strict';

const binDir = process.env.LCX_BIN || 'build/bin';
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'lcx-engine-openai-'));
const model = path.join(tmp, 'tiny.gguf');
execFileSync(path.join(binDir, 'longctx'), ['eval', 'ramp-model', model, '--shape', 'tiny'], { stdio: 'ignore' });

async function freePort() {
  const probe = http.createServer();
  await new Promise((r) => probe.listen(0, '127.0.0.1', r));
  const port = probe.address().port;
  await new Promise((r) => probe.close(r));
  return port;
}
async function waitUp(port) {
  for (let i = 0; i < 600; i++) {
    try {
      if ((await fetch(`http://127.0.0.1:${port}/healthz`)).status === 200) return;
    } catch { /* not up yet */ }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`nothing answers on port ${port}`);
}

const ePort = await freePort();
const eng = spawn(path.join(binDir, 'longctx-engine'), ['serve', '-m', model, '--port', String(ePort), '-c', '1024',
  '--model-id', 'tiny'], { stdio: ['ignore', 'ignore', 'inherit'] });
let svc = null, ok = false;
try {
  await waitUp(ePort);
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${ePort}/v1`, apiKey: 'none' });
  const models = await client.models.list();
  assert.equal(models.data[0].id, 'tiny');

  const req = { model: 'tiny', temperature: 0, max_tokens: 10, messages: [{ role: 'user', content: 'the cat sat' }] };
  const plain = await client.chat.completions.create(req);
  assert.ok(plain.usage.completion_tokens >= 1 && plain.usage.completion_tokens <= 10);
  const full = plain.choices[0].message.content;
  const stream = await client.chat.completions.create({ ...req, stream: true });
  let text = '', chunks = 0;
  for await (const ev of stream) {
    chunks++;
    text += ev.choices[0]?.delta?.content ?? '';
  }
  assert.equal(text, full);
  assert.ok(chunks >= 2);

  // stop: a piece from the middle of the reply cuts it there
  assert.ok(full.length >= 6, `reply too short: ${JSON.stringify(full)}`);
  const stop = full.slice(3, 5);
  const cut = await client.chat.completions.create({ ...req, stop });
  assert.equal(cut.choices[0].message.content, full.slice(0, full.indexOf(stop)));
  assert.equal(cut.choices[0].finish_reason, 'stop');

  // two turns of one session: the second reuses the first's prompt from the cache
  const opts = { headers: { 'x-session-id': 'js-1' } };
  const t1 = await client.chat.completions.create({ ...req, max_tokens: 4 }, opts);
  assert.equal(t1.usage.prompt_tokens_details.cached_tokens, 0);
  const t2 = await client.chat.completions.create({ ...req, max_tokens: 4, messages: [...req.messages,
    t1.choices[0].message, { role: 'user', content: 'on the mat' }] }, opts);
  assert.ok(t2.usage.prompt_tokens_details.cached_tokens >= t1.usage.prompt_tokens);

  // errors surface as the client's APIError with OpenAI's fields
  await assert.rejects(client.chat.completions.create({ ...req, temperature: 7 }),
    (e) => e instanceof OpenAI.BadRequestError && e.code === 'invalid_value');
  await assert.rejects(client.chat.completions.create({ ...req, model: 'gpt-9' }),
    (e) => e instanceof OpenAI.NotFoundError && e.code === 'model_not_found');

  // content as an array of text parts is the joined string; an image part is refused
  const userText = req.messages[req.messages.length - 1].content;
  const parts = await client.chat.completions.create({ ...req, messages: [{ role: 'user',
    content: [{ type: 'text', text: userText }] }] });
  assert.equal(parts.choices[0].message.content, full);
  await assert.rejects(client.chat.completions.create({ ...req, messages: [{ role: 'user',
    content: [{ type: 'image_url', image_url: { url: 'http://127.0.0.1/x.png' } }] }] }),
    (e) => e instanceof OpenAI.BadRequestError && e.code === 'invalid_messages');

  // Mode A: longctx-svc's proxy in front of the engine, streamed through
  const sPort = await freePort();
  svc = spawn(path.join(binDir, 'longctx-svc'), ['serve', '--host', '127.0.0.1', '--port', String(sPort),
    '--data-dir', path.join(tmp, 'data'), '--upstream', `http://127.0.0.1:${ePort}`, '--quiet'],
  { stdio: ['ignore', 'inherit', 'inherit'] });
  await waitUp(sPort);
  const viaProxy = new OpenAI({ baseURL: `http://127.0.0.1:${sPort}/v1`, apiKey: 'none' });
  const ps = await viaProxy.chat.completions.create({ ...req, stream: true });
  let ptext = '', pchunks = 0;
  for await (const ev of ps) {
    pchunks++;
    ptext += ev.choices[0]?.delta?.content ?? '';
  }
  assert.ok(pchunks >= 2, 'the proxy delivered the stream as several events');
  assert.ok(ptext.length > 0);
  console.log('openai client: engine serve plain/stream/stop/session/errors/content parts + Mode A proxy OK');
  ok = true;
} catch (e) {
  console.error('FAIL', e);
} finally {
  if (svc) svc.kill('SIGTERM');
  eng.kill('SIGTERM');
  fs.rmSync(tmp, { recursive: true, force: true });
}
process.exit(ok ? 0 : 1);
