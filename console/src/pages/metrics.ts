// The metrics tab: GET …/metrics every 2 s, kept for the last 10 minutes,
// drawn as SVG line charts (CPU %, memory, network bytes a second) with
// the latest figures in a table beside them.
import * as api from '../api';
import type { Metrics } from '../api';
import { fmtBytes, h, svg } from '../dom';
import { Scope } from '../ui';

const EVERY_MS = 2000;
const KEEP = 300;

interface Sample {
  t: number;
  m: Metrics;
}

interface Series {
  title: string;
  floor: number; // the least top of the chart's scale (an idle sandbox draws a flat line low, not noise full-height)
  unit: (v: number) => string;
  value: (prev: Sample, cur: Sample) => number;
}

const SERIES: Series[] = [
  {
    title: 'CPU',
    floor: 5,
    unit: (v) => `${v.toFixed(1)}%`,
    value: (p, c) => (100 * (c.m.cpu_seconds - p.m.cpu_seconds)) / Math.max(0.001, (c.t - p.t) / 1000),
  },
  { title: 'Memory', floor: 1 << 20, unit: (v) => fmtBytes(v), value: (_p, c) => c.m.memory_bytes },
  {
    title: 'Network in',
    floor: 1024,
    unit: (v) => `${fmtBytes(v)}/s`,
    value: (p, c) => Math.max(0, c.m.net_rx_bytes - p.m.net_rx_bytes) / Math.max(0.001, (c.t - p.t) / 1000),
  },
  {
    title: 'Network out',
    floor: 1024,
    unit: (v) => `${fmtBytes(v)}/s`,
    value: (p, c) => Math.max(0, c.m.net_tx_bytes - p.m.net_tx_bytes) / Math.max(0.001, (c.t - p.t) / 1000),
  },
];

const W = 480;
const H = 140;

function chart(s: Series, samples: Sample[]): HTMLElement {
  const pts: [number, number][] = [];
  for (let i = 1; i < samples.length; i++) pts.push([samples[i].t, s.value(samples[i - 1], samples[i])]);
  const last = pts.length ? pts[pts.length - 1][1] : null;
  const peak = Math.max(0, ...pts.map(([, v]) => v));
  const max = Math.max(s.floor, peak);
  const t0 = pts.length ? pts[0][0] : 0;
  const t1 = pts.length ? pts[pts.length - 1][0] : 1;
  const x = (t: number) => (t1 > t0 ? ((t - t0) / (t1 - t0)) * (W - 10) + 5 : W / 2);
  const y = (v: number) => H - 5 - (v / max) * (H - 25);
  const d = pts.map(([t, v], i) => `${i ? 'L' : 'M'}${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(' ');
  const label = `${s.title}: ${last === null ? 'no data yet' : `now ${s.unit(last)}, peak ${s.unit(peak)}`} over the last ${pts.length} samples`;
  const pic = svg(
    'svg',
    { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': label, class: 'chart', 'data-points': String(pts.length) },
    svg('rect', { x: '0', y: '0', width: String(W), height: String(H), class: 'chart-bg' }),
    svg('text', { x: '6', y: '14', class: 'chart-label' }, `${s.title} · scale ${s.unit(max)}`),
    pts.length ? svg('path', { d, class: 'chart-line', fill: 'none' }) : null,
  );
  return h('figure', { class: 'chart-box' }, pic, h('figcaption', {}, last === null ? `${s.title}: —` : `${s.title}: ${s.unit(last)}`));
}

export function metricsTab(panel: HTMLElement, scope: Scope, id: string): void {
  const samples: Sample[] = [];
  const charts = h('div', { class: 'charts', id: 'charts' });
  const table = h('table', { class: 'list', id: 'metrics-now' }, h('caption', {}, 'Now'));
  panel.append(h('h2', {}, 'Metrics'), charts, table);
  scope.every(EVERY_MS, async () => {
    const m = await api.sandboxMetrics(id);
    samples.push({ t: performance.now(), m });
    if (samples.length > KEEP) samples.shift();
    charts.replaceChildren(...SERIES.map((s) => chart(s, samples)));
    const row = (k: string, v: string) => h('tr', {}, h('th', { scope: 'row' }, k), h('td', {}, v));
    table.replaceChildren(
      h('caption', {}, 'Now'),
      h(
        'tbody',
        {},
        row('CPU time', `${m.cpu_seconds.toFixed(2)} s`),
        row('Memory', fmtBytes(m.memory_bytes)),
        row('Memory peak', fmtBytes(m.memory_peak_bytes)),
        row('Processes', String(m.pids)),
        row('OOM kills', String(m.oom_kills)),
        row('Disk', `${fmtBytes(m.disk_used_bytes)} of ${fmtBytes(m.disk_limit_bytes)}`),
        row('Network in / out', `${fmtBytes(m.net_rx_bytes)} / ${fmtBytes(m.net_tx_bytes)}`),
        row('Uptime', `${Math.round(m.uptime_ms / 1000)} s`),
      ),
    );
  });
}
