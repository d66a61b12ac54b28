// The MCP suite: the official TypeScript SDK client (npm
// `@modelcontextprotocol/sdk`), unmodified, against a live hutchd (run.sh)
// over both of hutch's transports: Streamable HTTP on `/mcp`, and the
// `hutch mcp` stdio bridge in the CLI. The same cases run over each; the
// HTTP-only ones (raw 401s, two sessions at once, a client that goes away
// mid-exec) follow. Needs HUTCH_MCP_URL (http://ADDR/mcp), HUTCH_MCP_KEY and
// HUTCH_CLI_BIN, and the code-interpreter template built in hutchd's state
// dir (run.sh sees to it).
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const MCP_URL = process.env.HUTCH_MCP_URL;
const KEY = process.env.HUTCH_MCP_KEY;
const CLI = process.env.HUTCH_CLI_BIN;
assert.ok(MCP_URL && KEY && CLI, 'HUTCH_MCP_URL, HUTCH_MCP_KEY and HUTCH_CLI_BIN are required');
const ORIGIN = new URL(MCP_URL).origin;

const TOOLS = [
  'run', 'sandbox_create', 'sandbox_list', 'sandbox_get', 'sandbox_kill', 'sandbox_pause',
  'sandbox_resume', 'sandbox_snapshot', 'sandbox_fork', 'exec', 'run_code', 'file_read',
  'file_write', 'file_list', 'file_remove', 'port_url', 'template_list',
];

// Sandbox starts and the first matplotlib import take longer than the
// SDK's 60 s default on a loaded 2-core machine.
const CALL_TIMEOUT_MS = 180_000;

function httpTransport(key = KEY) {
  return new StreamableHTTPClientTransport(new URL(MCP_URL), {
    requestInit: { headers: { Authorization: `Bearer ${key}` } },
  });
}

function stdioTransport() {
  // The SDK passes only a few safe variables on by default; a sanitizer
  // build of the CLI also wants its options.
  const env = { HUTCH_URL: ORIGIN, HUTCH_API_KEY: KEY, PATH: process.env.PATH };
  for (const k of ['ASAN_OPTIONS', 'UBSAN_OPTIONS', 'LSAN_OPTIONS']) {
    if (process.env[k] !== undefined) env[k] = process.env[k];
  }
  return new StdioClientTransport({ command: CLI, args: ['mcp'], env, stderr: 'inherit' });
}

async function connect(transport) {
  const client = new Client({ name: 'hutch-mcp-test', version: '1.0.0' });
  await client.connect(transport);
  return client;
}

function call(client, name, args, options = {}) {
  return client.callTool({ name, arguments: args }, undefined,
    { timeout: CALL_TIMEOUT_MS, ...options });
}

