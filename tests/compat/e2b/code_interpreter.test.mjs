// The code-interpreter suite: the official npm `@e2b/code-interpreter` SDK,
// unmodified and configured only by E2B_API_URL / E2B_SANDBOX_URL /
// E2B_API_KEY, against a live hutchd that has the `code-interpreter`
// template built (run_code_interpreter.sh). Sandbox.create() asks for the
// SDK's default template, `code-interpreter-v1`, which hutch's default
// aliases resolve to `code-interpreter`; the SDK then reaches the code
// server on port 49999 through hutchd's port relay
// (`E2b-Sandbox-Id` / `E2b-Sandbox-Port` headers).
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Sandbox } from '@e2b/code-interpreter';

describe('@e2b/code-interpreter', () => {
  let sbx;
  before(async () => {
    sbx = await Sandbox.create({ envs: { HUTCH_CI: 'create-time' }, timeoutMs: 600_000 });
  });
  after(async () => {
    if (sbx) await sbx.kill();
  });

  test('the default template alias resolves to code-interpreter', async () => {
    const info = await sbx.getInfo();
    assert.ok(['code-interpreter', 'code-interpreter-v1'].includes(info.templateId) ||
      info.name === 'code-interpreter', `got ${JSON.stringify(info)}`);
    const r = await sbx.runCode('1+1');
    assert.equal(r.text, '2');
    assert.equal(r.error, undefined);
  });

  test('state persists across runCode calls', async () => {
    await sbx.runCode('x = 41');
    const r = await sbx.runCode('x += 1\nx');
    assert.equal(r.text, '42');
  });

  test('stdout and stderr reach the callbacks and the logs', async () => {
    const out = [];
    const err = [];
    const r = await sbx.runCode('import sys\nprint("hello")\nprint("oops", file=sys.stderr)', {
      onStdout: (m) => out.push(m.line),
      onStderr: (m) => err.push(m.line),
    });
    assert.deepEqual(r.logs.stdout, ['hello\n']);
    assert.deepEqual(r.logs.stderr, ['oops\n']);
    assert.deepEqual(out, ['hello\n']);
    assert.deepEqual(err, ['oops\n']);
  });

  test('a ZeroDivisionError is execution.error', async () => {
    const r = await sbx.runCode('1/0');
    assert.ok(r.error, 'an error');
    assert.equal(r.error.name, 'ZeroDivisionError');
    assert.match(r.error.value, /division by zero/);
    assert.match(r.error.traceback, /ZeroDivisionError/);
  });

  test('a matplotlib plot gives a png and a line chart with its title', async () => {
    const r = await sbx.runCode(
      'import matplotlib.pyplot as plt\n' +
        'plt.plot([1, 2, 3], [1, 4, 9], label="sq")\n' +
        'plt.title("Squares")\nplt.xlabel("n")\nplt.ylabel("n^2")\nplt.show()',
    );
    assert.equal(r.error, undefined, JSON.stringify(r.error));
    const img = r.results.find((x) => x.png);
    assert.ok(img, `a png among ${JSON.stringify(r.results.map((x) => x.formats()))}`);
    assert.ok(Buffer.from(img.png, 'base64').subarray(1, 4).toString() === 'PNG');
    assert.ok(img.chart, 'a chart');
    assert.equal(img.chart.type, 'line');
    assert.equal(img.chart.title, 'Squares');
  });

  test('a DataFrame gives data or html', async () => {
    const r = await sbx.runCode('import pandas as pd\npd.DataFrame({"a": [1, 2], "b": ["x", "y"]})');
    assert.equal(r.error, undefined, JSON.stringify(r.error));
    const main = r.results.find((x) => x.isMainResult);
    assert.ok(main, 'a main result');
    assert.ok(main.data || main.html, `formats ${main.formats()}`);
    if (main.data) assert.deepEqual(main.data.a, [1, 2]);
  });

  test('env vars: per call, and the sandbox create-time ones', async () => {
    const r = await sbx.runCode('import os\nos.environ.get("PER_CALL")', { envs: { PER_CALL: 'v1' } });
    assert.equal(r.text, 'v1');
    const after = await sbx.runCode('import os\nos.environ.get("PER_CALL", "unset")');
    assert.equal(after.text, 'unset');
    const created = await sbx.runCode('import os\nos.environ.get("HUTCH_CI")');
    assert.equal(created.text, 'create-time');
  });

  test('contexts: create, list, run in, restart, remove', async () => {
    const ctx = await sbx.createCodeContext({ cwd: '/tmp' });
    assert.ok(ctx.id);
    assert.equal(ctx.cwd, '/tmp');
    const listed = await sbx.listCodeContexts();
    assert.ok(listed.some((c) => c.id === ctx.id), JSON.stringify(listed));
    const cwd = await sbx.runCode('import os\ny = 7\nos.getcwd()', { context: ctx });
    assert.equal(cwd.text, '/tmp');
    // Contexts are separate: the default context's x is not here.
    const sep = await sbx.runCode('"x" in globals()', { context: ctx });
    assert.equal(sep.text, 'False');
    await sbx.restartCodeContext(ctx);
    const gone = await sbx.runCode('"y" in globals()', { context: ctx });
    assert.equal(gone.text, 'False');
    await sbx.removeCodeContext(ctx);
    const after = await sbx.listCodeContexts();
    assert.ok(!after.some((c) => c.id === ctx.id));
  });

  test('language js keeps state; bash runs', async () => {
    await sbx.runCode('var k = 20', { language: 'js' });
    const js = await sbx.runCode('k + 22', { language: 'js' });
    assert.equal(js.error, undefined, JSON.stringify(js.error));
    assert.equal(js.text, '42');
    const sh = await sbx.runCode('echo "$((6*7))"; whoami', { language: 'bash' });
    assert.equal(sh.error, undefined, JSON.stringify(sh.error));
    assert.deepEqual(sh.logs.stdout.join(''), '42\nuser\n');
  });

  test('a timeoutMs interrupt keeps the variables', async () => {
    await sbx.runCode('kept = "still here"');
    await assert.rejects(sbx.runCode('import time\ntime.sleep(30)', { timeoutMs: 2000 }), (e) => {
      assert.match(String(e), /timed out|Timeout/i);
      return true;
    });
    const r = await sbx.runCode('kept', { timeoutMs: 30_000 });
    assert.equal(r.text, 'still here');
  });
});
