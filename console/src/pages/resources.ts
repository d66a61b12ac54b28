// The server-wide lists: templates (with their aliases and builds),
// snapshots and volumes, each polled while shown.
import * as api from '../api';
import { field, fmtBytes, h } from '../dom';
import { Scope, action, say, sayError } from '../ui';

function table(id: string, caption: string, cols: string[]): [HTMLTableElement, HTMLTableSectionElement] {
  const tbody = h('tbody');
  const t = h(
    'table',
    { class: 'list', id },
    h('caption', {}, caption),
    h('thead', {}, h('tr', {}, cols.map((c) => h('th', { scope: 'col' }, c)))),
    tbody,
  );
  return [t, tbody];
}

// A row's Delete button: deletes `what`, says so, redraws the list.
function deleteButton(what: string, del: () => Promise<unknown>, refresh: () => Promise<void>): HTMLButtonElement {
  return action(
    'Delete',
    async () => {
      await del();
      await refresh();
    },
    { 'aria-label': `Delete ${what}`, class: 'danger' },
    `Deleted ${what}`,
  );
}

const EXAMPLE_SPEC = `name = "hello"
from = "base"
run = ["echo built from the console > /etc/motd"]
`;

// Templates: the list with aliases (add, remove), delete, and a build form
// whose progress (steps, the build's log, the end) streams in as it runs.
export function templatesPage(main: HTMLElement, scope: Scope): void {
  const [t, tbody] = table('templates', 'Templates', ['Name', 'From', 'Status', 'Built', 'Size', 'Layers', 'Aliases', 'Actions']);
  const templateNames: string[] = [];

  const name = h('input', { type: 'text', id: 'template-name', placeholder: 'optional', spellcheck: 'false' });
  const spec = h('textarea', { id: 'template-spec', rows: '6', cols: '70', spellcheck: 'false' }, EXAMPLE_SPEC);
  const buildBtn = h('button', { type: 'submit' }, 'Build template');
  const log = h('pre', { class: 'output', id: 'template-log', role: 'log', 'aria-label': 'Build log' });
  const build = h(
    'form',
    { class: 'create', 'aria-labelledby': 'build-title' },
    h('h2', { id: 'build-title' }, 'Build a template'),
    field('Spec (TOML or JSON, docs/templates.md)', spec),
    field('Build as (another name, optional)', name),
    buildBtn,
  );
  build.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    buildBtn.disabled = true;
    log.textContent = '';
    try {
      const r = await api.buildTemplate(name.value.trim(), spec.value);
      await api.readSse(r, (event, data) => {
        const j = JSON.parse(data);
        if (event === 'step') log.append(`[step ${j.index}/${j.of}] ${j.name} ${j.detail ?? ''}\n`);
        else if (event === 'log') log.append(j.text.endsWith('\n') ? j.text : `${j.text}\n`);
        else if (event === 'done')
          log.append(`done: ${j.template?.name} (${j.cached ? 'cached' : `built in ${j.duration_ms} ms`})\n`);
        else if (event === 'error') log.append(`error: ${j.code}: ${j.message}\n${j.log_tail ?? ''}\n`);
        log.scrollTop = log.scrollHeight;
      });
      await refresh();
    } catch (e) {
      sayError(e);
    } finally {
      buildBtn.disabled = false;
    }
  });

  const alias = h('input', { type: 'text', id: 'alias-name', placeholder: 'python:3.12', spellcheck: 'false' });
  const target = h('select', { id: 'alias-template' });
  const aliasForm = h(
    'form',
    { class: 'inline', 'aria-label': 'Set an alias' },
    field('Alias', alias),
    field('For template', target),
    h('button', { type: 'submit' }, 'Set alias'),
  );
  aliasForm.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    try {
      await api.setAlias(alias.value.trim(), target.value);
      say(`Alias ${alias.value.trim()} → ${target.value}`);
      alias.value = '';
      await refresh();
    } catch (e) {
      sayError(e);
    }
  });

  main.append(h('h1', {}, 'Templates'), t, aliasForm, build, log);

  async function refresh(): Promise<void> {
    const r = await api.listTemplates();
    if (!scope.alive) return;
    const aliasesOf = (n: string) =>
      Object.entries(r.aliases ?? {})
        .filter(([, tpl]) => tpl === n)
        .map(([a]) => a);
    tbody.replaceChildren(
      ...r.items.map((x) =>
        h(
          'tr',
          { 'data-name': x.name },
          h('th', { scope: 'row' }, x.name),
          h('td', {}, x.from ?? ''),
          h('td', {}, x.status ?? ''),
          h('td', {}, x.built_at ?? ''),
          h('td', {}, x.size_bytes ? fmtBytes(x.size_bytes) : ''),
          h('td', {}, x.layers ?? ''),
          h(
            'td',
            {},
            aliasesOf(x.name).map((a) =>
              h(
                'span',
                { class: 'alias' },
                a,
                ' ',
                action(
                  '×',
                  async () => {
                    await api.deleteAlias(a);
                    await refresh();
                  },
                  { 'aria-label': `Remove alias ${a}`, class: 'small' },
                  `Removed alias ${a}`,
                ),
              ),
            ),
          ),
          h(
            'td',
            {},
            x.name === 'base'
              ? ''
              : deleteButton(`template ${x.name}`, () => api.deleteTemplate(x.name), refresh),
          ),
        ),
      ),
    );
    const names = r.items.map((x) => x.name);
    if (names.join() !== templateNames.join()) {
      templateNames.splice(0, templateNames.length, ...names);
      const keep = target.value;
      target.replaceChildren(...names.map((n) => h('option', { value: n, selected: n === keep }, n)));
    }
  }
  scope.every(5000, refresh);
}

