// Latency of the code-interpreter path through hutchd, with the unmodified
// npm SDK (env as for code_interpreter.test.mjs; bench/code_interpreter_bench.sh
// runs it):
//   node code_interpreter_latency.mjs [creates=20] [warm runs=200]
// Prints, as p50/p99 in ms:
//   - create → first runCode("1+1") result, one sandbox at a time; with
//     HUTCH_METRICS_URL (hutchd's /metrics) and HUTCH_API_KEY set it waits
//     before each create until hutchd's warm pool has a sandbox again
//     (hutch_sandboxes_warm ≥ 1), so each create is the one a client makes
//     at a quiet moment, and also runs the same creates back to back
//     (a burst: the pool holds one, the rest start cold);
//   - runCode("1+1") on a warm context, one sandbox, N times;
//   - the same code as a command: `python3 -c "print(1+1)"` through the
//     SDK's commands.run, N times (what an exec of it pays).
import { Sandbox } from '@e2b/code-interpreter';
import { row } from '../latency_stats.mjs';

const creates = Number(process.argv[2] ?? 20);
const runs = Number(process.argv[3] ?? 200);


async function warmSandboxes() {
  const res = await fetch(process.env.HUTCH_METRICS_URL, {
    headers: { Authorization: `Bearer ${process.env.HUTCH_API_KEY}` },
  });
  const m = /^hutch_sandboxes_warm (\S+)$/m.exec(await res.text());
  return m ? Number(m[1]) : 0;
}

async function waitForPool() {
  if (!process.env.HUTCH_METRICS_URL) return;
  for (let i = 0; i < 1200; i++) {
    if ((await warmSandboxes()) >= 1) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('the warm pool did not refill within 60 s');
}

async function createToFirstResult(wait) {
  if (wait) await waitForPool();
  const t0 = performance.now();
  const sbx = await Sandbox.create();
  const r = await sbx.runCode('1+1');
  const ms = performance.now() - t0;
  if (r.text !== '2') throw new Error(`runCode gave ${JSON.stringify(r.toJSON())}`);
  return { sbx, ms };
}

const quiet = [];
let kept;
for (let i = 0; i < creates; i++) {
  const { sbx, ms } = await createToFirstResult(true);
  quiet.push(ms);
  if (i === creates - 1) kept = sbx;
  else await sbx.kill();
}
const burst = [];
if (process.env.HUTCH_METRICS_URL) {
  await waitForPool();
  const made = [];
  for (let i = 0; i < Math.min(creates, 10); i++) {
    const { sbx, ms } = await createToFirstResult(false);
    burst.push(ms);
    made.push(sbx);
  }
  await Promise.all(made.map((s) => s.kill()));
}

const warm = [];
for (let j = 0; j < runs; j++) {
  const a = performance.now();
  const w = await kept.runCode('1+1');
  warm.push(performance.now() - a);
  if (w.text !== '2') throw new Error('warm runCode failed');
}
const exec = [];
for (let j = 0; j < runs; j++) {
  const a = performance.now();
  const c = await kept.commands.run('python3 -c "print(1+1)"');
  exec.push(performance.now() - a);
  if (c.stdout !== '2\n') throw new Error(`exec gave ${JSON.stringify(c)}`);
}
await kept.kill();

console.log(`${'case (ms)'.padEnd(44)} ${'p50'.padStart(8)} ${'p99'.padStart(8)}`);
row(process.env.HUTCH_METRICS_URL ? 'create → first runCode, pool refilled' : 'create → first runCode', quiet);
if (burst.length) row('create → first runCode, back to back', burst);
row('runCode("1+1"), warm context', warm);
row('commands.run(python3 -c "print(1+1)")', exec);
