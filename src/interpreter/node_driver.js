// The JavaScript/TypeScript interpreter of one code-server context.
//
// node_engine.py starts one of these per context and talks to it in JSON
// lines over two sockets (their fd numbers are argv[2] and argv[3]): a
// request {id, code, language, env} in, then {id, type:
// stdout|stderr|result|error} lines and {id, type: "done"} out. State persists because every run is
// a script in this one process's global context (vm.runInThisContext):
// top-level var/function/let/const declarations outlive the run.
//
// The user's console and process.stdout/stderr writes are routed over
// the socket tagged with the run, so they arrive in order with the run's
// end; child processes that inherit fds 1 and 2 write to the pipes the
// server also reads. Interrupts are SIGINT: vm's breakOnSigint stops a
// synchronous script, and our handler abandons an awaited promise.
'use strict';

const net = require('net');
const util = require('util');
const vm = require('vm');
const path = require('path');
const {createRequire} = require('module');

const fs = require('fs');

const requests = new net.Socket({fd: Number(process.argv[2]), readable: true, writable: false});
// Replies are written synchronously on a socket libuv never wraps (so it
// stays blocking): an interrupt terminates the user's script from a
// signal watchdog, and a termination that lands inside a stream's write
// machinery left later replies queued forever (the run never ended).
// A plain write(2) has no such state, and keeps every line in order.
const replyFd = Number(process.argv[3]);
const send = (msg) => fs.writeSync(replyFd, JSON.stringify(msg) + '\n');

let current = null;  // {id, interrupt: fn} of the run in progress

// Output of the user's code, tagged with the run it belongs to (after a
// run, late output of timers goes to no one).
for (const name of ['stdout', 'stderr']) {
  const stream = process[name];
  stream.write = (chunk, encoding, cb) => {
    if (typeof encoding === 'function') cb = encoding;
    const text = typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
    if (current) send({id: current.id, type: name, text});
    if (cb) process.nextTick(cb);
    return true;
  };
}

// The globals a REPL offers; `require` resolves from the context's cwd.
globalThis.require = createRequire(path.join(process.cwd(), '__hutch_context__.js'));
globalThis.module = {exports: {}};
globalThis.exports = globalThis.module.exports;
globalThis.__dirname = process.cwd();

process.on('SIGINT', () => {
  if (current && current.interrupt) current.interrupt();
});
// An error thrown later by a timer or a rejected promise nobody awaited
// must not end the context.
process.on('uncaughtException', (e) => {
  if (current) send({id: current.id, type: 'stderr', text: describe(e).traceback + '\n'});
});
process.on('unhandledRejection', (e) => {
  if (current) send({id: current.id, type: 'stderr', text: describe(e).traceback + '\n'});
});

function describe(e) {
  if (e instanceof Error || (e && typeof e === 'object' && 'stack' in e)) {
    return {name: e.name || 'Error', value: e.message || String(e), traceback: userStack(e.stack || e)};
  }
  return {name: 'Error', value: util.inspect(e), traceback: 'Uncaught ' + util.inspect(e)};
}

let typescript;  // loaded on the first TypeScript run
function loadTypeScript() {
  if (typescript !== undefined) return typescript;
  typescript = null;
  // Debian's node-typescript lives in /usr/share/nodejs, which a Node.js
  // not from Debian does not search.
  for (const where of ['typescript', '/usr/share/nodejs/typescript', '/usr/lib/nodejs/typescript',
                       '/usr/lib/node_modules/typescript']) {
    try {
      typescript = require(where);
      break;
    } catch (e) {
    }
  }
  return typescript;
}

function transpile(code) {
  const ts = loadTypeScript();
  if (!ts) {
    const e = new Error(
        'TypeScript is not available: install the Debian package node-typescript');
    e.name = 'TypeScriptUnavailable';
    throw e;
  }
  return ts.transpileModule(code, {
    compilerOptions: {target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.CommonJS},
    reportDiagnostics: false,
  }).outputText;
}

// A script when it compiles as one. Code with a top-level `await` runs as
// an async function instead; so that it still behaves like a cell, its
// column-0 `const|let|var NAME =` become globals and its last line, when
// it is an expression, is returned as the cell's value.
function compile(code) {
  try {
    return new vm.Script(code, {filename: 'cell'});
  } catch (e) {
    if (!(e instanceof SyntaxError) || !/\bawait\b/.test(code)) throw e;
  }
  const body = code.replace(/^(?:const|let|var)\s+([A-Za-z_$][\w$]*)\s*=/gm, 'globalThis.$1 =');
  const lines = body.replace(/\s+$/, '').split('\n');
  const last = lines.pop().replace(/;\s*$/, '');
  const wrap = (text) => new vm.Script('(async () => {\n' + text + '\n})()', {filename: 'cell'});
  if (last.trim() && !/^\s*(return|throw|if|for|while|do|switch|try|class|function|import)\b/.test(last)) {
    try {
      return wrap(lines.concat(['return (' + last + ');']).join('\n'));
    } catch (e) {
      // not an expression: run it as written
    }
  }
  return wrap(body);
}

// The user's frames only: the driver's and vm's own are noise in a cell's traceback.
function userStack(stack) {
  return String(stack).split('\n').filter(
      (l) => !/node_driver\.js|\(node:vm:|sigintHandlersWrap|processTicksAndRejections/.test(l))
      .join('\n');
}

function interruptedError() {
  const e = new Error('Execution interrupted');
  e.name = 'KeyboardInterrupt';
  return e;
}

async function run(req) {
  const saved = {};
  for (const [k, v] of Object.entries(req.env || {})) {
    saved[k] = Object.prototype.hasOwnProperty.call(process.env, k) ? process.env[k] : undefined;
    process.env[k] = v;
  }
  current = {id: req.id, interrupt: null};
  try {
    const code = req.language === 'typescript' ? transpile(req.code) : req.code;
    const script = compile(code);
    let value = script.runInThisContext({breakOnSigint: true, displayErrors: false});
    if (value && typeof value.then === 'function') {
      value = await new Promise((resolve, reject) => {
        current.interrupt = () => reject(interruptedError());
        value.then(resolve, reject);
      });
    }
    if (value !== undefined) {
      send({id: req.id, type: 'result', text: util.inspect(value, {depth: 4})});
    }
  } catch (e) {
    if (e && e.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED') {
      send({id: req.id, type: 'error', ...describe(interruptedError())});
    } else {
      send({id: req.id, type: 'error', ...describe(e)});
    }
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    current = null;
    send({id: req.id, type: 'done'});
  }
}

// Requests arrive one at a time (the server queues them), but a line may
// come in pieces.
let pending = '';
let queue = Promise.resolve();
requests.setEncoding('utf8');  // a character split between chunks stays whole
requests.on('data', (chunk) => {
  pending += chunk;
  let nl;
  while ((nl = pending.indexOf('\n')) >= 0) {
    const line = pending.slice(0, nl);
    pending = pending.slice(nl + 1);
    if (line) queue = queue.then(() => run(JSON.parse(line)));
  }
});
requests.on('end', () => process.exit(0));
send({type: 'ready'});
