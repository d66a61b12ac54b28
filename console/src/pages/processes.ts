// The processes tab: the sandbox's processes (GET …/processes, every 2 s),
// start a background command, follow a process's output (the SSE of
// …/processes/{pid}/stream, read through fetch so the key stays in the
// header), and send a signal.
import * as api from '../api';
import type { Process } from '../api';
import { field, h } from '../dom';
import { Scope, action, sayError } from '../ui';

const SIGNALS = ['SIGTERM', 'SIGINT', 'SIGKILL', 'SIGHUP', 'SIGSTOP', 'SIGCONT', 'SIGUSR1', 'SIGUSR2'];

export function processesTab(panel: HTMLElement, scope: Scope, id: string): void {
  const cmd = h('input', { type: 'text', id: 'process-cmd', placeholder: 'sleep 60', spellcheck: 'false' });
  const start = h('form', { class: 'inline', 'aria-label': 'Start a process' }, field('Command', cmd), h('button', { type: 'submit' }, 'Start'));
  const tbody = h('tbody');
  const table = h(
    'table',
    { class: 'list', id: 'processes' },
    h('caption', {}, 'Processes'),
    h('thead', {}, h('tr', {}, ['PID', 'Command', 'Status', 'Exit', 'Started', 'Actions'].map((c) => h('th', { scope: 'col' }, c)))),
    tbody,
  );
  const outTitle = h('h3', { id: 'output-title' }, 'Output');
  const out = h('pre', { class: 'output', id: 'process-output', tabindex: '0', 'aria-labelledby': 'output-title' });
  panel.append(h('h2', {}, 'Processes'), start, table, outTitle, out);

  let follow: AbortController | null = null;
  scope.onEnd(() => follow?.abort());

  async function watch(pid: number): Promise<void> {
    follow?.abort();
    const ctl = new AbortController();
    follow = ctl;
    out.textContent = '';
    outTitle.textContent = `Output of ${pid}`;
    const r = await api.processStream(id, pid, ctl.signal);
    if (!r.ok) {
      out.textContent = `(${r.status}: ${await r.text()})`;
      return;
    }
    try {
      await api.readSse(r, (event, data) => {
        const j = JSON.parse(data);
        if (event === 'stdout' || event === 'stderr') {
          out.append(j.text ?? atob(j.b64 ?? ''));
        } else if (event === 'exit') {
          out.append(`\n[exit ${j.exit_code}]\n`);
        } else if (event === 'dropped') {
          out.append(`[${j.dropped_bytes} bytes dropped]\n`);
        }
      });
    } catch (e) {
      if (!ctl.signal.aborted) throw e;
    }
  }

  function row(p: Process): HTMLTableRowElement {
    const sig = h('select', { 'aria-label': `Signal for ${p.pid}` }, SIGNALS.map((s) => h('option', { value: s }, s)));
    const actions = h('td', {});
    if (p.background)
      actions.append(action('Output', () => watch(p.pid), { 'aria-label': `Show the output of ${p.pid}` }));
    if (p.running)
      actions.append(sig, action('Send', () => api.signalProcess(id, p.pid, sig.value).then(refresh), { 'aria-label': `Send the signal to ${p.pid}` }));
    return h(
      'tr',
      { 'data-pid': String(p.pid) },
      h('th', { scope: 'row' }, String(p.pid)),
      h('td', { class: 'mono' }, p.cmd ?? p.argv.join(' ')),
      h('td', {}, p.status),
      h('td', {}, p.exit_code === null ? '' : String(p.exit_code)),
      h('td', {}, p.started_at),
      actions,
    );
  }

  async function refresh(): Promise<void> {
    const list = await api.listProcesses(id);
    if (!scope.alive) return;
    // Keep focus where it was: only redraw when something changed.
    const key = JSON.stringify(list.map((p) => [p.pid, p.status, p.exit_code]));
    if (tbody.dataset.key === key) return;
    tbody.dataset.key = key;
    tbody.replaceChildren(...list.map(row));
  }

  start.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    if (!cmd.value.trim()) return;
    try {
      const p = await api.startProcess(id, cmd.value);
      cmd.value = '';
      await refresh();
      void watch(p.pid).catch(sayError);
    } catch (e) {
      sayError(e);
    }
  });
  scope.every(2000, refresh);
}
