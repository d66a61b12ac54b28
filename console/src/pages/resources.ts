// The server-wide lists: templates (with their aliases), snapshots and
// volumes, each polled while shown.
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

export function templatesPage(main: HTMLElement, scope: Scope): void {
  const [t, tbody] = table('templates', 'Templates', ['Name', 'From', 'Status', 'Built', 'Size', 'Layers', 'Aliases']);
  main.append(h('h1', {}, 'Templates'), t, h('p', {}, 'Build a template with `hutch template build SPEC` or POST /v1/templates (docs/templates.md).'));
  scope.every(5000, async () => {
    const r = await api.listTemplates();
    const aliasesOf = (name: string) =>
      Object.entries(r.aliases ?? {})
        .filter(([, tpl]) => tpl === name)
        .map(([a]) => a)
        .join(', ');
    tbody.replaceChildren(
      ...r.items.map((x) =>
        h(
          'tr',
          {},
          h('th', { scope: 'row' }, x.name),
          h('td', {}, x.from ?? ''),
          h('td', {}, x.status ?? ''),
          h('td', {}, x.built_at ?? ''),
          h('td', {}, x.size_bytes ? fmtBytes(x.size_bytes) : ''),
          h('td', {}, x.layers ?? ''),
          h('td', {}, aliasesOf(x.name)),
        ),
      ),
    );
  });
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
            action(
              'Delete',
              async () => {
                await api.deleteSnapshot(s.id);
                await refresh();
              },
              { 'aria-label': `Delete snapshot ${s.id}`, class: 'danger' },
              `Deleted ${s.id}`,
            ),
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
            action(
              'Delete',
              async () => {
                await api.deleteVolume(v.name);
                await refresh();
              },
              { 'aria-label': `Delete volume ${v.name}`, class: 'danger' },
              `Deleted volume ${v.name}`,
            ),
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
