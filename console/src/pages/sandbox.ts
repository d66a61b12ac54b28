// One sandbox: its header (status, time left, pause/resume, extend, kill)
// and tabs — overview, terminal, files, metrics, processes, events. The tabs
// follow the WAI-ARIA tabs pattern (arrow keys, Home/End move between
// them) and each is its own route (#/sandboxes/{id}/{tab}).
import * as api from '../api';
import type { Sandbox } from '../api';
import { fmtDuration, h } from '../dom';
import { Scope, action, say } from '../ui';
import { eventsTab } from './events';
import { filesTab } from './files';
import { metricsTab } from './metrics';
import { processesTab } from './processes';
import { terminalTab } from './terminal';

const TABS: [string, string][] = [
  ['overview', 'Overview'],
  ['terminal', 'Terminal'],
  ['files', 'Files'],
  ['metrics', 'Metrics'],
  ['processes', 'Processes'],
  ['events', 'Events'],
];

export function sandboxPage(main: HTMLElement, scope: Scope, id: string, tab: string): void {
  let rec: Sandbox | null = null;
  const statusEl = h('span', { id: 'sandbox-status' }, '…');
  const leftEl = h('span', { id: 'sandbox-left' }, '');
  const pauseBtn = action('Pause', async () => {
    rec = rec?.status === 'paused' ? await api.resumeSandbox(id) : await api.pauseSandbox(id);
    show();
  });
  const header = h(
    'header',
    { class: 'sandbox-head' },
    h('p', {}, h('a', { href: '#/sandboxes' }, '← Sandboxes')),
    h('h1', {}, id),
    h('p', { class: 'facts' }, 'Status: ', statusEl, ' · Time left: ', leftEl),
    h(
      'div',
      { class: 'toolbar', role: 'toolbar', 'aria-label': 'Sandbox actions' },
      pauseBtn,
      action(
        'Extend TTL +10 min',
        async () => {
          const left = rec ? Math.max(0, Date.parse(rec.expires_at) - Date.now()) : 0;
          rec = await api.setTtl(id, Math.round(left / 1000) + 600);
          show();
        },
        {},
        'TTL extended by 10 minutes',
      ),
      action(
        'Kill',
        async () => {
          await api.deleteSandbox(id);
          say(`Killed ${id}`);
          location.hash = '#/sandboxes';
        },
        { class: 'danger', 'aria-label': `Kill ${id}` },
      ),
    ),
  );

  function show(): void {
    if (!rec) return;
    statusEl.textContent = rec.status + (rec.paused_by ? ` (${rec.paused_by})` : '');
    statusEl.className = `status-${rec.status}`;
    const done = rec.status === 'stopped' || rec.status === 'failed';
    leftEl.textContent = done ? '—' : fmtDuration(Math.max(0, Date.parse(rec.expires_at) - Date.now()));
    pauseBtn.textContent = rec.status === 'paused' ? 'Resume' : 'Pause';
    pauseBtn.hidden = done;
  }

  const tablist = h('div', { role: 'tablist', 'aria-label': 'Sandbox views', class: 'tabs' });
  const panel = h('section', { role: 'tabpanel', id: 'tab-panel', tabindex: '0' });
  const tabButtons = TABS.map(([key, label]) => {
    const b = h(
      'button',
      { type: 'button', role: 'tab', id: `tab-${key}`, 'aria-controls': 'tab-panel', 'data-tab': key },
      label,
    );
    b.addEventListener('click', () => select(key, false));
    return b;
  });
  tablist.append(...tabButtons);
  tablist.addEventListener('keydown', (ev) => {
    const i = tabButtons.findIndex((b) => b === document.activeElement);
    if (i < 0) return;
    let j = -1;
    if (ev.key === 'ArrowRight') j = (i + 1) % tabButtons.length;
    else if (ev.key === 'ArrowLeft') j = (i - 1 + tabButtons.length) % tabButtons.length;
    else if (ev.key === 'Home') j = 0;
    else if (ev.key === 'End') j = tabButtons.length - 1;
    if (j < 0) return;
    ev.preventDefault();
    select(TABS[j][0], true);
  });

  let tabScope: Scope | null = null;
  function select(key: string, focus: boolean): void {
    if (!TABS.some(([k]) => k === key)) key = 'overview';
    tabScope?.end();
    tabScope = new Scope();
    for (const b of tabButtons) {
      const on = b.dataset.tab === key;
      b.setAttribute('aria-selected', String(on));
      b.tabIndex = on ? 0 : -1;
      if (on && focus) b.focus();
    }
    panel.setAttribute('aria-labelledby', `tab-${key}`);
    panel.replaceChildren();
    const want = `#/sandboxes/${encodeURIComponent(id)}/${key}`;
    if (location.hash !== want) history.replaceState(null, '', want);
    switch (key) {
      case 'terminal':
        terminalTab(panel, tabScope, id);
        break;
      case 'files':
        filesTab(panel, tabScope, id);
        break;
      case 'metrics':
        metricsTab(panel, tabScope, id);
        break;
      case 'processes':
        processesTab(panel, tabScope, id);
        break;
      case 'events':
        eventsTab(panel, tabScope, id);
        break;
      default:
        overviewTab(panel, tabScope, id, (r) => {
          rec = r;
          show();
        });
    }
  }
  scope.onEnd(() => tabScope?.end());

  main.append(header, tablist, panel);
  select(tab, false);
  scope.every(2000, async () => {
    rec = await api.getSandbox(id);
    show();
  });
}

function overviewTab(panel: HTMLElement, scope: Scope, id: string, onRecord: (r: Sandbox) => void): void {
  const dl = h('dl', { class: 'overview', id: 'overview' });
  panel.append(h('h2', {}, 'Overview'), dl);
  scope.every(2000, async () => {
    const r = await api.getSandbox(id);
    onRecord(r);
    const rowsOf = (k: string, v: unknown) => [
      h('dt', {}, k),
      h('dd', {}, typeof v === 'object' ? JSON.stringify(v) : String(v)),
    ];
    dl.replaceChildren(...Object.entries(r).flatMap(([k, v]) => rowsOf(k, v)));
  });
}
