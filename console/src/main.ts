// hutch's web console: sign in with an API key, then hash routes:
//   #/sandboxes                 the live list, filters, create
//   #/sandboxes/{id}/{tab}      one sandbox: overview, terminal, files, metrics, processes
//   #/templates  #/snapshots  #/volumes
import '@xterm/xterm/css/xterm.css';
import './style.css';

import { ApiError, listSandboxes } from './api';
import { clear, field, h } from './dom';
import { sandboxPage } from './pages/sandbox';
import { sandboxesPage } from './pages/sandboxes';
import { snapshotsPage, templatesPage, volumesPage } from './pages/resources';
import { currentKey, signIn, signOut } from './session';
import { Scope, say, sayError, statusRegions } from './ui';

const app = document.getElementById('app')!;
let scope: Scope | null = null;

function signInPage(main: HTMLElement): void {
  const input = h('input', {
    type: 'password',
    id: 'api-key',
    name: 'api-key',
    autocomplete: 'off',
    required: true,
    spellcheck: 'false',
  });
  const err = h('p', { role: 'alert', class: 'error' });
  const form = h(
    'form',
    { class: 'signin', 'aria-labelledby': 'signin-title' },
    h('h1', { id: 'signin-title' }, 'hutch console'),
    h('p', {}, 'Paste an API key. It is kept in this tab only (memory and session storage) and sent as a bearer header.'),
    field('API key', input),
    h('button', { type: 'submit' }, 'Sign in'),
    err,
  );
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const k = input.value.trim();
    if (!k) return;
    signIn(k);
    try {
      await listSandboxes({ status: 'running' });
      input.value = '';
      if (!location.hash || location.hash === '#/' || location.hash === '#/signin') location.hash = '#/sandboxes';
      else render();
    } catch (e) {
      signOut();
      err.textContent = e instanceof ApiError && e.status === 401 ? 'That key was refused (401).' : String(e);
    }
  });
  main.append(form);
  input.focus();
}

function nav(): HTMLElement {
  const link = (href: string, text: string) => {
    const current = location.hash.startsWith(href);
    return h('li', {}, h('a', { href, 'aria-current': current ? 'page' : false }, text));
  };
  const out = h('button', { type: 'button', class: 'signout' }, 'Sign out');
  out.addEventListener('click', () => {
    signOut();
    location.hash = '#/signin';
    render();
  });
  return h(
    'nav',
    { 'aria-label': 'Main' },
    h('span', { class: 'brand' }, 'hutch'),
    h(
      'ul',
      {},
      link('#/sandboxes', 'Sandboxes'),
      link('#/templates', 'Templates'),
      link('#/snapshots', 'Snapshots'),
      link('#/volumes', 'Volumes'),
    ),
    out,
  );
}

function render(): void {
  scope?.end();
  scope = new Scope();
  clear(app);
  const main = h('main', { id: 'main' });
  if (!currentKey()) {
    app.append(main, ...statusRegions());
    signInPage(main);
    return;
  }
  app.append(nav(), main, h('footer', {}, ...statusRegions()));
  const parts = location.hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  try {
    switch (parts[0]) {
      case 'templates':
        templatesPage(main, scope);
        break;
      case 'snapshots':
        snapshotsPage(main, scope);
        break;
      case 'volumes':
        volumesPage(main, scope);
        break;
      case 'sandboxes':
        if (parts[1]) {
          sandboxPage(main, scope, parts[1], parts[2] || 'overview');
          break;
        }
        sandboxesPage(main, scope);
        break;
      default:
        location.replace('#/sandboxes');
    }
  } catch (e) {
    sayError(e);
  }
}

// A key the server refuses (revoked, or the server restarted with others)
// sends the tab back to sign in.
window.addEventListener('hutch:unauthorized', () => {
  signOut();
  render();
  say('The key was refused: sign in again.');
});

let lastRoute = '';
window.addEventListener('hashchange', () => {
  // A tab change inside one sandbox page is the page's own business.
  const route = location.hash.split('/').slice(0, 3).join('/');
  if (route === lastRoute && location.hash.startsWith('#/sandboxes/')) return;
  lastRoute = route;
  render();
});
lastRoute = location.hash.split('/').slice(0, 3).join('/');
render();
