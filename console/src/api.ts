// The console's client of hutchd's /v1 API (docs/api.md): same origin,
// bearer key on every call, JSON errors turned into ApiError.
import { currentKey } from './session';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly requestId: string,
  ) {
    super(message);
  }
}

export interface Sandbox {
  id: string;
  template: string;
  status: string;
  created_at: string;
  expires_at: string;
  metadata: Record<string, string>;
  cpu: number;
  memory_mb: number;
  disk_mb: number;
  driver: string;
  reason?: string;
  paused_by?: string;
  network?: { mode: string };
  [k: string]: unknown;
}

export interface Metrics {
  cpu_seconds: number;
  memory_bytes: number;
  memory_peak_bytes: number;
  pids: number;
  oom_kills: number;
  disk_used_bytes: number;
  disk_limit_bytes: number;
  net_rx_bytes: number;
  net_tx_bytes: number;
  uptime_ms: number;
}

export interface FileEntry {
  name: string;
  path: string;
  type: 'file' | 'dir' | 'symlink' | 'other';
  size: number;
  mode: number;
  mtime: string | number;
  symlink_target?: string;
}

export interface Process {
  pid: number;
  cmd: string | null;
  argv: string[];
  background: boolean;
  running: boolean;
  status: string;
  exit_code: number | null;
  signal: number | null;
  started_at: string;
  output_bytes?: number;
}

export interface Template {
  name: string;
  from?: string;
  status?: string;
  built_at?: string;
  size_bytes?: number;
  layers?: number;
  alias?: string;
}

export interface Snapshot {
  id: string;
  sandbox_id: string;
  template: string;
  status: string;
  created_at: string;
  size_bytes: number;
}

export interface Volume {
  name: string;
  size_mb: number;
  created_at: string;
  used_bytes: number;
  in_use_by: string[];
}

function headers(extra: Record<string, string> = {}): Record<string, string> {
  const k = currentKey();
  return k ? { Authorization: `Bearer ${k}`, ...extra } : extra;
}

async function fail(r: Response): Promise<never> {
  let code = 'http_' + r.status;
  let message = r.statusText || `HTTP ${r.status}`;
  try {
    const j = await r.json();
    if (typeof j.code === 'string') code = j.code;
    if (typeof j.message === 'string') message = j.message;
  } catch {
    // not JSON
  }
  throw new ApiError(r.status, code, message, r.headers.get('X-Request-Id') ?? '');
}

export async function call<T = unknown>(method: string, path: string, body?: unknown): Promise<T> {
  const init: RequestInit = { method, headers: headers(), cache: 'no-store' };
  if (body !== undefined) {
    init.headers = headers({ 'Content-Type': 'application/json' });
    init.body = JSON.stringify(body);
  }
  const r = await fetch(path, init);
  if (!r.ok) return fail(r);
  if (r.status === 204) return undefined as T;
  return (await r.json()) as T;
}

export async function raw(method: string, path: string, body?: BodyInit): Promise<Response> {
  const r = await fetch(path, { method, headers: headers(), body, cache: 'no-store' });
  if (!r.ok) return fail(r);
  return r;
}

const enc = encodeURIComponent;
const sbPath = (id: string) => `/v1/sandboxes/${enc(id)}`;

export interface ListFilter {
  status?: string;
  metadata?: Record<string, string>;
}

// Every page of the list (limit 1000 each).
export async function listSandboxes(f: ListFilter = {}): Promise<Sandbox[]> {
  const all: Sandbox[] = [];
  let cursor: string | null = null;
  do {
    const q = new URLSearchParams({ limit: '1000' });
    if (f.status) q.set('status', f.status);
    for (const [k, v] of Object.entries(f.metadata ?? {})) q.set(`metadata.${k}`, v);
    if (cursor) q.set('cursor', cursor);
    const page: { items: Sandbox[]; next_cursor: string | null } = await call('GET', `/v1/sandboxes?${q}`);
    all.push(...page.items);
    cursor = page.next_cursor;
  } while (cursor);
  return all;
}

// GET /v1/sandboxes?watch=true: the list, then its changes, as SSE.
export function watchSandboxes(f: ListFilter, signal: AbortSignal): Promise<Response> {
  const q = new URLSearchParams({ watch: 'true' });
  if (f.status) q.set('status', f.status);
  for (const [k, v] of Object.entries(f.metadata ?? {})) q.set(`metadata.${k}`, v);
  return fetch(`/v1/sandboxes?${q}`, { headers: headers(), signal, cache: 'no-store' }).then((r) =>
    r.ok ? r : fail(r),
  );
}

export const getSandbox = (id: string) => call<Sandbox>('GET', sbPath(id));
export const createSandbox = (body: Record<string, unknown>) => call<Sandbox>('POST', '/v1/sandboxes', body);
export const deleteSandbox = (id: string) => call<void>('DELETE', sbPath(id));
export const pauseSandbox = (id: string) => call<Sandbox>('POST', `${sbPath(id)}/pause`);
export const resumeSandbox = (id: string) => call<Sandbox>('POST', `${sbPath(id)}/resume`);
export const setTtl = (id: string, ttl_seconds: number) => call<Sandbox>('POST', `${sbPath(id)}/ttl`, { ttl_seconds });
export const sandboxMetrics = (id: string) => call<Metrics>('GET', `${sbPath(id)}/metrics`);

