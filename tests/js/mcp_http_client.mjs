// The official MCP TypeScript SDK's Streamable HTTP client against longctx-svc's POST /mcp:
// the five tools, index, search, status, an error result, then the transport's rules
// checked by hand (SSE reply, session required / unknown / ended, 202 for notifications,
// foreign Origin refused). Exit status 0 = pass. Needs LCX_BIN (directory of longctx-svc).
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import http from 'node:http';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import assert from 'node:assert/strict';

const bin = path.join(process.env.LCX_BIN || 'build/bin', 'longctx-svc');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'lcx-mcphttp-'));
const proj = path.join(tmp, 'proj');
fs.mkdirSync(path.join(proj, 'src'), { recursive: true });
fs.writeFileSync(path.join(proj, 'package.json'), '{"name":"proj"}\n');
fs.writeFileSync(path.join(proj, 'src', 'tokenizer.js'),
  '// Splits source text into tokens.\nexport function tokenizeSource(text) {\n  return text.split(/\\s+/);\n}\n');
fs.writeFileSync(path.join(proj, 'src', 'main.js'),
  "import { tokenizeSource } from './tokenizer.js';\nconsole.log(tokenizeSource('a b c'));\n");

const probe = http.createServer();
await new Promise((r) => probe.listen(0, '127.0.0.1', r));
const port = probe.address().port;
await new Promise((r) => probe.close(r));
const base = `http://127.0.0.1:${port}`;
const svc = spawn(bin, ['serve', '--host', '127.0.0.1', '--port', String(port), '--data-dir', path.join(tmp, 'data'),
  '--quiet'], { stdio: ['ignore', 'inherit', 'inherit'], env: { ...process.env, LONGCTX_WATCH: '0' } });
const text = (r) => r.content.map((c) => c.text).join('');
const rpc = (id, method, params = {}) => JSON.stringify({ jsonrpc: '2.0', id, method, params });
const post = (body, headers) => fetch(`${base}/mcp`, { method: 'POST', body,
  headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...headers } });
let ok = false;
let client;
try {
  for (let i = 0; i < 400; i++) {
    try {
      if ((await fetch(`${base}/healthz`)).status === 200) break;
    } catch { /* not up yet */ }
    await new Promise((r) => setTimeout(r, 50));
  }
  const transport = new StreamableHTTPClientTransport(new URL(`${base}/mcp`));
  client = new Client({ name: 'longctx-http-test', version: '1.0.0' });
  await client.connect(transport);
  assert.match(transport.sessionId, /^[0-9a-f]{32}$/);
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name).sort(),
    ['add_project', 'find_related', 'index_status', 'list_projects', 'search_codebase']);
  const added = await client.callTool({ name: 'add_project', arguments: { path: proj } });
  assert.equal(added.isError, false, text(added));
  const found = await client.callTool({ name: 'search_codebase',
    arguments: { query: 'where is tokenizeSource defined', project: proj, max_results: 3 } });
  assert.equal(found.isError, false, text(found));
  assert.match(text(found), /src\/tokenizer\.js:1-/);
  const status = await client.callTool({ name: 'index_status', arguments: { project: proj } });
  assert.match(text(status), /chunks: \d+/);
  const bad = await client.callTool({ name: 'search_codebase', arguments: { query: 'x', max_results: 1000 } });
  assert.equal(bad.isError, true);
  const sid = transport.sessionId;

  // the transport's rules, by hand
  let r = await post(rpc(7, 'ping'), { 'Mcp-Session-Id': sid, Accept: 'text/event-stream' });
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type'), /^text\/event-stream/);
  const ev = await r.text();
  const data = ev.split('\n').find((l) => l.startsWith('data: '));
  assert.ok(ev.startsWith('event: message\n'), ev);
  assert.deepEqual(JSON.parse(data.slice(6)), { jsonrpc: '2.0', id: 7, result: {} });
  r = await post(rpc(8, 'tools/list'), {});
  assert.equal(r.status, 400);
  r = await post(rpc(9, 'tools/list'), { 'Mcp-Session-Id': 'f'.repeat(32) });
  assert.equal(r.status, 404);
  r = await post(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }), { 'Mcp-Session-Id': sid });
  assert.equal(r.status, 202);
  assert.equal(await r.text(), '');
  r = await post(rpc(10, 'ping'), { 'Mcp-Session-Id': sid, Accept: 'text/html' });
  assert.equal(r.status, 406);
  r = await post(rpc(11, 'initialize', { protocolVersion: '2025-06-18', capabilities: {},
    clientInfo: { name: 'x', version: '1' } }), { Origin: 'http://evil.example' });
  assert.equal(r.status, 403);
  assert.equal(r.headers.get('mcp-session-id'), null);
  r = await fetch(`${base}/mcp`, { method: 'GET', headers: { Accept: 'text/event-stream', 'Mcp-Session-Id': sid } });
  assert.equal(r.status, 405);

  await transport.terminateSession();   // DELETE /mcp
  r = await post(rpc(12, 'ping'), { 'Mcp-Session-Id': sid });
  assert.equal(r.status, 404);
  console.log('MCP SDK Streamable HTTP client: 5 tools, index, search, status, errors; SSE, sessions, 202, 406, Origin OK');
  ok = true;
} catch (e) {
  console.error('FAIL', e);
} finally {
  await client?.close().catch(() => {});
  svc.kill('SIGTERM');
  await new Promise((r) => svc.once('exit', r));
  fs.rmSync(tmp, { recursive: true, force: true });
}
process.exit(ok ? 0 : 1);
