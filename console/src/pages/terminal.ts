// The terminal tab: xterm.js over GET /v1/sandboxes/{id}/pty (a WebSocket;
// docs/api.md "Terminal"). The socket is opened with a single-use ticket
// from POST …/pty/ticket, never with the key. Keystrokes go as binary
// messages, the size as a text message {"resize":{cols,rows}} whenever
// the panel (and so the fitted terminal) changes size.
import { FitAddon } from '@xterm/addon-fit';
import { Terminal } from '@xterm/xterm';
import * as api from '../api';
import { h } from '../dom';
import { Scope, sayError } from '../ui';

export function terminalTab(panel: HTMLElement, scope: Scope, id: string): void {
  const host = h('div', { class: 'terminal', id: 'terminal', role: 'region', 'aria-label': 'Terminal' });
  const state = h('span', { id: 'terminal-state', 'aria-live': 'polite' }, 'connecting…');
  const reconnect = h('button', { type: 'button', hidden: true }, 'Reconnect');
  panel.append(h('h2', {}, 'Terminal'), h('p', {}, 'Connection: ', state, ' ', reconnect), host);

  const term = new Terminal({ cursorBlink: true, fontSize: 14, scrollback: 5000, screenReaderMode: false });
  const fit = new FitAddon();
  term.loadAddon(fit);
  term.open(host);
  fit.fit();
  let ws: WebSocket | null = null;
  const enc = new TextEncoder();

  // The size the shell was told, as `stty size` prints it (the browser test reads it).
  const sendResize = () => {
    host.dataset.size = `${term.rows} ${term.cols}`;
    if (ws?.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ resize: { cols: term.cols, rows: term.rows } }));
  };
  term.onData((d) => {
    if (ws?.readyState === WebSocket.OPEN) ws.send(enc.encode(d));
  });
  term.onResize(sendResize);
  const ro = new ResizeObserver(() => fit.fit());
  ro.observe(host);

  async function connect(): Promise<void> {
    reconnect.hidden = true;
    state.textContent = 'connecting…';
    const ticket = await api.ptyTicket(id);
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    const q = new URLSearchParams({ cols: String(term.cols), rows: String(term.rows), ticket });
    const sock = new WebSocket(`${proto}//${location.host}/v1/sandboxes/${encodeURIComponent(id)}/pty?${q}`);
    sock.binaryType = 'arraybuffer';
    ws = sock;
    sock.onopen = () => {
      host.dataset.size = `${term.rows} ${term.cols}`;
      state.textContent = 'connected';
      term.focus();
    };
    sock.onmessage = (ev) => {
      if (typeof ev.data === 'string') {
        try {
          const m = JSON.parse(ev.data);
          if (m.exit) term.write(`\r\n[shell exited with ${m.exit.exit_code}]\r\n`);
          if (m.error) term.write(`\r\n[${m.error.code}: ${m.error.message}]\r\n`);
        } catch {
          // not ours
        }
        return;
      }
      term.write(new Uint8Array(ev.data as ArrayBuffer));
    };
    sock.onclose = () => {
      if (ws !== sock) return;
      state.textContent = 'closed';
      reconnect.hidden = !scope.alive;
    };
  }
  reconnect.addEventListener('click', () => void connect().catch(sayError));
  void connect().catch((e) => {
    state.textContent = 'failed';
    reconnect.hidden = false;
    sayError(e);
  });

  scope.onEnd(() => {
    ro.disconnect();
    const sock = ws;
    ws = null;
    sock?.close();
    term.dispose();
  });
}