export async function listFiles(id: string, path: string): Promise<FileEntry[]> {
  const r = await call<{ entries: FileEntry[] }>('GET', `${sbPath(id)}/fs/list?path=${enc(path)}&depth=1`);
  return r.entries;
}
export const deleteFile = (id: string, path: string) =>
  call<void>('DELETE', `${sbPath(id)}/fs?path=${enc(path)}&recursive=true`);
export const mkdir = (id: string, path: string) => call<FileEntry>('POST', `${sbPath(id)}/fs/mkdir`, { path });
export const uploadFile = (id: string, path: string, body: Blob) => raw('PUT', `${sbPath(id)}/fs?path=${enc(path)}`, body);
export const downloadFile = (id: string, path: string) => raw('GET', `${sbPath(id)}/fs?path=${enc(path)}`);

export async function listProcesses(id: string): Promise<Process[]> {
  return (await call<{ items: Process[] }>('GET', `${sbPath(id)}/processes`)).items;
}
export const startProcess = (id: string, cmd: string) => call<Process>('POST', `${sbPath(id)}/processes`, { cmd });
export const signalProcess = (id: string, pid: number, signal: string) =>
  call<unknown>('POST', `${sbPath(id)}/processes/${pid}/signal`, { signal });
export const processStream = (id: string, pid: number, signal: AbortSignal) =>
  fetch(`${sbPath(id)}/processes/${pid}/stream?from=0`, { headers: headers(), signal, cache: 'no-store' });

// A sandbox's event log (docs/api.md "Events").
export interface SandboxEvent {
  seq: number;
  time: string;
  level: 'debug' | 'info' | 'warn' | 'error';
  type: string;
  message: string;
  fields: Record<string, unknown>;
}
// GET …/events?follow=true: the log from `after` on, then new events, as SSE.
export function followEvents(id: string, after: number, level: string, signal: AbortSignal): Promise<Response> {
  const q = new URLSearchParams({ follow: 'true', after: String(after), level });
  return fetch(`${sbPath(id)}/events?${q}`, { headers: headers(), signal, cache: 'no-store' }).then((r) =>
    r.ok ? r : fail(r),
  );
}

// A single-use ticket for the terminal's WebSocket: the key itself never
// goes into the socket's URL.
export async function ptyTicket(id: string): Promise<string> {
  return (await call<{ ticket: string }>('POST', `${sbPath(id)}/pty/ticket`)).ticket;
}

export async function listTemplates(): Promise<{ items: Template[]; aliases: Record<string, string> }> {
  return call('GET', '/v1/templates');
}
// Builds a template from `spec` (TOML or JSON, docs/templates.md), its
// progress as SSE (step, log, done, error).
export function buildTemplate(name: string, spec: string): Promise<Response> {
  const q = name ? `?name=${enc(name)}` : '';
  return fetch(`/v1/templates${q}`, {
    method: 'POST',
    headers: headers({ Accept: 'text/event-stream' }),
    body: spec,
    cache: 'no-store',
  }).then((r) => (r.ok ? r : fail(r)));
}
export const deleteTemplate = (name: string) => call<void>('DELETE', `/v1/templates/${enc(name)}`);
export const setAlias = (alias: string, template: string) =>
  call<unknown>('PUT', `/v1/template-aliases/${enc(alias)}`, { template });
export const deleteAlias = (alias: string) => call<void>('DELETE', `/v1/template-aliases/${enc(alias)}`);

export async function listSnapshots(): Promise<Snapshot[]> {
  return (await call<{ items: Snapshot[] }>('GET', '/v1/snapshots')).items;
}
export const deleteSnapshot = (id: string) => call<void>('DELETE', `/v1/snapshots/${enc(id)}`);
export const snapshotSandbox = (id: string) => call<Snapshot>('POST', `${sbPath(id)}/snapshots`);
export async function listVolumes(): Promise<Volume[]> {
  return (await call<{ volumes: Volume[] }>('GET', '/v1/volumes')).volumes;
}
export const createVolume = (name: string, size_mb: number) => call<Volume>('POST', '/v1/volumes', { name, size_mb });
export const deleteVolume = (name: string) => call<void>('DELETE', `/v1/volumes/${enc(name)}`);

// Reads an SSE answer of a fetch, event by event.
export async function readSse(r: Response, onEvent: (event: string, data: string) => void): Promise<void> {
  if (!r.body) return;
  const reader = r.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += dec.decode(value, { stream: true });
    let cut: number;
    while ((cut = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      let event = 'message';
      const data: string[] = [];
      for (const line of block.split('\n')) {
        if (line.startsWith('event:')) event = line.slice(6).trim();
        else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
      }
      if (data.length) onEvent(event, data.join('\n'));
    }
  }
}
