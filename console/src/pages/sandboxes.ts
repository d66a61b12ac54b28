// The sandboxes page: a live list (the server's watch stream, a list call
// every 2 s while it is down; reconciled row by row, so 500 sandboxes cost
// a few text updates per change, not a redraw),
// status and metadata filters, the create form, and per row pause/resume,
// extend TTL and kill. CPU and memory come from each visible running
// sandbox's /metrics (rows off screen are not asked).
import * as api from '../api';
import type { Sandbox } from '../api';
import { field, fmtBytes, fmtDuration, h } from '../dom';
import { Scope, action, say, sayError } from '../ui';

const POLL_MS = 2000;
const METRICS_MS = 5000;
const METRICS_MAX = 40;

interface Row {
  tr: HTMLTableRowElement;
  cells: Record<string, HTMLTableCellElement>;
  rec: Sandbox;
  pauseBtn: HTMLButtonElement;
  cpu?: { seconds: number; at: number; pct?: number };
}

const COLUMNS: [string, string][] = [
  ['id', 'ID'],
  ['template', 'Template'],
  ['driver', 'Driver'],
  ['status', 'Status'],
  ['age', 'Age'],
  ['left', 'Time left'],
  ['cpu', 'CPU'],
  ['memory', 'Memory'],
  ['actions', 'Actions'],
];

export function parseMetadata(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of text.split(',')) {
    const t = part.trim();
    if (!t) continue;
    const eq = t.indexOf('=');
    if (eq <= 0) throw new Error(`metadata "${t}": write key=value`);
    out[t.slice(0, eq).trim()] = t.slice(eq + 1).trim();
  }
  return out;
}

function setText(el: HTMLElement, text: string): void {
  if (el.textContent !== text) el.textContent = text;
}

