// The E2B compatibility suite: the official npm `e2b` SDK, unmodified and
// configured only by E2B_API_URL / E2B_SANDBOX_URL / E2B_API_KEY, against a
// live hutchd (run.sh starts it). Every case runs for the pinned 2.51.x and
// for a pre-2.51 2.x release (which uses the v1 create/connect routes).
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import * as latest from 'e2b';
import * as pre251 from 'e2b-pre251';

const SDKS = [
  { name: 'e2b 2.51.0', sdk: latest },
  { name: 'e2b 2.50.0 (pre-2.51: v1 create/connect)', sdk: pre251 },
];

// Polls `pred` until it is truthy; fails with `what` after `ms`.
async function waitFor(pred, what, ms = 20000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await pred();
    if (v) return v;
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const sha256 = (buf) => createHash('sha256').update(buf).digest('hex');

// A GET sent to hutchd with `host` as its Host header, as a client whose
// DNS resolves the sandbox host names of getHost() to hutchd would send it.
function viaHost(host, path, headers) {
  const api = new URL(process.env.E2B_API_URL);
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: api.hostname, port: api.port, path, headers: { Host: host, ...headers } },
      (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString() }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

for (const { name, sdk } of SDKS) {
  const { Sandbox, CommandExitError } = sdk;

  describe(name, () => {
    let sbx;
    before(async () => {
      sbx = await Sandbox.create({ envs: { HUTCH_E2B: 'yes' }, metadata: { suite: 'main' } });
    });
    after(async () => {
      if (sbx) await sbx.kill();
    });

    test('commands.run echo hi: stdout and exit code 0, as user `user`', async () => {
      const r = await sbx.commands.run('echo hi');
      assert.equal(r.stdout, 'hi\n');
      assert.equal(r.exitCode, 0);
      const who = await sbx.commands.run('whoami; echo $HOME; echo $HUTCH_E2B; pwd');
      assert.equal(who.stdout, 'user\n/home/user\nyes\n/home/user\n');
      const root = await sbx.commands.run('whoami', { user: 'root' });
      assert.equal(root.stdout, 'root\n');
      // The base template carries what E2B's does for the SDK's own uses.
      const tools = await sbx.commands.run('python3 -c "print(6*7)" && git --version && curl --version | head -1');
      assert.match(tools.stdout, /^42\ngit version .*\ncurl /);
    });

    test('a failing command raises CommandExitError with its exit code and stderr', async () => {
      await assert.rejects(sbx.commands.run('echo oops >&2; exit 3'), (err) => {
        assert.ok(err instanceof CommandExitError, `got ${err}`);
        assert.equal(err.exitCode, 3);
        assert.equal(err.stderr, 'oops\n');
        return true;
      });
    });

    test('onStdout/onStderr stream while the command is still running', async () => {
      const out = [];
      const errs = [];
      // The command prints, then blocks on stdin: the output can only have
      // arrived while it runs.
      const h = await sbx.commands.run('echo ready; echo warn >&2; read x; echo done:$x', {
        background: true,
        stdin: true,
        onStdout: (d) => out.push(d),
        onStderr: (d) => errs.push(d),
      });
      await waitFor(() => out.join('').includes('ready') && errs.join('').includes('warn'), 'streamed output');
      await h.sendStdin('go\n');
      const r = await h.wait();
      assert.equal(r.stdout, 'ready\ndone:go\n');
      assert.equal(r.stderr, 'warn\n');
    });

    test('a command past timeoutMs is killed inside the sandbox', async () => {
      const marker = `t${randomBytes(4).toString('hex')}`;
      await assert.rejects(sbx.commands.run(`sleep 30; echo ${marker}`, { timeoutMs: 1500 }));
      await waitFor(async () => {
        const procs = await sbx.commands.list();
        return !procs.some((p) => (p.args ?? []).join(' ').includes(marker));
      }, 'the timed-out command to be gone');
    });

    test('background: sendStdin, list, disconnect + connect(pid), kill', async () => {
      const h = await sbx.commands.run('read line; echo got:$line', { background: true, stdin: true });
      assert.ok(h.pid > 0);
      const procs = await sbx.commands.list();
      const mine = procs.find((p) => p.pid === h.pid);
      assert.ok(mine, 'commands.list shows the background command');
      assert.equal(mine.cmd, '/bin/bash');
      await h.disconnect();
      const out = [];
      const again = await sbx.commands.connect(h.pid, { onStdout: (d) => out.push(d) });
      await sbx.commands.sendStdin(h.pid, 'hello\n');
      const r = await again.wait();
      assert.equal(r.exitCode, 0);
      assert.equal(out.join(''), 'got:hello\n');

      const sleeper = await sbx.commands.run('sleep 60', { background: true });
      assert.equal(await sbx.commands.kill(sleeper.pid), true);
      await assert.rejects(sleeper.wait(), (err) => err instanceof CommandExitError);
      assert.equal(await sbx.commands.kill(sleeper.pid), false, 'killing an ended command is false');
    });

    test('files: text and a 50 MB binary round trip (sha256)', async () => {
      await sbx.files.write('/home/user/hello.txt', 'hello e2b\n');
      assert.equal(await sbx.files.read('/home/user/hello.txt'), 'hello e2b\n');
      const cat = await sbx.commands.run('cat /home/user/hello.txt; stat -c %U /home/user/hello.txt');
      assert.equal(cat.stdout, 'hello e2b\nuser\n');

      const big = randomBytes(50 * 1024 * 1024);
      const info = await sbx.files.write('/home/user/big.bin', big);
      assert.equal(info.path, '/home/user/big.bin');
      const back = await sbx.files.read('/home/user/big.bin', { format: 'bytes' });
      assert.equal(back.length, big.length);
      assert.equal(sha256(back), sha256(big));
      const inside = await sbx.commands.run('sha256sum /home/user/big.bin');
      assert.equal(inside.stdout.split(' ')[0], sha256(big));
      await sbx.files.remove('/home/user/big.bin');

      // Several files in one multipart upload, relative paths from home.
      await sbx.files.write([
        { path: 'multi/a.txt', data: 'A' },
        { path: 'multi/b.txt', data: 'B' },
      ]);
      assert.equal(await sbx.files.read('/home/user/multi/b.txt'), 'B');
      // gzip both ways.
      await sbx.files.write('/home/user/gz.txt', 'zipped\n', { gzip: true });
      assert.equal(await sbx.files.read('/home/user/gz.txt', { gzip: true }), 'zipped\n');
    });

    test('files: list depth, exists, makeDir, rename, remove, getInfo', async () => {
      assert.equal(await sbx.files.makeDir('/home/user/tree/a/b'), true);
      assert.equal(await sbx.files.makeDir('/home/user/tree/a/b'), false, 'makeDir of an existing dir is false');
      await sbx.files.write('/home/user/tree/top.txt', '12345');
      await sbx.files.write('/home/user/tree/a/b/deep.txt', 'x');
      const one = (await sbx.files.list('/home/user/tree')).map((e) => e.name).sort();
      assert.deepEqual(one, ['a', 'top.txt']);
      const two = (await sbx.files.list('/home/user/tree', { depth: 2 })).map((e) => e.path).sort();
      assert.deepEqual(two, ['/home/user/tree/a', '/home/user/tree/a/b', '/home/user/tree/top.txt']);
      const three = await sbx.files.list('/home/user/tree', { depth: 3 });
      assert.ok(three.some((e) => e.path === '/home/user/tree/a/b/deep.txt'));

      assert.equal(await sbx.files.exists('/home/user/tree/top.txt'), true);
      assert.equal(await sbx.files.exists('/home/user/tree/nope.txt'), false);

      const info = await sbx.files.getInfo('/home/user/tree/top.txt');
      assert.equal(info.name, 'top.txt');
      assert.equal(info.type, 'file');
      assert.equal(info.size, 5);
      assert.equal(info.path, '/home/user/tree/top.txt');
      assert.ok(info.modifiedTime instanceof Date && !Number.isNaN(info.modifiedTime.getTime()));
      const dir = await sbx.files.getInfo('/home/user/tree/a');
      assert.equal(dir.type, 'dir');

      const moved = await sbx.files.rename('/home/user/tree/top.txt', '/home/user/tree/renamed.txt');
      assert.equal(moved.path, '/home/user/tree/renamed.txt');
      assert.equal(await sbx.files.exists('/home/user/tree/top.txt'), false);
      assert.equal(await sbx.files.read('/home/user/tree/renamed.txt'), '12345');

      await sbx.files.remove('/home/user/tree');
      assert.equal(await sbx.files.exists('/home/user/tree'), false);
      // As E2B's envd (Go's os.RemoveAll): a path that is not there is removed already.
      await sbx.files.remove('/home/user/tree');
      await sbx.files.remove('/home/user/no/such/dir');
      await assert.rejects(sbx.files.read('/home/user/tree/renamed.txt'), (err) => err instanceof sdk.NotFoundError);
    });

    test('watchDir reports a create and a write', async () => {
      await sbx.files.makeDir('/home/user/watched');
      const events = [];
      const handle = await sbx.files.watchDir('/home/user/watched', (e) => events.push(e));
      try {
        await sbx.files.write('/home/user/watched/new.txt', 'content');
        await waitFor(
          () =>
            events.some((e) => e.name === 'new.txt' && e.type === sdk.FilesystemEventType.CREATE) &&
            events.some((e) => e.name === 'new.txt' && e.type === sdk.FilesystemEventType.WRITE),
          'create and write events',
        );
      } finally {
        await handle.stop();
      }
    });

    test('pty: create, sendInput, resize, output', async () => {
      let output = '';
      const decoder = new TextDecoder();
      const term = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => (output += decoder.decode(d)) });
      await sbx.pty.sendInput(term.pid, new TextEncoder().encode('echo $((6*7))\n'));
      await waitFor(() => output.includes('42'), 'pty output 42');
      await sbx.pty.resize(term.pid, { cols: 100, rows: 30 });
      await sbx.pty.sendInput(term.pid, new TextEncoder().encode('stty size\n'));
      await waitFor(() => output.includes('30 100'), 'resized terminal');
      await sbx.pty.sendInput(term.pid, new TextEncoder().encode('exit\n'));
      const r = await term.wait();
      assert.equal(r.exitCode, 0);
      const other = await sbx.pty.create({ cols: 80, rows: 24, onData: () => {} });
      assert.equal(await sbx.pty.kill(other.pid), true);
      await assert.rejects(other.wait(), (err) => err instanceof CommandExitError);
    });

    test('Sandbox.list with a metadata filter and paging; getInfo; setTimeout', async () => {
      const suite = `list-${randomBytes(4).toString('hex')}`;
      const made = [];
      try {
        for (let i = 0; i < 3; i++) made.push(await Sandbox.create({ metadata: { suite, n: String(i) }, timeoutMs: 120_000 }));
        const pager = Sandbox.list({ query: { metadata: { suite } }, limit: 2 });
        const first = await pager.nextItems();
        assert.equal(first.length, 2);
        assert.equal(pager.hasNext, true);
        const second = await pager.nextItems();
        assert.equal(second.length, 1);
        assert.equal(pager.hasNext, false);
        const ids = [...first, ...second].map((s) => s.sandboxId).sort();
        assert.deepEqual(ids, made.map((s) => s.sandboxId).sort());
        assert.equal(first[0].metadata.suite, suite);
        assert.equal(first[0].state, 'running');

        const info = await made[0].getInfo();
        assert.equal(info.sandboxId, made[0].sandboxId);
        assert.equal(info.templateId, 'base');
        await made[0].setTimeout(3_600_000);
        const later = await made[0].getInfo();
        assert.ok(later.endAt.getTime() - Date.now() > 3_000_000, 'setTimeout moved endAt');
      } finally {
        for (const s of made) await s.kill();
      }
    });

    test('kill (false for an unknown id), connect to a running sandbox', async () => {
      const s = await Sandbox.create();
      const same = await Sandbox.connect(s.sandboxId);
      assert.equal((await same.commands.run('echo connected')).stdout, 'connected\n');
      assert.equal(await Sandbox.kill(s.sandboxId), true);
      assert.equal(await Sandbox.kill(s.sandboxId), false, 'a killed sandbox is gone');
      assert.equal(await Sandbox.kill('sb_doesnotexist'), false);
      await assert.rejects(Sandbox.connect('sb_doesnotexist'));
    });

    test('pause, then connect resumes with files intact', async () => {
      const s = await Sandbox.create();
      try {
        await s.files.write('/home/user/keep.txt', 'kept');
        assert.equal(await s.pause(), true);
        assert.equal(await s.pause(), false, 'pausing a paused sandbox is false');
        assert.equal((await s.getInfo()).state, 'paused');
        const back = await Sandbox.connect(s.sandboxId);
        assert.equal((await back.getInfo()).state, 'running');
        assert.equal(await back.files.read('/home/user/keep.txt'), 'kept');
        assert.equal((await back.commands.run('cat keep.txt')).stdout, 'kept');
      } finally {
        await Sandbox.kill(s.sandboxId);
      }
    });

    test('getHost(port): a server started in the sandbox answers at that host', async () => {
      await sbx.files.makeDir('/home/user/www');
      await sbx.files.write('/home/user/www/served.txt', 'served from the sandbox');
      const server = await sbx.commands.run('python3 -m http.server 8000 --bind 127.0.0.1', {
        background: true,
        cwd: '/home/user/www',
      });
      try {
        const host = sbx.getHost(8000);
        assert.equal(host, `8000-${sbx.sandboxId}.${sbx.sandboxDomain}`);
        // Where DNS would send {port}-{id}.{domain}: hutchd itself.
        const token = sbx.trafficAccessToken;
        const headers = token ? { 'e2b-traffic-access-token': token } : { 'X-Access-Token': sbx.envdAccessToken };
        const r = await waitFor(async () => {
          const res = await viaHost(host, '/served.txt', headers);
          return res.status === 502 ? null : res;
        }, 'the server in the sandbox');
        assert.equal(r.status, 200);
        assert.equal(r.body, 'served from the sandbox');
        assert.equal((await viaHost(host, '/served.txt', {})).status, 401, 'no token, no entry');
      } finally {
        await server.kill();
      }
    });

    test('getMetrics returns a sample', async () => {
      const m = await sbx.getMetrics();
      assert.ok(m.length >= 1);
      assert.ok(m[0].memUsed > 0);
      assert.ok(m[0].cpuCount >= 1);
    });
  });
}