function textOf(result) {
  return (result.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

function assertOk(result, what) {
  assert.ok(!result.isError, `${what} failed: ${textOf(result)}`);
  assert.equal(typeof result.structuredContent, 'object', `${what}: structuredContent`);
  return result.structuredContent;
}

async function callOk(client, name, args, options) {
  return assertOk(await call(client, name, args, options), name);
}

// Removes what a suite made: sandboxes through the tool, snapshots (which
// outlive their sandbox and have no MCP tool to delete them) through /v1.
async function cleanUp(client, sandboxes, snapshots) {
  for (const id of sandboxes) {
    try {
      await call(client, 'sandbox_kill', { sandbox_id: id });
    } catch (e) {
      console.error(`cleanup: sandbox_kill ${id}: ${e}`);
    }
  }
  for (const id of snapshots) {
    const r = await fetch(`${ORIGIN}/v1/snapshots/${id}`, {
      method: 'DELETE', headers: { Authorization: `Bearer ${KEY}` },
    });
    if (r.status !== 204 && r.status !== 404) console.error(`cleanup: DELETE ${id}: ${r.status}`);
  }
}

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

for (const [kind, makeTransport] of [['Streamable HTTP', () => httpTransport()],
  ['stdio (hutch mcp)', stdioTransport]]) {
  describe(`MCP over ${kind}`, () => {
    let client;
    let sb; // a base sandbox for exec, files and port_url (baseSandbox())
    const sandboxes = new Set();
    const snapshots = new Set();

    async function create(args) {
      const s = await callOk(client, 'sandbox_create', args);
      if (typeof s.id === 'string') sandboxes.add(s.id);
      return s;
    }

    async function baseSandbox() {
      sb ??= (await create({ template: 'base', ttl_seconds: 600 })).id;
      return sb;
    }

    before(async () => {
      client = await connect(makeTransport());
    });
    after(async () => {
      if (client) {
        await cleanUp(client, sandboxes, snapshots);
        await client.close();
      }
    });

    test('initialize names the server and offers tools', () => {
      assert.ok(client.getServerVersion()?.name, 'serverInfo.name');
      assert.ok(client.getServerCapabilities()?.tools, 'tools capability');
    });

    test('tools/list gives exactly the tools, each with an object schema and a description', async () => {
      const tools = [];
      let cursor;
      do {
        const page = await client.listTools(cursor ? { cursor } : undefined);
        tools.push(...page.tools);
        cursor = page.nextCursor;
      } while (cursor);
      assert.deepEqual(tools.map((t) => t.name).sort(), [...TOOLS].sort());
      for (const t of tools) {
        assert.equal(t.inputSchema?.type, 'object', `${t.name}: inputSchema.type`);
        assert.ok(typeof t.description === 'string' && t.description.trim().length > 0,
          `${t.name}: description`);
      }
    });

    test('run: python code in a fresh sandbox', async () => {
      const r = await call(client, 'run', { language: 'python', code: 'print(6*7)' });
      assertOk(r, 'run python');
      assert.match(textOf(r), /42/);
    });

    test('run: bash code in a fresh sandbox', async () => {
      const r = await call(client, 'run', { language: 'bash', code: 'echo hi-$((1+2))' });
      assertOk(r, 'run bash');
      assert.match(textOf(r), /hi-3/);
    });

    test('run: a command gives its exit code and stdout', async () => {
      const s = await callOk(client, 'run', { cmd: 'echo from-cmd; exit 3' });
      assert.equal(s.exit_code, 3);
      assert.equal(s.stdout, 'from-cmd\n');
    });

    test('sandbox lifecycle: create, get, list, pause, resume, snapshot, fork, kill', async () => {
      const made = await create({ template: 'base', ttl_seconds: 600 });
      assert.equal(typeof made.id, 'string');
      assert.equal(made.status, 'running');
      const id = made.id;

      assert.equal((await callOk(client, 'sandbox_get', { sandbox_id: id })).id, id);

      const list = await callOk(client, 'sandbox_list', {});
      assert.ok(Array.isArray(list.sandboxes), 'sandboxes is an array');
      assert.ok(list.sandboxes.some((s) => s.id === id), `${id} listed`);

      assert.equal((await callOk(client, 'sandbox_pause', { sandbox_id: id })).status, 'paused');
      assert.equal((await callOk(client, 'sandbox_resume', { sandbox_id: id })).status, 'running');

      const snap = await callOk(client, 'sandbox_snapshot', { sandbox_id: id });
      assert.equal(typeof snap.id, 'string');
      snapshots.add(snap.id);

      const fork = await callOk(client, 'sandbox_fork', { sandbox_id: id, count: 1 });
      assert.ok(Array.isArray(fork.sandboxes), 'fork gives sandboxes');
      for (const c of fork.sandboxes) sandboxes.add(c.id);
      assert.equal(fork.sandboxes.length, 1);
      const child = fork.sandboxes[0].id;
      assert.notEqual(child, id);
      await callOk(client, 'sandbox_kill', { sandbox_id: child });
      sandboxes.delete(child);

      const killed = await callOk(client, 'sandbox_kill', { sandbox_id: id });
      assert.equal(killed.sandbox_id, id);
      assert.equal(killed.killed, true);
      sandboxes.delete(id);
      // hutch keeps a deleted sandbox's record for an hour as `stopped`
      // (docs/api.md); anything it is asked to do then is an error.
      const gone = await callOk(client, 'sandbox_get', { sandbox_id: id });
      assert.equal(gone.status, 'stopped', `get after kill: ${JSON.stringify(gone)}`);
      const dead = await call(client, 'exec', { sandbox_id: id, cmd: 'true' });
      assert.equal(dead.isError, true, `exec after kill: ${textOf(dead)}`);
      assert.equal(dead.structuredContent.error.code, 'sandbox_not_running');
    });

    test('exec gives stdout, stderr and the exit code apart', async () => {
      await baseSandbox();
      const s = await callOk(client, 'exec', {
        sandbox_id: sb, cmd: 'echo out; echo err >&2; exit 5',
      });
      assert.equal(s.stdout, 'out\n');
      assert.equal(s.stderr, 'err\n');
      assert.equal(s.exit_code, 5);
    });

    test('exec streams output as progress notifications before the result', async () => {
      await baseSandbox();
      const events = [];
      const r = await call(client, 'exec', {
        sandbox_id: sb, cmd: 'for i in 1 2 3; do echo line$i; sleep 0.3; done',
      }, { onprogress: (p) => events.push(p) });
      // The SDK drops a request's progress handler when its result arrives,
      // so whatever is in events came before the result.
      const s = assertOk(r, 'exec');
      assert.equal(s.stdout, 'line1\nline2\nline3\n');
      assert.ok(events.length >= 1, 'at least one progress notification');
      assert.match(events.map((e) => e.message ?? '').join(''), /line1/);
      for (const e of events) assert.equal(typeof e.progress, 'number');
    });

    test('files: text and binary round trips, list and remove', async () => {
      await baseSandbox();
      const w = await callOk(client, 'file_write',
        { sandbox_id: sb, path: '/tmp/a.txt', content: 'héllo\n' });
      assert.equal(w.size, Buffer.byteLength('héllo\n'));
      const rd = await callOk(client, 'file_read', { sandbox_id: sb, path: '/tmp/a.txt' });
      assert.equal(rd.content, 'héllo\n');
      assert.equal(rd.encoding, 'text');

      const bytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
      await callOk(client, 'file_write', {
        sandbox_id: sb, path: '/tmp/b.bin', content: bytes.toString('base64'), encoding: 'base64',
      });
      const rb = await callOk(client, 'file_read',
        { sandbox_id: sb, path: '/tmp/b.bin', encoding: 'base64' });
      assert.equal(rb.encoding, 'base64');
      assert.equal(rb.size, 256);
      assert.deepEqual(Buffer.from(rb.content, 'base64'), bytes);

      const names = async () => {
        const l = await callOk(client, 'file_list', { sandbox_id: sb, path: '/tmp' });
        assert.ok(Array.isArray(l.entries), 'entries is an array');
        return l.entries.map((e) => e.name);
      };
      assert.ok((await names()).includes('a.txt'), 'a.txt listed');
      const rm = await callOk(client, 'file_remove', { sandbox_id: sb, path: '/tmp/a.txt' });
      assert.equal(rm.removed, true);
      assert.ok(!(await names()).includes('a.txt'), 'a.txt gone');
    });

    test('port_url names the sandbox', async () => {
      await baseSandbox();
      const s = await callOk(client, 'port_url', { sandbox_id: sb, port: 8080 });
      assert.equal(typeof s.url, 'string');
      assert.ok(s.url.includes(sb), `${s.url} names ${sb}`);
    });

    test('template_list includes base', async () => {
      const s = await callOk(client, 'template_list', {});
      assert.ok(Array.isArray(s.templates), 'templates is an array');
      assert.ok(s.templates.some((t) => t.name === 'base'), 'base listed');
    });

    test('run_code keeps state and returns a matplotlib chart as image/png content', async () => {
      const ci = (await create({ template: 'code-interpreter', ttl_seconds: 600 })).id;
      await callOk(client, 'run_code', { sandbox_id: ci, code: 'x = 41' });
      const r = await call(client, 'run_code', { sandbox_id: ci, code: 'x + 1' });
      const s = assertOk(r, 'run_code');
      assert.match(textOf(r), /42/);
      assert.equal(s.error, null);

      const plot = await call(client, 'run_code', {
        sandbox_id: ci, code: 'import matplotlib.pyplot as plt\nplt.plot([1,2,3])\nplt.show()',
      });
      assertOk(plot, 'run_code plot');
      const img = plot.content.find((c) => c.type === 'image' && c.mimeType === 'image/png');
      assert.ok(img, `an image/png item in ${JSON.stringify(plot.content.map((c) => c.type))}`);
      const png = Buffer.from(img.data, 'base64');
      assert.deepEqual(png.subarray(0, 8), PNG_SIGNATURE);
    });

    test('an unknown sandbox is an isError result with the hutch code, not a protocol error', async () => {
      const r = await call(client, 'sandbox_get', { sandbox_id: 'sb_0000000000000000' });
      assert.equal(r.isError, true);
      // docs/api.md names this code sandbox_not_found; the MCP brief said
      // not_found. Either is hutch's own code.
      assert.match(r.structuredContent?.error?.code ?? '', /^(sandbox_)?not_found$/,
        JSON.stringify(r.structuredContent));
      assert.equal(typeof r.structuredContent.error.message, 'string');
      assert.ok(textOf(r).startsWith(`${r.structuredContent.error.code}: `), textOf(r));
    });
  });
}

describe('MCP over HTTP: authentication', () => {
  const initialize = JSON.stringify({
    jsonrpc: '2.0', id: 1, method: 'initialize',
    params: {
      protocolVersion: '2025-06-18', capabilities: {},
      clientInfo: { name: 'hutch-mcp-test', version: '1.0.0' },
    },
  });
  const post = (headers) => fetch(MCP_URL, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...headers },
    body: initialize,
  });

  test('no key is 401', async () => {
    const r = await post({});
    await r.arrayBuffer();
    assert.equal(r.status, 401);
  });

  test('a wrong key is 401', async () => {
    const r = await post({ Authorization: `Bearer hk_${'0'.repeat(40)}` });
    await r.arrayBuffer();
    assert.equal(r.status, 401);
  });

  test('the SDK client with a wrong key fails to connect', async () => {
    const client = new Client({ name: 'hutch-mcp-test', version: '1.0.0' });
    await assert.rejects(client.connect(httpTransport(`hk_${'0'.repeat(40)}`)));
    await client.close();
  });
});

