// The E2B compatibility suite: the official npm `e2b` SDK, unmodified and
// configured only by E2B_API_URL / E2B_SANDBOX_URL / E2B_API_KEY, against a
// live hutchd (run.sh starts it). Every case runs for the pinned 2.51.x and
// for a pre-2.51 2.x release (which uses the v1 create/connect routes).
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
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

    test('getMetrics returns a sample', async () => {
      const m = await sbx.getMetrics();
      assert.ok(m.length >= 1);
      assert.ok(m[0].memUsed > 0);
      assert.ok(m[0].cpuCount >= 1);
    });
  });
}