// The wire itself, below the SDK: auth answers, envelopes, end-of-stream
// frames, keepalives and the server-side deadline kill.
describe('wire (raw HTTP)', () => {
  const api = process.env.E2B_API_URL;
  let sbx;
  before(async () => {
    sbx = await latest.Sandbox.create();
  });
  after(async () => {
    if (sbx) await sbx.kill();
  });

  const envdHeaders = (extra = {}) => ({
    'E2b-Sandbox-Id': sbx.sandboxId,
    'E2b-Sandbox-Port': '49983',
    'X-Access-Token': sbx.envdAccessToken,
    ...extra,
  });

  // Splits a Connect streaming body into [{flags, json}].
  function envelopes(buf) {
    const out = [];
    let i = 0;
    while (i + 5 <= buf.length) {
      const n = buf.readUInt32BE(i + 1);
      out.push({ flags: buf[i], json: JSON.parse(buf.subarray(i + 5, i + 5 + n).toString()) });
      i += 5 + n;
    }
    assert.equal(i, buf.length, 'no trailing bytes');
    return out;
  }
  function envelope(obj) {
    const body = Buffer.from(JSON.stringify(obj));
    const head = Buffer.alloc(5);
    head.writeUInt32BE(body.length, 1);
    return Buffer.concat([head, body]);
  }
  async function start(process, headers = {}) {
    const res = await fetch(`${api}/process.Process/Start`, {
      method: 'POST',
      headers: envdHeaders({ 'Content-Type': 'application/connect+json', 'Connect-Protocol-Version': '1', ...headers }),
      body: envelope({ process, stdin: false }),
    });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'application/connect+json');
    return envelopes(Buffer.from(await res.arrayBuffer()));
  }

  test('control plane: key forms and E2B error bodies', async () => {
    const none = await fetch(`${api}/v2/sandboxes`);
    assert.equal(none.status, 401);
    assert.equal((await none.json()).code, 401);
    const wrong = await fetch(`${api}/v2/sandboxes`, { headers: { 'X-API-Key': 'e2b_00' } });
    assert.equal(wrong.status, 401);
    const raw = await fetch(`${api}/v2/sandboxes`, { headers: { 'X-API-Key': process.env.HUTCH_E2B_RAW_KEY } });
    assert.equal(raw.status, 200);
    const missing = await fetch(`${api}/sandboxes/sb_nope`, { headers: { 'X-API-Key': process.env.E2B_API_KEY } });
    assert.equal(missing.status, 404);
    assert.deepEqual(Object.keys(await missing.json()).sort(), ['code', 'message']);
    // A memory snapshot (the SDK's mode "full"): hutch keeps files only.
    const unsupported = await fetch(`${api}/sandboxes/${sbx.sandboxId}/snapshots`, {
      method: 'POST',
      headers: { 'X-API-Key': process.env.E2B_API_KEY, 'Content-Type': 'application/json' },
      body: JSON.stringify({ memory: true }),
    });
    assert.equal(unsupported.status, 501);
    assert.deepEqual(Object.keys(await unsupported.json()).sort(), ['code', 'message']);
  });

  test('control plane: the sandbox logs, both API versions', async () => {
    const key = { 'X-API-Key': process.env.E2B_API_KEY };
    await sbx.commands.run('echo for-the-logs; exit 0');
    const v1 = await fetch(`${api}/sandboxes/${sbx.sandboxId}/logs?start=0&limit=1000`, { headers: key });
    assert.equal(v1.status, 200);
    const body = await v1.json();
    assert.deepEqual(Object.keys(body).sort(), ['logEntries', 'logs']);
    assert.equal(body.logs.length, body.logEntries.length);
    for (const l of body.logs) assert.deepEqual(Object.keys(l).sort(), ['line', 'timestamp']);
    for (const e of body.logEntries) {
      assert.deepEqual(Object.keys(e).sort(), ['fields', 'level', 'message', 'timestamp']);
      assert.ok(!Number.isNaN(Date.parse(e.timestamp)));
      for (const v of Object.values(e.fields)) assert.equal(typeof v, 'string');
    }
    assert.equal(body.logEntries[0].fields.type, 'created');
    // The command ran as a background process: its start is logged at once.
    assert.ok(body.logEntries.some((e) => e.fields.type === 'process_started' && e.message.includes('for-the-logs')));
    const v2 = await fetch(`${api}/v2/sandboxes/${sbx.sandboxId}/logs?direction=backward&limit=1&level=info`, { headers: key });
    assert.equal(v2.status, 200);
    const newest = await v2.json();
    assert.equal(newest.logs.length, 1);
    // The newest: the command's exit, logged when its stream saw it.
    assert.equal(newest.logs[0].fields.type, 'process_exited');
    assert.equal(newest.logs[0].fields.exit_code, '0');
    assert.ok(newest.logs[0].message.includes('for-the-logs'));
    const gone = await fetch(`${api}/v2/sandboxes/sb_nope/logs`, { headers: key });
    assert.equal(gone.status, 404);
  });

  test('envd: health, access token, codec and method errors', async () => {
    const health = await fetch(`${api}/health`, { headers: envdHeaders({ 'X-Access-Token': '' }) });
    assert.equal(health.status, 204);
    const bad = await fetch(`${api}/process.Process/List`, {
      method: 'POST',
      headers: envdHeaders({ 'Content-Type': 'application/json', 'X-Access-Token': 'wrong' }),
      body: '{}',
    });
    assert.equal(bad.status, 401);
    assert.equal((await bad.json()).code, 'unauthenticated');
    const proto = await fetch(`${api}/process.Process/List`, {
      method: 'POST',
      headers: envdHeaders({ 'Content-Type': 'application/proto' }),
      body: '',
    });
    assert.equal(proto.status, 200, 'the binary protobuf codec is served too');
    assert.equal(proto.headers.get('content-type'), 'application/proto');
    const xml = await fetch(`${api}/process.Process/List`, {
      method: 'POST',
      headers: envdHeaders({ 'Content-Type': 'application/xml' }),
      body: '',
    });
    assert.equal(xml.status, 415);
    const unknown = await fetch(`${api}/process.Process/Nope`, {
      method: 'POST',
      headers: envdHeaders({ 'Content-Type': 'application/json' }),
      body: '{}',
    });
    assert.equal(unknown.status, 501);
    assert.equal((await unknown.json()).code, 'unimplemented');
    const gone = await fetch(`${api}/process.Process/List`, {
      method: 'POST',
      headers: envdHeaders({ 'Content-Type': 'application/json', 'E2b-Sandbox-Id': 'sb_nope' }),
      body: '{}',
    });
    assert.equal(gone.status, 502);
  });

  test('envd: a stream is start, data, end (proto3 JSON), then the end-of-stream frame', async () => {
    const frames = await start({ cmd: '/bin/sh', args: ['-c', 'printf hi; printf oops >&2'] });
    assert.ok(frames[0].json.event.start.pid > 0);
    const data = frames.filter((f) => f.json.event?.data);
    const stdout = data.filter((f) => f.json.event.data.stdout).map((f) => Buffer.from(f.json.event.data.stdout, 'base64'));
    const stderr = data.filter((f) => f.json.event.data.stderr).map((f) => Buffer.from(f.json.event.data.stderr, 'base64'));
    assert.equal(Buffer.concat(stdout).toString(), 'hi');
    assert.equal(Buffer.concat(stderr).toString(), 'oops');
    const end = frames[frames.length - 2];
    assert.deepEqual(end.json, { event: { end: { exited: true, status: 'exit status 0' } } }, 'a zero exit code is omitted');
    assert.deepEqual(frames[frames.length - 1], { flags: 2, json: {} });
    const failed = await start({ cmd: '/bin/sh', args: ['-c', 'exit 7'] });
    assert.equal(failed[failed.length - 2].json.event.end.exitCode, 7);
  });

  test('envd: errors end a stream with an error frame', async () => {
    const frames = await start({ cmd: '/bin/sh', args: ['-c', 'true'], cwd: '/does/not/exist' });
    const last = frames[frames.length - 1];
    assert.equal(last.flags, 2);
    assert.ok(last.json.error.code, 'an error code by name');
  });

  test('envd: CreateWatcher / GetWatcherEvents / RemoveWatcher (the Python SDK\'s watchers)', async () => {
    const call = async (method, body) => {
      const res = await fetch(`${api}/filesystem.Filesystem/${method}`, {
        method: 'POST',
        headers: envdHeaders({ 'Content-Type': 'application/json' }),
        body: JSON.stringify(body),
      });
      return { status: res.status, json: await res.json() };
    };
    await sbx.files.makeDir('/home/user/pw');
    const created = await call('CreateWatcher', { path: '/home/user/pw', recursive: false });
    assert.equal(created.status, 200);
    const watcherId = created.json.watcherId;
    assert.ok(watcherId);
    await sbx.files.write('/home/user/pw/f.txt', 'x');
    const got = await call('GetWatcherEvents', { watcherId });
    assert.deepEqual(got.json.events, [
      { name: 'f.txt', type: 'EVENT_TYPE_CREATE' },
      { name: 'f.txt', type: 'EVENT_TYPE_WRITE' },
    ]);
    assert.deepEqual((await call('GetWatcherEvents', { watcherId })).json, {}, 'nothing new: an empty message');
    assert.equal((await call('RemoveWatcher', { watcherId })).status, 200);
    const after = await call('GetWatcherEvents', { watcherId });
    assert.equal(after.status, 404);
    assert.equal(after.json.code, 'not_found');
  });

  test('envd: keepalive events at the asked interval', async () => {
    const frames = await start({ cmd: '/bin/sh', args: ['-c', 'sleep 2.5'] }, { 'Keepalive-Ping-Interval': '1' });
    assert.ok(frames.some((f) => f.json.event?.keepalive), 'a keepalive event');
  });

  test('envd: Connect-Timeout-Ms kills the process and ends the stream with deadline_exceeded', async () => {
    const frames = await start({ cmd: '/bin/sh', args: ['-c', 'sleep 5; echo survived'] }, { 'Connect-Timeout-Ms': '1000' });
    assert.ok(!frames.some((f) => f.json.event?.data), 'no output: it never got to echo');
    assert.ok(!frames.some((f) => f.json.event?.end), 'no end event: the call is past its deadline');
    const last = frames[frames.length - 1];
    assert.equal(last.flags, 2);
    assert.equal(last.json.error.code, 'deadline_exceeded');
  });
});
