// E2B's template builder against hutch (issue 31 item 3): the official npm
// `e2b` SDK, unmodified and configured only by E2B_API_URL / E2B_API_KEY,
// builds templates with Template().fromImage(...)/fromTemplate(...) and
// ordered steps (setEnvs, setWorkdir, copy, runCmd, setUser,
// setStartCmd/setReadyCmd), streams the build log, answers
// Template.exists, tags builds, and Sandbox.create(name) runs what was
// built. run_template.sh starts hutchd and the loopback registry serving
// HUTCH_TEST_IMAGE (user `app`, workdir /home/app, GREETING=hello; only
// sh, cat, id, env, ls and stat inside: the steps need no more).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Template, Sandbox, BuildError, waitForFile, waitForTimeout } from 'e2b';

const IMAGE = process.env.HUTCH_TEST_IMAGE;
let ctx;

before(() => {
  // The build context `copy` reads from (fileContextPath).
  ctx = mkdtempSync(join(tmpdir(), 'hutch-e2b-ctx-'));
  writeFileSync(join(ctx, 'hello.txt'), 'hello from the context\n');
  mkdirSync(join(ctx, 'data', 'nested'), { recursive: true });
  writeFileSync(join(ctx, 'data', 'a.txt'), 'A\n');
  writeFileSync(join(ctx, 'data', 'nested', 'b.txt'), 'B\n');
  writeFileSync(join(ctx, 'run.sh'), 'echo run-script\n');
  mkdirSync(join(ctx, 'folder'));
  for (const n of ['one.txt', 'two.txt', 'skip.md'])
    writeFileSync(join(ctx, 'folder', n), `${n}\n`);
});
after(() => rmSync(ctx, { recursive: true, force: true }));

test('Template.build from a registry image: ordered steps, log, exists, Sandbox.create', async () => {
  const template = Template({ fileContextPath: ctx })
    .fromImage(IMAGE)
    .setEnvs({ STAGE: 'built', GREETING: 'overridden' })
    .setWorkdir('/home/app/work')
    .copy('hello.txt', './')
    .copy('data', 'data/')
    .copy('run.sh', '/opt/run.sh', { mode: 0o755 })
    .runCmd('echo "$STAGE:$GREETING" > stage.txt; pwd >> stage.txt; echo step-output-line')
    .setUser('root')
    .runCmd('id -u > /home/app/work/as-root.txt')
    .setUser('app')
    .runCmd('id -un > whoami.txt')
    .setStartCmd('echo up > /tmp/up', waitForFile('/tmp/up'));

  const logs = [];
  const info = await Template.build(template, 'sdk-img:v1', {
    onBuildLogs: (entry) => logs.push(entry.message),
  });
  assert.equal(info.templateId, 'sdk-img');
  assert.match(info.buildId, /^[0-9a-f-]{36}$/);
  // The build log streamed through the status route, step output included.
  assert.ok(logs.some((m) => m.includes('step-output-line')), logs.join('\n'));
  assert.ok(logs.some((m) => m.includes('copied 2 file(s) to /home/app/work/data/')), logs.join('\n'));

  assert.equal(await Template.exists('sdk-img'), true);
  assert.equal(await Template.exists('sdk-img:v1'), true);
  assert.equal(await Template.exists('sdk-img-not-built'), false);

  const sbx = await Sandbox.create('sdk-img:v1');
  try {
    // No user named: the template's last setUser (app), its workdir, env.
    const r = await sbx.commands.run(
      'cat hello.txt data/a.txt data/nested/b.txt stage.txt as-root.txt whoami.txt; pwd; id -un; ' +
        'echo "$STAGE $GREETING"; cat /tmp/up; /opt/run.sh; cat /etc/first.txt',
    );
    assert.equal(
      r.stdout,
      'hello from the context\nA\nB\nbuilt:overridden\n/home/app/work\n0\napp\n' +
        '/home/app/work\napp\nbuilt overridden\nup\nrun-script\none\n',
    );
    assert.equal(await sbx.files.read('/home/app/work/hello.txt'), 'hello from the context\n');
  } finally {
    await sbx.kill();
  }

  // Tags: the build under more names, listed with the build's id.
  const assigned = await Template.assignTags('sdk-img:v1', ['stable']);
  assert.deepEqual(assigned.tags, ['stable']);
  assert.equal(assigned.buildId, info.buildId);
  const tags = (await Template.getTags('sdk-img')).map((t) => t.tag).sort();
  assert.deepEqual(tags, ['default', 'stable', 'v1']);
  await Template.removeTags('sdk-img', 'stable');
  assert.equal(await Template.exists('sdk-img:stable'), false);
});

