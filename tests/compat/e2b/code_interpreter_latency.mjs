// Latency of the code-interpreter path through hutchd, with the unmodified
// npm SDK (env as for code_interpreter.test.mjs):
//   node code_interpreter_latency.mjs [creates=3] [warm runs=100]
// Prints create → first runCode("1+1") per sandbox, and the warm
// runCode("1+1") round trip p50/p99 in one sandbox.
import { Sandbox } from '@e2b/code-interpreter';

const creates = Number(process.argv[2] ?? 3);
const runs = Number(process.argv[3] ?? 100);
const pct = (xs, p) => xs[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];

for (let i = 0; i < creates; i++) {
  const t0 = performance.now();
  const sbx = await Sandbox.create();
  const t1 = performance.now();
  const r = await sbx.runCode('1+1');
  const t2 = performance.now();
  if (r.text !== '2') throw new Error(`runCode gave ${JSON.stringify(r.toJSON())}`);
  console.log(`create ${(t1 - t0).toFixed(0)} ms, first runCode ${(t2 - t1).toFixed(0)} ms, ` +
    `create → first result ${(t2 - t0).toFixed(0)} ms`);
  if (i < creates - 1) await sbx.kill();
  else {
    const ts = [];
    for (let j = 0; j < runs; j++) {
      const a = performance.now();
      const w = await sbx.runCode('1+1');
      ts.push(performance.now() - a);
      if (w.text !== '2') throw new Error('warm runCode failed');
    }
    ts.sort((a, b) => a - b);
    console.log(`warm runCode("1+1") x${runs}: p50 ${pct(ts, 50).toFixed(1)} ms, ` +
      `p99 ${pct(ts, 99).toFixed(1)} ms, max ${ts[ts.length - 1].toFixed(1)} ms`);
    await sbx.kill();
  }
}
