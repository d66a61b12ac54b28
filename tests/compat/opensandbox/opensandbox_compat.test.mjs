// The OpenSandbox compatibility suite: the official npm
// `@alibaba-group/opensandbox` SDK, unmodified and configured only by
// OPEN_SANDBOX_DOMAIN (<addr>/opensandbox) and OPEN_SANDBOX_API_KEY,
// against a live hutchd (run.sh starts it). execd and the egress sidecar
// are reached through the server-proxy endpoints hutch hands out.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { Sandbox, SandboxManager } from '@alibaba-group/opensandbox';

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
const stdout = (ex) => ex.logs.stdout.map((m) => m.text);
const stderr = (ex) => ex.logs.stderr.map((m) => m.text);
// A suite-unique metadata value, so list filters see only this run's sandboxes.
const RUN = randomBytes(6).toString('hex');
// The outside world run.sh built for the egress tests (hutch-test-world):
// {allowed, denied: addresses; allowed.test and denied.test resolve to
// them through its DNS}, or null when it could not be built.
const WORLD = process.env.HUTCH_WORLD ? JSON.parse(process.env.HUTCH_WORLD) : null;
const NO_WORLD = WORLD ? false : 'no test network world (run.sh needs root and hutch-test-world)';

// What an HTTP GET from inside the sandbox gets: the page's first line or
// "FAIL <why>" (python3 comes with the base template).
async function fetchInside(sb, url) {
  const py = `import urllib.request\ntry:\n print(urllib.request.urlopen('${url}',timeout=4).read().decode().strip())\nexcept Exception as e:\n print('FAIL',type(e).__name__)`;
  const ex = await sb.commands.run(`python3 -c "${py}"`);
  return stdout(ex).join('\n');
}

