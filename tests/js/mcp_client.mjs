// The official MCP TypeScript SDK client against `longctx mcp` over stdio: lists the
// tools (with schemas), indexes a project, searches it, asks for status and related code,
// and checks the error paths. Exit status 0 = pass. Needs LCX_BIN.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import assert from 'node:assert/strict';

const bin = path.join(process.env.LCX_BIN || 'build/bin', 'longctx');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'lcx-mcp-'));
const proj = path.join(tmp, 'proj');
fs.mkdirSync(path.join(proj, 'src'), { recursive: true });
fs.writeFileSync(path.join(proj, 'package.json'), '{"name":"proj"}\n');
fs.writeFileSync(path.join(proj, 'src', 'tokenizer.js'),
  '// Splits source text into tokens.\nexport function tokenizeSource(text) {\n  return text.split(/\\s+/);\n}\n');
fs.writeFileSync(path.join(proj, 'src', 'main.js'),
  "import { tokenizeSource } from './tokenizer.js';\nconsole.log(tokenizeSource('a b c'));\n");
for (let i = 0; i < 5; i++)
  fs.writeFileSync(path.join(proj, 'src', `other${i}.js`), `export const value${i} = ${i};\n`);

const transport = new StdioClientTransport({ command: bin, args: ['mcp', '--data-dir', path.join(tmp, 'data'), '--no-watch'],
  stderr: 'inherit' });
const client = new Client({ name: 'longctx-test', version: '1.0.0' });
let ok = false;
const text = (r) => r.content.map((c) => c.text).join('');
try {
  await client.connect(transport);
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name).sort();
  assert.deepEqual(names, ['add_project', 'find_related', 'index_status', 'list_projects', 'search_codebase']);
  for (const t of tools) assert.equal(t.inputSchema.type, 'object');
  assert.deepEqual(tools.find((t) => t.name === 'search_codebase').inputSchema.required, ['query']);

  const added = await client.callTool({ name: 'add_project', arguments: { path: proj } });
  assert.equal(added.isError, false, text(added));
  assert.match(text(added), /files: 8/);

  const found = await client.callTool({ name: 'search_codebase',
    arguments: { query: 'where is tokenizeSource defined', project: proj, max_results: 3 } });
  assert.equal(found.isError, false, text(found));
  assert.match(text(found), /src\/tokenizer\.js:1-/);

  const tiny = await client.callTool({ name: 'search_codebase',
    arguments: { query: 'tokenizeSource', cwd: path.join(proj, 'src'), max_tokens: 100 } });
  assert.ok(text(tiny).length <= 400, `budget exceeded: ${text(tiny).length} bytes`);

  const listed = await client.callTool({ name: 'list_projects', arguments: {} });
  assert.match(text(listed), new RegExp(fs.realpathSync(proj).replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
  const status = await client.callTool({ name: 'index_status', arguments: { project: proj } });
  assert.match(text(status), /chunks: \d+/);
  const related = await client.callTool({ name: 'find_related',
    arguments: { file: path.join(proj, 'src', 'main.js') } });
  assert.equal(related.isError, false, text(related));
  assert.match(text(related), /tokenizer\.js/);

  const bad = await client.callTool({ name: 'search_codebase', arguments: { query: 'x', max_results: 1000 } });
  assert.equal(bad.isError, true);
  const secret = await client.callTool({ name: 'add_project', arguments: { path: '/root/.ssh' } });
  assert.equal(secret.isError, true);
  await assert.rejects(client.callTool({ name: 'no_such_tool', arguments: {} }));
  console.log('MCP SDK client: 5 tools, index, search, budget, status, related, errors OK');
  ok = true;
} catch (e) {
  console.error('FAIL', e);
} finally {
  await client.close().catch(() => {});
  fs.rmSync(tmp, { recursive: true, force: true });
}
process.exit(ok ? 0 : 1);