test('Template.build fromTemplate: a child of the built template, then the build is cached', async () => {
  const child = Template().fromTemplate('sdk-img').runCmd('echo child > /home/app/work/child.txt');
  await Template.build(child, 'sdk-child');
  const sbx = await Sandbox.create('sdk-child');
  try {
    const r = await sbx.commands.run('cat child.txt hello.txt; id -un');
    assert.equal(r.stdout, 'child\nhello from the context\napp\n');
  } finally {
    await sbx.kill();
  }
  // The same steps again: a cache hit, still ready.
  const logs = [];
  await Template.build(child, 'sdk-child', { onBuildLogs: (e) => logs.push(e.message) });
  assert.ok(logs.some((m) => m.includes('cached')), logs.join('\n'));
});

// The shape of the E2B SDK's own "build template" / "from base template"
// cases (packages/js-sdk/tests/template), on hutch's base instead of an
// image from the internet: fromBaseImage, a glob copy, envs, a run step, a
// workdir and a start command with a timeout as its ready check.
test('fromBaseImage with a glob copy, envs, workdir and a start command', async () => {
  const template = Template({ fileContextPath: ctx })
    .fromBaseImage()
    .setWorkdir('/app')
    .copy('folder/*.txt', 'folder')
    .setEnvs({ ENV_1: 'value1' })
    .runCmd('echo "Hello, World!" > /tmp/hello-build.txt')
    .setStartCmd('echo started > /tmp/started.txt', waitForTimeout(1_000));
  const logs = [];
  await Template.build(template, 'sdk-base', { onBuildLogs: (e) => logs.push(e.message) });
  assert.equal(await Template.exists('sdk-base'), true);
  const sbx = await Sandbox.create('sdk-base');
  try {
    const r = await sbx.commands.run(
      'pwd; echo "$ENV_1"; ls folder; cat /tmp/hello-build.txt /tmp/started.txt');
    assert.equal(r.stdout, '/app\nvalue1\none.txt\ntwo.txt\nHello, World!\nstarted\n',
      logs.join('\n'));
  } finally {
    await sbx.kill();
  }
  const child = Template().fromTemplate('sdk-base').runCmd('echo child-of-base > child.txt');
  await Template.build(child, 'sdk-base-child');
  const sbx2 = await Sandbox.create('sdk-base-child');
  try {
    const r = await sbx2.commands.run('cat /app/child.txt; echo "$ENV_1"');
    assert.equal(r.stdout, 'child-of-base\nvalue1\n');
  } finally {
    await sbx2.kill();
  }
});

test('a failing step is a BuildError with its message; nothing is registered', async () => {
  const bad = Template().fromTemplate('sdk-img').runCmd('echo failing-now; exit 7');
  await assert.rejects(Template.build(bad, 'sdk-broken'), (e) => {
    assert.ok(e instanceof BuildError, String(e));
    assert.match(e.message, /exited with 7/);
    return true;
  });
  assert.equal(await Template.exists('sdk-broken'), false);
});

test('Sandbox.deleteSnapshot removes a built template (DELETE /templates/{id})', async () => {
  assert.equal(await Sandbox.deleteSnapshot('sdk-child'), true);
  assert.equal(await Template.exists('sdk-child'), false);
  assert.equal(await Sandbox.deleteSnapshot('sdk-child'), false);
});