export function snapshotsPage(main: HTMLElement, scope: Scope): void {
  const [t, tbody] = table('snapshots', 'Snapshots', ['ID', 'Sandbox', 'Template', 'Status', 'Created', 'Size', 'Actions']);
  main.append(h('h1', {}, 'Snapshots'), t);
  const refresh = async () => {
    const items = await api.listSnapshots();
    tbody.replaceChildren(
      ...items.map((s) =>
        h(
          'tr',
          {},
          h('th', { scope: 'row' }, s.id),
          h('td', {}, s.sandbox_id),
          h('td', {}, s.template),
          h('td', {}, s.status),
          h('td', {}, s.created_at),
          h('td', {}, fmtBytes(s.size_bytes)),
          h(
            'td',
            {},
            deleteButton(`snapshot ${s.id}`, () => api.deleteSnapshot(s.id), refresh),
          ),
        ),
      ),
    );
  };
  scope.every(5000, refresh);
}

export function volumesPage(main: HTMLElement, scope: Scope): void {
  const [t, tbody] = table('volumes', 'Volumes', ['Name', 'Size', 'Used', 'Created', 'In use by', 'Actions']);
  const name = h('input', { type: 'text', id: 'volume-name', placeholder: 'proj', spellcheck: 'false' });
  const size = h('input', { type: 'number', id: 'volume-size', min: '16', value: '1024' });
  const form = h(
    'form',
    { class: 'inline', 'aria-label': 'New volume' },
    field('Name', name),
    field('Size (MB)', size),
    h('button', { type: 'submit' }, 'Create volume'),
  );
  main.append(h('h1', {}, 'Volumes'), form, t);
  const refresh = async () => {
    const items = await api.listVolumes();
    tbody.replaceChildren(
      ...items.map((v) =>
        h(
          'tr',
          {},
          h('th', { scope: 'row' }, v.name),
          h('td', {}, `${v.size_mb} MB`),
          h('td', {}, fmtBytes(v.used_bytes)),
          h('td', {}, v.created_at),
          h('td', {}, v.in_use_by.join(', ')),
          h(
            'td',
            {},
            deleteButton(`volume ${v.name}`, () => api.deleteVolume(v.name), refresh),
          ),
        ),
      ),
    );
  };
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    try {
      await api.createVolume(name.value.trim(), Number(size.value));
      say(`Created volume ${name.value.trim()}`);
      name.value = '';
      await refresh();
    } catch (e) {
      sayError(e);
    }
  });
  scope.every(5000, refresh);
}
