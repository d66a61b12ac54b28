// The events tab: the sandbox's event log (GET …/events?follow=true, read
// through fetch so the key stays in the header), newest first, growing as
// things happen; a level filter restarts the stream from the start. A
// stream that drops goes on after the last event seen, 2 s later; one the
// server ended (the sandbox stopped) stays ended.
import * as api from '../api';
import type { SandboxEvent } from '../api';
import { field, h } from '../dom';
import { Scope, sayError } from '../ui';

// The server keeps at most this many per sandbox (--sandbox-events).
const MAX_ROWS = 1000;

const LEVELS: [string, string][] = [
  ['debug', 'All (debug and above)'],
  ['info', 'Info and above'],
  ['warn', 'Warnings and errors'],
  ['error', 'Errors'],
];

// The fields as `k=v` pairs (strings bare, the rest as JSON).
function details(fields: Record<string, unknown>): string {
  return Object.entries(fields)
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
    .join(' ');
}

export function eventsTab(panel: HTMLElement, scope: Scope, id: string): void {
  const level = h(
    'select',
    { id: 'events-level' },
    LEVELS.map(([v, label]) => h('option', { value: v, selected: v === 'info' }, label)),
  );
  const state = h('p', { id: 'events-state', class: 'facts' }, 'Connecting…');
  const tbody = h('tbody');
  const table = h(
    'table',
    { class: 'list', id: 'events' },
    h('caption', {}, 'Events, newest first'),
    h('thead', {}, h('tr', {}, ['#', 'Time', 'Level', 'Type', 'Message', 'Details'].map((c) => h('th', { scope: 'col' }, c)))),
    tbody,
  );
  panel.append(h('h2', {}, 'Events'), h('div', { class: 'inline' }, field('Level', level)), state, table);

  let ctl: AbortController | null = null;
  let last = 0;
  let retry = 0;
  scope.onEnd(() => {
    ctl?.abort();
    window.clearTimeout(retry);
  });

  function row(e: SandboxEvent): HTMLTableRowElement {
    return h(
      'tr',
      { 'data-seq': String(e.seq), 'data-type': e.type, class: `level-${e.level}` },
      h('th', { scope: 'row' }, String(e.seq)),
      h('td', {}, h('time', { datetime: e.time }, new Date(e.time).toLocaleTimeString())),
      h('td', {}, e.level),
      h('td', { class: 'mono' }, e.type),
      h('td', {}, e.message),
      h('td', { class: 'mono' }, details(e.fields)),
    );
  }

  function add(e: SandboxEvent): void {
    last = Math.max(last, e.seq);
    tbody.prepend(row(e));
    while (tbody.rows.length > MAX_ROWS) tbody.lastElementChild?.remove();
  }

  async function follow(): Promise<void> {
    ctl?.abort();
    window.clearTimeout(retry);
    const mine = new AbortController();
    ctl = mine;
    let ended = false;
    try {
      const r = await api.followEvents(id, last, level.value, mine.signal);
      state.textContent = 'Following: new events appear at the top.';
      await api.readSse(r, (event, data) => {
        if (event === 'event') add(JSON.parse(data) as SandboxEvent);
        else if (event === 'end') ended = true;
      });
    } catch (e) {
      if (mine.signal.aborted || !scope.alive) return;
      sayError(e);
    }
    if (mine.signal.aborted || !scope.alive) return;
    if (ended) {
      state.textContent = 'The sandbox stopped: its log is complete.';
      return;
    }
    state.textContent = 'Disconnected; reconnecting…';
    retry = window.setTimeout(() => void follow(), 2000);
  }

  level.addEventListener('change', () => {
    last = 0;
    tbody.replaceChildren();
    state.textContent = 'Connecting…';
    void follow();
  });
  void follow();
}
