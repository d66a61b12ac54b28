// Latency of hutch's MCP tools through the official npm SDK over
// Streamable HTTP (scripts/bench-mcp runs it; bench/README.md "MCP"):
//   node mcp_latency.mjs [oneshots=20] [runs=200]
// Env: HUTCH_MCP_URL (http://host:port/mcp), HUTCH_MCP_KEY; HUTCH_METRICS_URL
// to wait for the warm pool before each one-shot code run.
// Prints p50/p99 in ms of:
//   - tools/call exec `true` in a sandbox, next to /v1 exec of the same
//     (the protocol's share: JSON-RPC, the session, the event stream);
//   - tools/call run_code `1+1` on a warm context;
//   - tools/call run {language: python, code: 1+1} (a fresh sandbox from
//     the warm pool, the code, the sandbox removed), pool refilled first;
//   - tools/call run {cmd: 'true'} (a fresh base sandbox each time).
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { row as rowOf } from '../latency_stats.mjs';

const oneshots = Number(process.argv[2] ?? 20);
const runs = Number(process.argv[3] ?? 200);
const url = process.env.HUTCH_MCP_URL;
const key = process.env.HUTCH_MCP_KEY;

const row = (name, xs) => rowOf(name, xs, 48);

async function waitForPool() {
  if (!process.env.HUTCH_METRICS_URL) return;
  for (let i = 0; i < 1200; i++) {
    const res = await fetch(process.env.HUTCH_METRICS_URL, { headers: { Authorization: `Bearer ${key}` } });
    const m = /^hutch_sandboxes_warm (\S+)$/m.exec(await res.text());
    if (m && Number(m[1]) >= 1) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('the warm pool did not refill within 60 s');
}

const client = new Client({ name: 'mcp-latency', version: '1.0.0' });
await client.connect(new StreamableHTTPClientTransport(new URL(url),
  { requestInit: { headers: { Authorization: `Bearer ${key}` } } }));

async function call(name, args) {
  const r = await client.callTool({ name, arguments: args });
  if (r.isError) throw new Error(`${name}: ${JSON.stringify(r.content)}`);
  return r.structuredContent;
}
async function timed(xs, f) {
  const t0 = performance.now();
  await f();
  xs.push(performance.now() - t0);
}

const base = await call('sandbox_create', { template: 'base', ttl_seconds: 600 });
const code = await call('sandbox_create', { template: 'code-interpreter', ttl_seconds: 600 });
const v1 = new URL(url);
const exec = [], v1exec = [], runCode = [], runPy = [], runCmd = [];
for (let i = 0; i < 10; i++) await call('exec', { sandbox_id: base.id, cmd: 'true' });  // warm-up
for (let i = 0; i < runs; i++) {
  await timed(exec, () => call('exec', { sandbox_id: base.id, cmd: 'true' }));
  await timed(v1exec, async () => {
    const res = await fetch(`${v1.origin}/v1/sandboxes/${base.id}/exec`, {
      method: 'POST', headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ cmd: 'true' }),
    });
    if (res.status !== 200) throw new Error(`/v1 exec: ${res.status}`);
    await res.json();
  });
}
await call('run_code', { sandbox_id: code.id, code: '1+1' });
for (let i = 0; i < runs; i++)
  await timed(runCode, () => call('run_code', { sandbox_id: code.id, code: '1+1' }));
for (let i = 0; i < oneshots; i++) {
  await waitForPool();
  await timed(runPy, async () => {
    const s = await call('run', { language: 'python', code: '1+1' });
    if (s.results?.[0]?.text !== '2') throw new Error(`run gave ${JSON.stringify(s)}`);
  });
}
for (let i = 0; i < oneshots; i++)
  await timed(runCmd, () => call('run', { cmd: 'true' }));
await call('sandbox_kill', { sandbox_id: base.id });
await call('sandbox_kill', { sandbox_id: code.id });
await client.close();

console.log(`${'case'.padEnd(48)} ${'p50 ms'.padStart(8)} ${'p99 ms'.padStart(8)}`);
row('tools/call exec `true`', exec);
row('/v1 exec `true` (same sandbox, for comparison)', v1exec);
row('tools/call run_code `1+1`, warm context', runCode);
row('tools/call run python `1+1` (pool refilled)', runPy);
row('tools/call run cmd `true` (fresh base sandbox)', runCmd);