describe('OpenSandbox SDK 0.1.11 against hutch', () => {
  let sbx;
  before(async () => {
    // ubuntu:24.04 is in hutch's default image table (-> template base).
    sbx = await Sandbox.create({ image: 'ubuntu:24.04', metadata: { suite: RUN, role: 'main' }, timeoutSeconds: 600 });
  });
  after(async () => {
    if (sbx) await sbx.kill().catch(() => {});
  });

  test('commands.run echo Hello: stdout Hello, exit code 0', async () => {
    const ex = await sbx.commands.run('echo Hello');
    assert.deepEqual(stdout(ex), ['Hello']);
    assert.equal(ex.exitCode, 0);
    assert.ok(ex.complete, 'execution_complete arrived');
    assert.ok(ex.id, 'the init event named the command');
  });

  test('a failing command reports its exit code and stderr', async () => {
    const ex = await sbx.commands.run('echo oops >&2; exit 3');
    assert.equal(ex.exitCode, 3);
    assert.deepEqual(stderr(ex), ['oops']);
    assert.equal(ex.error.value, '3');
  });

  test('options: working directory and envs', async () => {
    const ex = await sbx.commands.run('pwd; echo $GREETING', { workingDirectory: '/tmp', envs: { GREETING: 'hi' } });
    assert.deepEqual(stdout(ex), ['/tmp', 'hi']);
  });

  test('streaming handlers receive lines as they are produced', async () => {
    const seen = [];
    let firstAt = 0;
    const ex = await sbx.commands.run('for i in 1 2 3; do echo line$i; sleep 0.3; done', undefined, {
      onStdout: (m) => {
        if (!firstAt) firstAt = Date.now();
        seen.push(m.text);
      },
    });
    assert.deepEqual(seen, ['line1', 'line2', 'line3']);
    assert.equal(ex.exitCode, 0);
    // The first line reached the handler before the command was over.
    assert.ok(ex.complete.timestamp >= firstAt);
  });

  test('a background command: status, logs with a cursor, interrupt', async () => {
    const ex = await sbx.commands.run('echo bg-start; sleep 60; echo never', { background: true });
    assert.ok(ex.id, 'background run returns the command id');
    const st = await sbx.commands.getCommandStatus(ex.id);
    assert.equal(st.id, ex.id);
    assert.equal(st.running, true);
    const logs = await waitFor(async () => {
      const l = await sbx.commands.getBackgroundCommandLogs(ex.id);
      return l.content.includes('bg-start') ? l : null;
    }, 'background output');
    assert.equal(logs.content, 'bg-start\n');
    assert.equal(logs.cursor, 'bg-start\n'.length);
    const more = await sbx.commands.getBackgroundCommandLogs(ex.id, logs.cursor);
    assert.equal(more.content, '');
    await sbx.commands.interrupt(ex.id);
    const done = await waitFor(async () => {
      const s = await sbx.commands.getCommandStatus(ex.id);
      return s.running ? null : s;
    }, 'interrupted command to end');
    assert.equal(done.running, false);
    assert.notEqual(done.exitCode, 0);
    assert.ok(done.finishedAt instanceof Date);
  });

  test('sessions: cd and export persist between runs', async () => {
    const sid = await sbx.commands.createSession();
    assert.ok(sid);
    const first = await sbx.commands.runInSession(sid, 'cd /tmp; export X=1');
    assert.equal(first.exitCode, 0);
    const second = await sbx.commands.runInSession(sid, 'echo $X; pwd');
    assert.deepEqual(stdout(second), ['1', '/tmp']);
    assert.equal(second.exitCode, 0);
    // Output without a final newline, stderr, and a failing status.
    const third = await sbx.commands.runInSession(sid, 'printf abc; echo err >&2; false');
    assert.deepEqual(stdout(third), ['abc']);
    assert.deepEqual(stderr(third), ['err']);
    assert.equal(third.exitCode, 1);
    // A session created in a directory starts there.
    const other = await sbx.commands.createSession({ workingDirectory: '/usr' });
    assert.deepEqual(stdout(await sbx.commands.runInSession(other, 'pwd')), ['/usr']);
    await sbx.commands.deleteSession(other);
    await assert.rejects(sbx.commands.runInSession(other, 'pwd'));
    await sbx.commands.deleteSession(sid);
  });

  test('files: text upload/download, Range, info with mode as octal digits', async () => {
    await sbx.files.writeFiles([{ path: '/tmp/osb/hello.txt', data: 'hello world\n', mode: 644 }]);
    assert.equal(await sbx.files.readFile('/tmp/osb/hello.txt'), 'hello world\n');
    assert.equal(await sbx.files.readFile('/tmp/osb/hello.txt', { range: 'bytes=6-10' }), 'world');
    const info = await sbx.files.getFileInfo(['/tmp/osb/hello.txt', '/tmp/osb']);
    const f = info['/tmp/osb/hello.txt'];
    assert.equal(f.type, 'file');
    assert.equal(f.size, 12);
    assert.equal(f.mode, 644);
    assert.equal(f.owner, 'root');
    assert.equal(f.group, 'root');
    assert.ok(f.modifiedAt instanceof Date);
    assert.equal(info['/tmp/osb'].type, 'directory');
  });

  test('files: a 20 MB binary round-trips with equal sha256', async () => {
    const data = randomBytes(20 << 20);
    await sbx.files.writeFiles([{ path: '/tmp/osb/blob.bin', data: new Uint8Array(data) }]);
    const back = await sbx.files.readBytes('/tmp/osb/blob.bin');
    assert.equal(back.length, data.length);
    assert.equal(sha256(back), sha256(data));
    const inside = await sbx.commands.run('sha256sum /tmp/osb/blob.bin');
    assert.equal(stdout(inside)[0].split(' ')[0], sha256(data));
    // A streamed upload (async iterable) takes the SDK's other path.
    async function* chunks() {
      for (let off = 0; off < data.length; off += 1 << 20) yield new Uint8Array(data.subarray(off, off + (1 << 20)));
    }
    await sbx.files.writeFiles([{ path: '/tmp/osb/blob2.bin', data: chunks() }]);
    let n = 0;
    const h = createHash('sha256');
    for await (const c of sbx.files.readBytesStream('/tmp/osb/blob2.bin')) {
      h.update(c);
      n += c.length;
    }
    assert.equal(n, data.length);
    assert.equal(h.digest('hex'), sha256(data));
  });

  test('files: mkdir, list with depth, search, mv, permissions, replace, delete', async () => {
    await sbx.files.createDirectories([{ path: '/tmp/tree/sub', mode: 700 }]);
    await sbx.files.writeFiles([
      { path: '/tmp/tree/a.txt', data: 'host=localhost port=1 localhost\n' },
      { path: '/tmp/tree/sub/b.txt', data: 'b' },
      { path: '/tmp/tree/sub/c.log', data: 'c' },
    ]);
    const info = await sbx.files.getFileInfo(['/tmp/tree/sub']);
    assert.equal(info['/tmp/tree/sub'].mode, 700);

    const top = await sbx.files.listDirectory({ path: '/tmp/tree', depth: 1 });
    assert.deepEqual(top.map((e) => e.path).sort(), ['/tmp/tree/a.txt', '/tmp/tree/sub']);
    const deep = await sbx.files.listDirectory({ path: '/tmp/tree', depth: 2 });
    assert.equal(deep.length, 4);

    const txt = await sbx.files.search({ path: '/tmp/tree', pattern: '*.txt' });
    assert.deepEqual(txt.map((e) => e.path).sort(), ['/tmp/tree/a.txt', '/tmp/tree/sub/b.txt']);
    const all = await sbx.files.search({ path: '/tmp/tree' });
    assert.equal(all.length, 3);

    await sbx.files.moveFiles([{ src: '/tmp/tree/sub/c.log', dest: '/tmp/tree/moved/c.log' }]);
    assert.equal(await sbx.files.readFile('/tmp/tree/moved/c.log'), 'c');
    await assert.rejects(sbx.files.getFileInfo(['/tmp/tree/sub/c.log']));

    await sbx.files.setPermissions([{ path: '/tmp/tree/a.txt', mode: 755 }]);
    assert.equal((await sbx.files.getFileInfo(['/tmp/tree/a.txt']))['/tmp/tree/a.txt'].mode, 755);
    const perms = await sbx.commands.run("stat -c '%a %U' /tmp/tree/a.txt");
    assert.deepEqual(stdout(perms), ['755 root']);

    await sbx.files.replaceContents([{ path: '/tmp/tree/a.txt', oldContent: 'localhost', newContent: '0.0.0.0' }]);
    assert.equal(await sbx.files.readFile('/tmp/tree/a.txt'), 'host=0.0.0.0 port=1 0.0.0.0\n');
    assert.equal((await sbx.files.getFileInfo(['/tmp/tree/a.txt']))['/tmp/tree/a.txt'].mode, 755);
    const counts = await sbx.files.replaceContentsDetailed([
      { path: '/tmp/tree/a.txt', oldContent: '0.0.0.0', newContent: 'h' },
    ]);
    assert.deepEqual(counts, [{ path: '/tmp/tree/a.txt', replacedCount: 2 }]);

    await sbx.files.deleteFiles(['/tmp/tree/a.txt']);
    await assert.rejects(sbx.files.getFileInfo(['/tmp/tree/a.txt']));
    await sbx.files.deleteDirectories(['/tmp/tree']);
    await assert.rejects(sbx.files.listDirectory({ path: '/tmp/tree' }));
  });

  test('files: a path escaping through .. stays inside the sandbox', async () => {
    await sbx.files.writeFiles([{ path: '/../../tmp/escape.txt', data: 'inside' }]);
    const ex = await sbx.commands.run('cat /tmp/escape.txt');
    assert.deepEqual(stdout(ex), ['inside']);
  });

  test('metrics from the sandbox cgroup', async () => {
    const m = await sbx.getMetrics();
    assert.ok(m.cpuCount > 0);
    assert.ok(m.memoryTotalMiB > 0);
    assert.ok(m.memoryUsedMiB > 0 && m.memoryUsedMiB <= m.memoryTotalMiB);
    assert.ok(m.cpuUsedPercentage >= 0 && m.cpuUsedPercentage <= 100);
    assert.ok(m.timestamp > 0);
  });

  test('egress: without a networkPolicy, OpenSandbox\'s default (unrestricted) reads back', async () => {
    const p = await sbx.getEgressPolicy();
    // allow when this hutchd has networking (it has whenever run.sh built
    // the test world), deny (loopback only) on a hutchd without.
    assert.equal(p.defaultAction, WORLD ? 'allow' : p.defaultAction);
    assert.deepEqual(p.egress, []);
  });

  test('getInfo, renew', async () => {
    const info = await sbx.getInfo();
    assert.equal(info.id, sbx.id);
    assert.equal(info.status.state, 'Running');
    assert.equal(info.metadata.suite, RUN);
    assert.ok(info.createdAt instanceof Date);
    const before = info.expiresAt.getTime();
    const r = await sbx.renew(1800);
    const after = new Date(r.expiresAt).getTime();
    assert.ok(after > before, `renewed expiry ${r.expiresAt} is later`);
    assert.equal((await sbx.getInfo()).expiresAt.getTime(), after);
  });

  test('SandboxManager lists with a metadata filter', async () => {
    const other = await Sandbox.create({ image: 'python:3.12', metadata: { suite: RUN, role: 'other' } });
    const mgr = SandboxManager.create();
    try {
      const mine = await mgr.listSandboxInfos({ metadata: { suite: RUN } });
      assert.deepEqual(mine.items.map((s) => s.id).sort(), [sbx.id, other.id].sort());
      const main = await mgr.listSandboxInfos({ metadata: { suite: RUN, role: 'main' } });
      assert.deepEqual(main.items.map((s) => s.id), [sbx.id]);
      const none = await mgr.listSandboxInfos({ metadata: { suite: 'no-such-' + RUN } });
      assert.equal(none.items.length, 0);
      await mgr.killSandbox(other.id);
      const left = await mgr.listSandboxInfos({ metadata: { suite: RUN }, states: ['Running'] });
      assert.deepEqual(left.items.map((s) => s.id), [sbx.id]);
    } finally {
      await other.kill().catch(() => {});
      await mgr.close();
    }
  });

  test('pause and resume keep the sandbox and its files', async () => {
    await sbx.files.writeFiles([{ path: '/tmp/keep.txt', data: 'kept' }]);
    await sbx.pause();
    assert.equal((await sbx.getInfo()).status.state, 'Paused');
    const back = await sbx.resume();
    assert.equal((await back.getInfo()).status.state, 'Running');
    assert.equal(await back.files.readFile('/tmp/keep.txt'), 'kept');
    assert.deepEqual(stdout(await back.commands.run('echo back')), ['back']);
  });

  test('an unknown image is a clear error naming the mapping to configure', async () => {
    await assert.rejects(Sandbox.create({ image: 'no-such/image:1' }), (err) => {
      assert.match(String(err.message), /--opensandbox-images/);
      return true;
    });
  });

  test('kill: the sandbox is gone', async () => {
    const victim = await Sandbox.create({ image: 'ubuntu:24.04', metadata: { suite: RUN, role: 'victim' } });
    await victim.kill();
    await assert.rejects(victim.getInfo());
  });
});

