// The files tab: browse a directory of the sandbox (GET …/fs/list),
// download a file (GET …/fs, through the bearer header into a blob),
// upload into the current directory (PUT …/fs), make a directory, delete.
import * as api from '../api';
import type { FileEntry } from '../api';
import { field, fmtBytes, h } from '../dom';
import { Scope, action, say, sayError } from '../ui';

function join(dir: string, name: string): string {
  return dir.endsWith('/') ? dir + name : `${dir}/${name}`;
}

function parent(dir: string): string {
  const cut = dir.replace(/\/+$/, '').lastIndexOf('/');
  return cut <= 0 ? '/' : dir.slice(0, cut);
}

function fmtTime(t: string | number): string {
  const d = typeof t === 'number' ? new Date(t * 1000) : new Date(t);
  return Number.isNaN(d.getTime()) ? String(t) : d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
}

export function filesTab(panel: HTMLElement, scope: Scope, id: string): void {
  let dir = '/root';
  const pathInput = h('input', { type: 'text', id: 'files-path', value: dir, spellcheck: 'false' });
  const go = h('button', { type: 'submit' }, 'Open');
  const up = h('button', { type: 'button' }, 'Up');
  const refreshBtn = h('button', { type: 'button' }, 'Refresh');
  const nav = h('form', { class: 'files-nav', 'aria-label': 'Directory' }, field('Directory', pathInput), go, up, refreshBtn);
  const upload = h('input', { type: 'file', id: 'files-upload', multiple: true });
  const newDir = h('input', { type: 'text', id: 'files-mkdir', placeholder: 'name' });
  const tbody = h('tbody');
  const table = h(
    'table',
    { class: 'list', id: 'files' },
    h('caption', {}, 'Files'),
    h(
      'thead',
      {},
      h('tr', {}, ['Name', 'Type', 'Size', 'Mode', 'Modified', 'Actions'].map((c) => h('th', { scope: 'col' }, c))),
    ),
    tbody,
  );
  const mkdirForm = h('form', { class: 'inline', 'aria-label': 'New directory' }, field('New directory', newDir), h('button', { type: 'submit' }, 'Create directory'));
  panel.append(h('h2', {}, 'Files'), nav, h('div', { class: 'files-ops' }, field('Upload files', upload), mkdirForm), table);

  async function open(path: string): Promise<void> {
    const entries = await api.listFiles(id, path);
    if (!scope.alive) return;
    dir = path;
    pathInput.value = path;
    entries.sort((a, b) => (a.type === 'dir') === (b.type === 'dir') ? a.name.localeCompare(b.name) : a.type === 'dir' ? -1 : 1);
    tbody.replaceChildren(...entries.map(row));
    table.setAttribute('data-path', path);
  }

  function row(e: FileEntry): HTMLTableRowElement {
    const full = e.path || join(dir, e.name);
    const name =
      e.type === 'dir'
        ? h('button', { type: 'button', class: 'link', 'aria-label': `Open directory ${e.name}` }, `${e.name}/`)
        : h('span', {}, e.name + (e.symlink_target ? ` → ${e.symlink_target}` : ''));
    if (e.type === 'dir') name.addEventListener('click', () => void open(full).catch(sayError));
    const actions = h('td', {});
    if (e.type === 'file')
      actions.append(action('Download', () => download(full, e.name), { 'aria-label': `Download ${e.name}` }));
    actions.append(
      action(
        'Delete',
        async () => {
          await api.deleteFile(id, full);
          say(`Deleted ${full}`);
          await open(dir);
        },
        { 'aria-label': `Delete ${e.name}`, class: 'danger' },
      ),
    );
    return h(
      'tr',
      { 'data-name': e.name },
      h('th', { scope: 'row' }, name),
      h('td', {}, e.type),
      h('td', {}, e.type === 'file' ? fmtBytes(e.size) : ''),
      h('td', {}, (e.mode & 0o7777).toString(8).padStart(4, '0')),
      h('td', {}, fmtTime(e.mtime)),
      actions,
    );
  }

  async function download(path: string, name: string): Promise<void> {
    const r = await api.downloadFile(id, path);
    const url = URL.createObjectURL(await r.blob());
    const a = h('a', { href: url, download: name, hidden: true });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
    say(`Downloaded ${path}`);
  }

  nav.addEventListener('submit', (ev) => {
    ev.preventDefault();
    void open(pathInput.value.trim() || '/').catch(sayError);
  });
  up.addEventListener('click', () => void open(parent(dir)).catch(sayError));
  refreshBtn.addEventListener('click', () => void open(dir).catch(sayError));
  upload.addEventListener('change', async () => {
    const files = [...(upload.files ?? [])];
    try {
      for (const f of files) {
        await api.uploadFile(id, join(dir, f.name), f);
        say(`Uploaded ${join(dir, f.name)} (${fmtBytes(f.size)})`);
      }
      upload.value = '';
      await open(dir);
    } catch (e) {
      sayError(e);
    }
  });
  mkdirForm.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const name = newDir.value.trim();
    if (!name) return;
    try {
      await api.mkdir(id, join(dir, name));
      newDir.value = '';
      await open(dir);
    } catch (e) {
      sayError(e);
    }
  });
  void open(dir).catch(sayError);
}
