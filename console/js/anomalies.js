// Anomalies: the alerts domed's Sigma rules raised (anomaly.alert), newest first, filtered by level (at
// or above) and agent in the URL; one alert's page (/console/anomalies/<seq>, shareable) shows the
// response taken (the agent.suspended that names the alert), the events that made it fire (read from
// the journal by seq) and the rule (title, id, level, its YAML source when domed has it).
import { api } from './api.js';
import { clear, el, longText, time } from './dom.js';
import { navigate, onUnauthorized } from './app.js';

const LEVELS = ['informational', 'low', 'medium', 'high', 'critical'];

function levelCell(level) {
  return el('td', { class: level === 'critical' || level === 'high' ? 'deny' : '' }, level ?? '');
}

function response(alert) {
  const r = alert.response;
  if (!r) return 'none';
  return `agent ${r.agent} suspended (event #${r.seq}, ${r.cancelled ?? 0} calls cancelled)`;
}

function link(href, text) {
  const a = el('a', { href }, text);
  a.addEventListener('click', (event) => {
    if (event.ctrlKey || event.metaKey || event.shiftKey) return;
    event.preventDefault();
    navigate(href);
  });
  return a;
}

export function anomaliesView(container, parts, params) {
  if (parts[0]) return alertView(container, parts[0]);
  const level = el('select', { id: 'anomalies-level', name: 'level' }, el('option', { value: '' }, 'any'),
    LEVELS.map((l) => el('option', { value: l, selected: params.get('level') === l }, `${l} or above`)));
  const agent = el('input', { id: 'anomalies-agent', name: 'agent', value: params.get('agent') || '', size: 18 });
  const form = el('form', { class: 'filters', role: 'search' },
    el('label', { for: 'anomalies-level' }, 'level', level), el('label', { for: 'anomalies-agent' }, 'agent', agent),
    el('button', { type: 'submit' }, 'Filter'));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const query = new URLSearchParams();
    if (level.value) query.set('level', level.value);
    if (agent.value.trim()) query.set('agent', agent.value.trim());
    navigate(`/console/anomalies${query.toString() ? `?${query}` : ''}`);
  });
  const status = el('p', { id: 'anomalies-status', class: 'muted', role: 'status' }, 'loading…');
  const body = el('tbody', { id: 'anomalies-rows' });
  container.append(el('h1', {}, 'Anomalies'), form, status,
    el('table', {}, el('thead', {}, el('tr', {}, ['alert', 'time', 'level', 'rule', 'agent', 'events', 'correlation', 'response']
      .map((h) => el('th', { scope: 'col' }, h)))), body));
  const query = new URLSearchParams();
  for (const name of ['level', 'agent']) if (params.get(name)) query.set(name, params.get(name));
  api(`anomalies?${query}`).then((answer) => {
    status.textContent = `${answer.alerts.length} alerts (newest first)` +
      (answer.older_dropped ? `; alerts before #${answer.oldest_kept_seq} are in the journal only (dome audit export --type anomaly.alert)` : '');
    for (const a of answer.alerts) {
      const open = () => navigate(`/console/anomalies/${a.seq}`);
      const tr = el('tr', { class: 'clickable', tabindex: 0, 'data-seq': a.seq, 'data-level': a.level },
        el('td', {}, `#${a.seq}`), el('td', {}, time(a.time)), levelCell(a.level), el('td', {}, a.title ?? a.rule_id ?? ''),
        el('td', {}, a.agent ?? ''), el('td', {}, (a.seqs || []).length), el('td', {}, a.correlation?.type ?? ''),
        el('td', { class: a.response ? 'deny response' : 'response' }, response(a)));
      tr.addEventListener('click', open);
      tr.addEventListener('keydown', (key) => { if (key.key === 'Enter') open(); });
      body.append(tr);
    }
  }).catch((error) => { if (!onUnauthorized(error)) status.textContent = error.message; });
  return null;
}

function field(name, ...value) {
  return [el('dt', {}, name), el('dd', {}, ...value)];
}

// What an event is about, in a few words (all of it text).
function summary(e) {
  const parts = [];
  if (e.action) parts.push(e.action);
  if (e.decision) parts.push(e.decision);
  if (e.reason) parts.push(e.reason);
  if (e.object) parts.push(e.object);
  if (e.detector) parts.push(`redacted by ${e.detector}`);
  if (e.exit_code !== undefined) parts.push(`exit ${e.exit_code}`);
  return parts.join(' · ');
}

function alertView(container, seq) {
  const status = el('p', { id: 'alert-status', class: 'muted', role: 'status' }, 'loading…');
  const details = el('section', { id: 'alert' });
  container.append(el('h1', {}, `Alert #${seq}`), el('p', {}, link('/console/anomalies', '← all alerts')), status, details);
  api(`anomalies/${encodeURIComponent(seq)}`).then((answer) => {
    const a = answer.alert;
    const rule = answer.rule;
    status.textContent = `${a.level} alert of rule ${a.title ?? a.rule_id}`;
    const c = a.correlation || {};
    clear(details).append(
      el('dl', { id: 'alert-fields' },
        field('rule', a.title ?? ''), field('rule id', a.rule_id ?? ''), field('level', a.level ?? ''),
        field('tags', (a.tags || []).join(', ')), field('agent', a.agent ?? ''), field('time', time(a.time)),
        field('correlation', `${c.type ?? ''}${c.value !== undefined ? `: ${c.value}` : ''}${c.group ? ` (group ${JSON.stringify(c.group)})` : ''}${c.timespan_s ? ` within ${c.timespan_s} s` : ''}`),
        (a.exec_ids || []).length ? field('executions', a.exec_ids.flatMap((id, i) => [i ? ', ' : '', link(`/console/executions/${encodeURIComponent(id)}`, id)])) : [],
        field('response', el('span', { id: 'alert-response', class: a.response ? 'deny' : '' }, response(a)))),
      el('h2', {}, `Contributing events (${answer.events.length} of ${(a.seqs || []).length})`),
      el('table', {}, el('thead', {}, el('tr', {}, ['seq', 'time', 'type', 'agent', 'tool', 'what', 'execution'].map((h) => el('th', { scope: 'col' }, h)))),
        el('tbody', { id: 'alert-events' }, answer.events.map((e) => el('tr', { 'data-seq': e.seq, 'data-type': e.type },
          el('td', {}, e.seq), el('td', {}, time(e.time)), el('td', {}, e.type), el('td', {}, e.agent ?? ''),
          el('td', {}, e.mcp_tool || e.tool || ''), el('td', {}, summary(e)),
          el('td', {}, e.exec_id ? link(`/console/executions/${encodeURIComponent(e.exec_id)}`, e.exec_id) : ''))))),
      el('h2', {}, 'Rule'),
      rule ? el('div', { id: 'alert-rule' },
        el('dl', {}, field('title', rule.title ?? ''), field('id', rule.id ?? ''), field('level', rule.level ?? ''),
          field('status', rule.status ?? ''), field('kind', rule.kind ?? ''), field('file', rule.file ?? '')),
        rule.source !== null ? longText(rule.source) : el('p', { class: 'muted' }, 'the rule\'s file cannot be read now'))
        : el('p', { id: 'alert-rule', class: 'muted' }, 'the applied rule set has no rule with this id now (dome anomalies list)'));
  }).catch((error) => { if (!onUnauthorized(error)) status.textContent = error.message; });
  return null;
}