// Egress policy through the SDK, against the test-built outside world
// (allowed.test and denied.test in a namespace run.sh created; nothing else
// is ever contacted).
describe('OpenSandbox SDK 0.1.11 egress against hutch', { skip: NO_WORLD }, () => {
  test('no networkPolicy: the sandbox reaches both test servers', async () => {
    const sb = await Sandbox.create({ image: 'ubuntu:24.04', metadata: { suite: RUN, role: 'open' } });
    try {
      assert.deepEqual(await sb.getEgressPolicy(), { defaultAction: 'allow', egress: [] });
      assert.equal(await fetchInside(sb, 'http://allowed.test:8080/'), 'allowed-server');
      assert.equal(await fetchInside(sb, 'http://denied.test:8080/'), 'denied-server');
    } finally {
      await sb.kill().catch(() => {});
    }
  });

  test('networkPolicy at create is enforced; patchEgressRules opens a host at once; deleteEgressRules closes it', async () => {
    const sb = await Sandbox.create({
      image: 'ubuntu:24.04',
      metadata: { suite: RUN, role: 'egress' },
      networkPolicy: { defaultAction: 'deny', egress: [{ action: 'deny', target: '*.blocked.test' }] },
    });
    try {
      assert.deepEqual(await sb.getEgressPolicy(), {
        defaultAction: 'deny',
        egress: [{ action: 'deny', target: '*.blocked.test' }],
      });
      // Denied by default: the names do not resolve, the addresses do not answer.
      assert.match(await fetchInside(sb, 'http://allowed.test:8080/'), /^FAIL/);
      assert.match(await fetchInside(sb, `http://${WORLD.allowed}:8080/`), /^FAIL/);

      await sb.patchEgressRules([{ action: 'allow', target: 'allowed.test' }]);
      const p = await sb.getEgressPolicy();
      assert.equal(p.defaultAction, 'deny');
      assert.deepEqual(p.egress, [
        { action: 'deny', target: '*.blocked.test' },
        { action: 'allow', target: 'allowed.test' },
      ]);
      // The same sandbox, no restart: the allowed host answers, the other
      // one still neither resolves nor answers by address.
      assert.equal(await fetchInside(sb, 'http://allowed.test:8080/'), 'allowed-server');
      assert.match(await fetchInside(sb, 'http://denied.test:8080/'), /^FAIL/);
      assert.match(await fetchInside(sb, `http://${WORLD.denied}:8080/`), /^FAIL/);

      // An incoming rule replaces the rule for its target (and comes first).
      await sb.patchEgressRules([{ action: 'deny', target: 'allowed.test' }]);
      assert.deepEqual((await sb.getEgressPolicy()).egress, [
        { action: 'deny', target: 'allowed.test' },
        { action: 'deny', target: '*.blocked.test' },
      ]);
      assert.match(await fetchInside(sb, 'http://allowed.test:8080/'), /^FAIL/);

      await sb.patchEgressRules([{ action: 'allow', target: WORLD.denied }]);
      assert.equal(await fetchInside(sb, `http://${WORLD.denied}:8080/`), 'denied-server');
      await sb.deleteEgressRules([WORLD.denied, 'allowed.test', 'not-there.test']);
      assert.deepEqual(await sb.getEgressPolicy(), {
        defaultAction: 'deny',
        egress: [{ action: 'deny', target: '*.blocked.test' }],
      });
      assert.match(await fetchInside(sb, `http://${WORLD.denied}:8080/`), /^FAIL/);
    } finally {
      await sb.kill().catch(() => {});
    }
  });

  test('bad egress input is a 400 with a stable code, and changes nothing', async () => {
    const sb = await Sandbox.create({
      image: 'ubuntu:24.04',
      metadata: { suite: RUN, role: 'egress-bad' },
      networkPolicy: { defaultAction: 'deny', egress: [{ action: 'allow', target: 'allowed.test' }] },
    });
    try {
      const bad = (err) => {
        assert.equal(err.statusCode, 400);
        assert.equal(err.error.code, 'HUTCH::INVALID_REQUEST');
        return true;
      };
      await assert.rejects(sb.patchEgressRules([{ action: 'permit', target: 'denied.test' }]), bad);
      await assert.rejects(sb.patchEgressRules([{ action: 'allow', target: '*.test' }]), bad);
      await assert.rejects(sb.deleteEgressRules(['bad..name']), bad);
      assert.deepEqual(await sb.getEgressPolicy(), {
        defaultAction: 'deny',
        egress: [{ action: 'allow', target: 'allowed.test' }],
      });
      assert.equal(await fetchInside(sb, 'http://allowed.test:8080/'), 'allowed-server');
    } finally {
      await sb.kill().catch(() => {});
    }
    await assert.rejects(
      Sandbox.create({ image: 'ubuntu:24.04', networkPolicy: { egress: [{ action: 'allow', target: '::1' }] } }),
      (err) => {
        assert.match(String(err.message), /IPv6/);
        return true;
      },
    );
  });
});
