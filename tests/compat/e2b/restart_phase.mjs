// Across a hutchd crash (run.sh kills it with SIGKILL and starts it again
// on the same state dir): a sandbox, its envd access token and a running
// background command survive, and the SDK picks them up again.
//   node restart_phase.mjs before STATE_FILE   creates, starts a command
//   node restart_phase.mjs after STATE_FILE    reconnects and checks
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { Sandbox } from 'e2b';

const [phase, stateFile] = process.argv.slice(2);

if (phase === 'before') {
  const sbx = await Sandbox.create({ timeoutMs: 300_000 });
  await sbx.files.write('/home/user/before.txt', 'written before the crash');
  const h = await sbx.commands.run('read line; echo after:$line', { background: true, stdin: true, timeoutMs: 0 });
  await h.disconnect();
  writeFileSync(stateFile, JSON.stringify({ id: sbx.sandboxId, token: sbx.envdAccessToken, pid: h.pid }));
} else if (phase === 'after') {
  const { id, token, pid } = JSON.parse(readFileSync(stateFile, 'utf8'));
  const sbx = await Sandbox.connect(id);
  assert.equal(sbx.envdAccessToken, token, 'the access token survives a restart');
  assert.equal(await sbx.files.read('/home/user/before.txt'), 'written before the crash');
  assert.ok((await sbx.commands.list()).some((p) => p.pid === pid), 'the command still runs');
  const out = [];
  const h = await sbx.commands.connect(pid, { onStdout: (d) => out.push(d) });
  await sbx.commands.sendStdin(pid, 'restart\n');
  await h.wait();
  assert.equal(out.join(''), 'after:restart\n');
  await sbx.kill();
} else {
  throw new Error(`unknown phase ${phase}`);
}
console.log(`restart phase ${phase}: ok`);