export function sandboxesPage(main: HTMLElement, scope: Scope): void {
  const rows = new Map<string, Row>();
  const visible = new Set<string>();
  const count = h('p', { id: 'sandbox-count', 'aria-live': 'off' }, 'Loading…');
  const tbody = h('tbody');
  const table = h(
    'table',
    { class: 'list', id: 'sandboxes' },
    h('caption', {}, 'Sandboxes'),
    h('thead', {}, h('tr', {}, COLUMNS.map(([, label]) => h('th', { scope: 'col' }, label)))),
    tbody,
  );

  // Filters.
  const statusSel = h(
    'select',
    { id: 'filter-status' },
    h('option', { value: 'live' }, 'Live (all but stopped)'),
    h('option', { value: '' }, 'All'),
    ['starting', 'running', 'paused', 'stopped', 'failed'].map((s) => h('option', { value: s }, s)),
  );
  const metaInput = h('input', { type: 'text', id: 'filter-metadata', placeholder: 'team=a, env=dev' });
  const filters = h(
    'form',
    { class: 'filters', 'aria-label': 'Filter sandboxes' },
    field('Status', statusSel),
    field('Metadata', metaInput),
  );
  filters.addEventListener('submit', (ev) => ev.preventDefault());

  // Create.
  const tplSel = h('select', { id: 'create-template' }, h('option', { value: 'base' }, 'base'));
  const ttl = h('input', { type: 'number', id: 'create-ttl', min: '1', value: '600' });
  const cpu = h('input', { type: 'number', id: 'create-cpu', min: '0.1', step: '0.1', value: '1' });
  const mem = h('input', { type: 'number', id: 'create-memory', min: '16', step: '16', value: '512' });
  const net = h(
    'select',
    { id: 'create-network' },
    h('option', { value: 'none' }, 'none (loopback only)'),
    h('option', { value: 'all' }, 'all (public internet)'),
  );
  const meta = h('input', { type: 'text', id: 'create-metadata', placeholder: 'team=a' });
  const createBtn = h('button', { type: 'submit' }, 'Create sandbox');
  const create = h(
    'form',
    { class: 'create', 'aria-labelledby': 'create-title' },
    h('h2', { id: 'create-title' }, 'New sandbox'),
    field('Template', tplSel),
    field('TTL (seconds)', ttl),
    field('CPU', cpu),
    field('Memory (MB)', mem),
    field('Network', net),
    field('Metadata', meta),
    createBtn,
  );
  create.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    createBtn.disabled = true;
    try {
      const sb = await api.createSandbox({
        template: tplSel.value,
        ttl_seconds: Number(ttl.value),
        cpu: Number(cpu.value),
        memory_mb: Number(mem.value),
        network: { mode: net.value },
        metadata: parseMetadata(meta.value),
      });
      say(`Created ${sb.id}`);
      await refresh();
    } catch (e) {
      sayError(e);
    } finally {
      createBtn.disabled = false;
    }
  });
  void api
    .listTemplates()
    .then((t) => {
      const names = new Set<string>(t.items.map((x) => x.name));
      for (const a of Object.keys(t.aliases ?? {})) names.add(a);
      tplSel.replaceChildren(...[...names].sort().map((n) => h('option', { value: n, selected: n === 'base' }, n)));
    })
    .catch(sayError);

  main.append(h('h1', {}, 'Sandboxes'), filters, count, table, create);

  const observer = new IntersectionObserver((entries) => {
    for (const e of entries) {
      const id = (e.target as HTMLElement).dataset.id!;
      if (e.isIntersecting) visible.add(id);
      else visible.delete(id);
    }
  });
  scope.onEnd(() => observer.disconnect());

  function makeRow(rec: Sandbox): Row {
    const cells: Record<string, HTMLTableCellElement> = {};
    const tr = h('tr', { 'data-id': rec.id });
    for (const [key] of COLUMNS) {
      cells[key] = key === 'id' ? h('th', { scope: 'row' }) : h('td', { class: `col-${key}` });
      tr.append(cells[key]);
    }
    cells.id.append(h('a', { href: `#/sandboxes/${encodeURIComponent(rec.id)}/overview` }, rec.id));
    const pauseBtn = action(
      'Pause',
      async () => {
        const r = rows.get(rec.id)!;
        const paused = r.rec.status === 'paused';
        const next = paused ? await api.resumeSandbox(rec.id) : await api.pauseSandbox(rec.id);
        update(r, next);
        say(`${paused ? 'Resumed' : 'Paused'} ${rec.id}`);
      },
      { 'aria-label': `Pause ${rec.id}` },
    );
    const extend = action(
      '+10 min',
      async () => {
        const r = rows.get(rec.id)!;
        const left = Math.max(0, Date.parse(r.rec.expires_at) - Date.now());
        update(r, await api.setTtl(rec.id, Math.round(left / 1000) + 600));
      },
      { 'aria-label': `Extend the TTL of ${rec.id} by 10 minutes` },
      `Extended ${rec.id} by 10 minutes`,
    );
    const kill = action(
      'Kill',
      async () => {
        await api.deleteSandbox(rec.id);
        const r = rows.get(rec.id);
        if (r) update(r, { ...r.rec, status: 'stopped' });
        await refresh();
      },
      { 'aria-label': `Kill ${rec.id}`, class: 'danger' },
      `Killed ${rec.id}`,
    );
    cells.actions.append(pauseBtn, extend, kill);
    const row: Row = { tr, cells, rec, pauseBtn };
    fill(row);
    observer.observe(tr);
    return row;
  }

  function fill(r: Row): void {
    const s = r.rec;
    setText(r.cells.template, s.template);
    setText(r.cells.driver, s.driver);
    setText(r.cells.status, s.status + (s.paused_by ? ` (${s.paused_by})` : ''));
    r.cells.status.className = `col-status status-${s.status}`;
    const live = s.status === 'running' || s.status === 'paused';
    r.pauseBtn.hidden = !live;
    const label = s.status === 'paused' ? 'Resume' : 'Pause';
    setText(r.pauseBtn, label);
    r.pauseBtn.setAttribute('aria-label', `${label} ${s.id}`);
    for (const b of r.cells.actions.querySelectorAll('button')) if (b !== r.pauseBtn) b.hidden = s.status === 'stopped';
    tickTimes(r, Date.now());
  }

  function tickTimes(r: Row, now: number): void {
    setText(r.cells.age, fmtDuration(now - Date.parse(r.rec.created_at)));
    const done = r.rec.status === 'stopped' || r.rec.status === 'failed';
    setText(r.cells.left, done ? '—' : fmtDuration(Math.max(0, Date.parse(r.rec.expires_at) - now)));
    const running = r.rec.status === 'running';
    setText(r.cells.cpu, running && r.cpu?.pct !== undefined ? `${r.cpu.pct.toFixed(1)}%` : '—');
    if (!running) setText(r.cells.memory, '—');
    else if (!r.cells.memory.textContent) setText(r.cells.memory, '…');
  }

  function update(r: Row, rec: Sandbox): void {
    const before = r.rec;
    r.rec = rec;
    if (
      before.status !== rec.status ||
      before.expires_at !== rec.expires_at ||
      before.paused_by !== rec.paused_by ||
      before.template !== rec.template
    )
      fill(r);
  }

  function wanted(s: Sandbox): boolean {
    return statusSel.value !== 'live' || s.status !== 'stopped';
  }

  function currentFilter(): api.ListFilter {
    return { status: statusSel.value === 'live' ? '' : statusSel.value, metadata: parseMetadata(metaInput.value) };
  }

  // One list call, reconciled (the fallback while the watch stream is down,
  // and after an action of this page).
  async function refresh(): Promise<void> {
    const list = await api.listSandboxes(currentFilter());
    if (scope.alive) reconcile(list);
  }

  function reconcile(list: Sandbox[]): void {
    // How long reconciling the rows takes (the browser test reads it).
    const started = performance.now();
    const keep = list.filter(wanted);
    keep.sort((a, b) => (a.created_at === b.created_at ? a.id.localeCompare(b.id) : a.created_at < b.created_at ? 1 : -1));
    const seen = new Set<string>();
    for (const rec of keep) {
      seen.add(rec.id);
      const r = rows.get(rec.id);
      if (r) update(r, rec);
      else rows.set(rec.id, makeRow(rec));
    }
    for (const [id, r] of rows) {
      if (seen.has(id)) continue;
      observer.unobserve(r.tr);
      r.tr.remove();
      rows.delete(id);
      visible.delete(id);
    }
    // Put rows in order, moving only those out of place.
    let at = tbody.firstElementChild;
    for (const rec of keep) {
      const tr = rows.get(rec.id)!.tr;
      if (at === tr) at = tr.nextElementSibling;
      else tbody.insertBefore(tr, at);
    }
    setText(count, `${keep.length} sandbox${keep.length === 1 ? '' : 'es'}`);
    table.setAttribute('data-count', String(keep.length));
    performance.measure('hutch:list-reconcile', { start: started });
  }

  async function sampleMetrics(): Promise<void> {
    const ids = [...visible].filter((id) => rows.get(id)?.rec.status === 'running').slice(0, METRICS_MAX);
    const queue = [...ids];
    const worker = async () => {
      for (let id = queue.shift(); id !== undefined; id = queue.shift()) {
        try {
          const m = await api.sandboxMetrics(id);
          const r = rows.get(id);
          if (!r) continue;
          const now = performance.now();
          if (r.cpu) {
            const dt = (now - r.cpu.at) / 1000;
            r.cpu = { seconds: m.cpu_seconds, at: now, pct: dt > 0 ? (100 * (m.cpu_seconds - r.cpu.seconds)) / dt : 0 };
          } else {
            r.cpu = { seconds: m.cpu_seconds, at: now };
          }
          setText(r.cells.memory, fmtBytes(m.memory_bytes));
          tickTimes(r, Date.now());
        } catch {
          // gone or stopped since the list: the next list says so
        }
      }
    };
    await Promise.all([worker(), worker(), worker(), worker()]);
  }

  // The list follows the server's watch stream (GET /v1/sandboxes?watch=true:
  // the whole list, then each change within half a second); while the
  // stream is down, a list call every 2 s stands in, and the stream is
  // tried again. A filter change restarts it.
  let watch: AbortController | null = null;
  let live = false;
  let pending = 0;
  const known = new Map<string, Sandbox>();
  const flush = () => {
    pending = 0;
    if (scope.alive) reconcile([...known.values()]);
  };
  async function follow(): Promise<void> {
    watch?.abort();
    const ctl = new AbortController();
    watch = ctl;
    try {
      const r = await api.watchSandboxes(currentFilter(), ctl.signal);
      live = true;
      await api.readSse(r, (event, data) => {
        const j = JSON.parse(data);
        if (event === 'list') {
          known.clear();
          for (const sb of j.items as Sandbox[]) known.set(sb.id, sb);
        } else if (event === 'upsert') {
          known.set(j.id, j as Sandbox);
        } else if (event === 'remove') {
          known.delete(j.id);
        } else {
          return;
        }
        // Changes that arrive together are drawn once.
        if (!pending) pending = requestAnimationFrame(flush);
      });
    } catch (e) {
      if (!ctl.signal.aborted) sayError(e);
    } finally {
      if (watch === ctl) live = false;
    }
  }
  scope.onEnd(() => watch?.abort());
  const restart = () => void follow();
  statusSel.addEventListener('change', restart);
  metaInput.addEventListener('change', restart);
  filters.addEventListener('submit', restart);
  void follow();
  let lastTry = performance.now();
  scope.every(POLL_MS, async () => {
    if (live) return;
    await refresh();
    if (performance.now() - lastTry > 10 * POLL_MS) {
      lastTry = performance.now();
      void follow();
    }
  });
  scope.every(METRICS_MS, sampleMetrics);
  scope.every(1000, () => {
    const now = Date.now();
    for (const r of rows.values()) tickTimes(r, now);
  });
}
