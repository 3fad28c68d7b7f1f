// Overview: calls, decisions, kernel denials, redactions and p50/p99 latency per minute over the last
// 24 hours (domed samples /metrics once a minute and keeps 1,440 samples; the last one is the minute in
// progress), drawn on canvases; the numbers are in a table too.
import { api } from './api.js';
import { el } from './dom.js';
import { onUnauthorized } from './app.js';

const SERIES = [['calls', 'calls'], ['allow', 'allowed'], ['deny', 'denied'], ['denials', 'kernel denials'], ['redactions', 'redactions'],
  ['p50_ms', 'p50 latency (ms)'], ['p99_ms', 'p99 latency (ms)']];

function chart(values, label) {
  const width = 720;
  const height = 60;
  const canvas = el('canvas', { width, height, role: 'img', 'aria-label': `${label} per minute: most ${Math.max(0, ...values)}, last ${values[values.length - 1] ?? 0}` });
  const context = canvas.getContext('2d');
  const most = Math.max(1, ...values);
  const step = width / Math.max(60, values.length);
  context.fillStyle = '#0b5cad';
  values.forEach((v, i) => {
    if (!v) return;
    const h = Math.max(1, Math.round((v / most) * (height - 4)));
    context.fillRect(Math.floor(i * step), height - h, Math.max(1, Math.floor(step) - 1), h);
  });
  context.fillStyle = '#d0d7de';
  context.fillRect(0, height - 1, width, 1);
  return canvas;
}

export function overviewView(container) {
  const status = el('p', { id: 'overview-status', class: 'muted', role: 'status' }, 'loading…');
  const totals = el('p', { id: 'overview-totals' });
  const charts = el('div', { id: 'overview-charts' });
  container.append(el('h1', {}, 'Overview'), status, totals, charts);
  let timer = 0;
  const load = () => api('overview').then((answer) => {
    const samples = answer.samples;
    const t = answer.totals;
    status.textContent = `${samples.length} minute(s) since ${new Date(answer.since * 1000).toISOString().replace(/\.\d+Z$/, 'Z')} (one sample a minute, 24 h kept; the last is the minute in progress)`;
    totals.textContent = `${t.calls} calls, ${t.allow} allowed, ${t.deny} denied, ${t.denials} kernel denials, ${t.redactions} redactions`;
    charts.replaceChildren(...SERIES.map(([key, label]) => el('figure', { 'data-series': key },
      el('figcaption', {}, label), chart(samples.map((s) => (typeof s[key] === 'number' ? s[key] : 0)), label))));
  }).catch((error) => { if (!onUnauthorized(error)) status.textContent = error.message; });
  load();
  timer = setInterval(load, 10000);
  return () => clearInterval(timer);
}