describe('MCP over HTTP: sessions', () => {
  const clients = [];
  const owned = new Map(); // sandbox id -> the client that made it
  after(async () => {
    for (const [id, c] of owned) {
      try {
        await call(c, 'sandbox_kill', { sandbox_id: id });
      } catch (e) {
        console.error(`cleanup: sandbox_kill ${id}: ${e}`);
      }
    }
    for (const c of clients) await c.close();
  });

  async function newClient() {
    const transport = httpTransport();
    const c = await connect(transport);
    clients.push(c);
    return { client: c, transport };
  }
  async function sandboxFor(c) {
    const s = await callOk(c, 'sandbox_create', { template: 'base', ttl_seconds: 600 });
    owned.set(s.id, c);
    return s.id;
  }

  test('two clients at once each see only their own calls', async () => {
    const a = await newClient();
    const b = await newClient();
    assert.ok(a.transport.sessionId, 'A has a session id');
    assert.ok(b.transport.sessionId, 'B has a session id');
    assert.notEqual(a.transport.sessionId, b.transport.sessionId);

    const [sa, sbx] = await Promise.all([sandboxFor(a.client), sandboxFor(b.client)]);
    const progress = { a: [], b: [] };
    const cmd = (tag) => `for i in 1 2 3; do echo ${tag}-$i; sleep 0.2; done`;
    const [ra, rb] = await Promise.all([
      call(a.client, 'exec', { sandbox_id: sa, cmd: cmd('alpha') },
        { onprogress: (p) => progress.a.push(p.message ?? '') }),
      call(b.client, 'exec', { sandbox_id: sbx, cmd: cmd('bravo') },
        { onprogress: (p) => progress.b.push(p.message ?? '') }),
    ]);
    assert.equal(assertOk(ra, 'exec A').stdout, 'alpha-1\nalpha-2\nalpha-3\n');
    assert.equal(assertOk(rb, 'exec B').stdout, 'bravo-1\nbravo-2\nbravo-3\n');
    assert.doesNotMatch(progress.a.join(''), /bravo/);
    assert.doesNotMatch(progress.b.join(''), /alpha/);
  });

  test('a client that disconnects mid-exec ends the command in the sandbox', async () => {
    const observer = (await newClient()).client;
    const sb = await sandboxFor(observer);
    // Lists the sandbox's processes whose command line is the exec's (the
    // [0] keeps this listing's own command line from matching).
    const countCmd = 'for p in /proc/[0-9]*; do tr "\\0" " " < "$p/cmdline" 2>/dev/null; echo; done' +
      ' | grep -cE "^sleep 3[0]|sleep 3[0]; echo" || true';
    const running = async () =>
      Number((await callOk(observer, 'exec', { sandbox_id: sb, cmd: countCmd })).stdout.trim());

    const transport = httpTransport();
    const leaver = await connect(transport);
    const pending = call(leaver, 'exec',
      { sandbox_id: sb, cmd: 'sleep 30; echo done > /tmp/finished' }).then(
      (r) => ({ result: r }), (e) => ({ error: e }));

    // The command must have started, or its absence later proves nothing.
    let started = false;
    for (let i = 0; i < 50 && !started; i++) {
      started = (await running()) > 0;
      if (!started) await sleep(200);
    }
    assert.ok(started, 'the sleep started in the sandbox');
    await sleep(1000);
    await leaver.close(); // aborts the in-flight POST
    const outcome = await pending;
    assert.ok(outcome.error, `the dropped call did not complete: ${JSON.stringify(outcome.result)}`);

    let left = -1;
    for (let i = 0; i < 50; i++) {
      left = await running();
      if (left === 0) break;
      await sleep(200);
    }
    assert.equal(left, 0, 'the command was ended after the client went away');
    await sleep(2000);
    const f = await callOk(observer, 'exec',
      { sandbox_id: sb, cmd: 'test -e /tmp/finished && echo yes || echo no' });
    assert.equal(f.stdout, 'no\n');
  });
});
