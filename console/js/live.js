// Live: the audit stream as it is journalled (SSE from /console/api/events), filtered by agent, tool,
// event type and decision (kept in the URL), paused and resumed; a row opens its execution.
// Rendering is batched once a frame and the table keeps the newest MAX_ROWS rows: at high rates the
// page shows the latest events and says how many it skipped (sampling), memory stays bounded.
import { el, time } from './dom.js';
import { navigate } from './app.js';

const MAX_ROWS = 500;
const FILTERS = ['agent', 'tool', 'type', 'decision'];

export function liveView(container, parts, params) {
  const inputs = {};
  const form = el('form', { class: 'filters', role: 'search' },
    FILTERS.map((name) => {
      inputs[name] = el('input', { id: `live-${name}`, name, value: params.get(name) || '', size: 14 });
      return el('label', { for: `live-${name}` }, name, inputs[name]);
    }),
    el('button', { type: 'submit' }, 'Apply'));
  const pause = el('button', { type: 'button', id: 'live-pause', 'aria-pressed': 'false' }, 'Pause');
  const status = el('span', { id: 'live-status', class: 'muted' }, 'connecting…');
  const body = el('tbody', { id: 'live-rows' });
  const table = el('table', { id: 'live-table' },
    el('caption', { class: 'muted' }, 'Newest first; click a row to open its execution'),
    el('thead', {}, el('tr', {}, ['time', 'seq', 'type', 'agent', 'tool', 'decision', 'execution'].map((h) => el('th', { scope: 'col' }, h)))),
    body);
  container.append(el('h1', {}, 'Live'), form, el('p', {}, pause, ' ', status), table);

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const query = new URLSearchParams();
    for (const name of FILTERS) if (inputs[name].value.trim()) query.set(name, inputs[name].value.trim());
    navigate(`/console/live${query.toString() ? `?${query}` : ''}`);
  });

  let paused = false;
  let queue = [];
  let received = 0;
  let skipped = 0;
  let frame = 0;
  const query = new URLSearchParams();
  for (const name of FILTERS) if (params.get(name)) query.set(name, params.get(name));
  const source = new EventSource(`/console/api/events${query.toString() ? `?${query}` : ''}`);
  const describe = () => {
    status.textContent = `${paused ? 'paused' : 'live'}: ${received} events received` +
      (paused ? `, ${queue.length} waiting` : '') + (skipped ? `, ${skipped} not shown (sampled: only the newest ${MAX_ROWS} are kept)` : '');
  };
  source.addEventListener('open', describe);
  source.addEventListener('error', () => { status.textContent = 'disconnected: reconnecting…'; });
  source.addEventListener('event', (message) => {
    let event;
    try { event = JSON.parse(message.data); } catch { return; }
    received++;
    queue.push(event);
    if (queue.length > MAX_ROWS) { skipped += queue.length - MAX_ROWS; queue = queue.slice(-MAX_ROWS); }
    if (!paused && !frame) frame = requestAnimationFrame(flush);
  });

  function row(event) {
    const decision = typeof event.decision === 'string' ? event.decision : '';
    const tr = el('tr', { 'data-seq': event.seq, 'data-type': event.type },
      el('td', {}, time(event.time)), el('td', {}, event.seq), el('td', {}, event.type),
      el('td', {}, event.agent ?? ''), el('td', {}, event.mcp_tool ?? event.tool ?? ''),
      el('td', { class: decision === 'deny' ? 'deny' : decision === 'allow' ? 'allow' : '' }, decision),
      el('td', {}, event.exec_id ?? ''));
    if (typeof event.exec_id === 'string' && event.exec_id) {
      tr.classList.add('clickable');
      tr.tabIndex = 0;
      const open = () => navigate(`/console/executions/${encodeURIComponent(event.exec_id)}`);
      tr.addEventListener('click', open);
      tr.addEventListener('keydown', (key) => { if (key.key === 'Enter') open(); });
    }
    return tr;
  }

  function flush() {
    frame = 0;
    if (paused) return; /* a frame asked for before the pause shows nothing that came after it */
    const batch = queue;
    queue = [];
    const fragment = document.createDocumentFragment();
    for (let i = batch.length - 1; i >= 0; i--) fragment.append(row(batch[i]));
    body.prepend(fragment);
    while (body.rows.length > MAX_ROWS) body.lastElementChild.remove();
    describe();
  }

  pause.addEventListener('click', () => {
    paused = !paused;
    pause.textContent = paused ? 'Resume' : 'Pause';
    pause.setAttribute('aria-pressed', String(paused));
    if (!paused && queue.length && !frame) frame = requestAnimationFrame(flush);
    describe();
  });
  return () => { source.close(); if (frame) cancelAnimationFrame(frame); };
}
