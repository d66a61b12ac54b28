// Percentiles and the table row the latency scripts print
// (e2b/code_interpreter_latency.mjs, mcp/mcp_latency.mjs).
export function pct(xs, p) {
  const s = [...xs].sort((a, b) => a - b);
  const k = (s.length - 1) * p;
  const lo = Math.floor(k), hi = Math.min(lo + 1, s.length - 1);
  return s[lo] + (s[hi] - s[lo]) * (k - lo);
}

export function row(name, xs, width = 44) {
  console.log(`${name.padEnd(width)} ${pct(xs, 0.5).toFixed(1).padStart(8)} ${pct(xs, 0.99).toFixed(1).padStart(8)}  (n=${xs.length})`);
}
