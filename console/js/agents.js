// Agents: status, capabilities, the last hour's activity (the calls per minute, the Cedar decisions on
// mcp:call, drawn on a canvas; allowed and denied calls, executions, failures, kernel denials, redactions), quotas; suspend and resume for the operator role only (the
// auditor sees no such buttons, and domed refuses the request anyway).
import { api } from './api.js';
import { clear, el, time } from './dom.js';
import { onUnauthorized, session } from './app.js';

export function agentsView(container) {
  const status = el('p', { id: 'agents-status', class: 'muted', role: 'status' }, 'loading…');
  const body = el('tbody', { id: 'agents-rows' });
  const quotas = el('section', { id: 'quotas' });
  container.append(el('h1', {}, 'Agents'), status,
    el('table', {}, el('thead', {}, el('tr', {}, ['agent', 'status', 'capabilities', 'last hour (calls per minute)', 'allowed', 'denied', 'executions', 'failed', 'kernel denials', 'redactions', 'updated', session.role === 'operator' ? 'action' : null]
      .filter(Boolean).map((h) => el('th', { scope: 'col' }, h)))), body), quotas);
  const load = () => api('agents').then((answer) => {
    clear(body);
    status.textContent = `${answer.agents.length} agents`;
    for (const agent of answer.agents) {
      const a = answer.activity?.[agent.name] ?? { calls_per_minute: new Array(60).fill(0), allow: 0, deny: 0, executions: 0, failed: 0, denials: 0, redactions: 0 };
      const cells = [el('td', {}, agent.name), el('td', { class: agent.status === 'active' ? 'allow' : 'deny' }, agent.status),
        el('td', {}, (agent.capabilities || []).join(', ')), el('td', {}, chart(a.calls_per_minute, agent.name)),
        el('td', { class: 'activity-allow' }, a.allow), el('td', { class: 'activity-deny' }, a.deny),
        el('td', { class: 'activity-executions' }, a.executions), el('td', { class: 'activity-failed' }, a.failed),
        el('td', { class: 'activity-denials' }, a.denials), el('td', { class: 'activity-redactions' }, a.redactions),
        el('td', {}, agent.updated ? time(new Date(agent.updated * 1000).toISOString()) : '')];
      if (session.role === 'operator' && agent.status !== 'revoked') {
        const verb = agent.status === 'suspended' ? 'resume' : 'suspend';
        const button = el('button', { type: 'button', class: verb, 'data-agent': agent.name }, verb === 'suspend' ? 'Suspend' : 'Resume');
        button.addEventListener('click', async () => {
          button.disabled = true;
          try {
            await api(`agents/${encodeURIComponent(agent.name)}/${verb}`, { method: 'POST' });
            status.textContent = `${agent.name}: ${verb === 'suspend' ? 'suspended' : 'resumed'}`;
            await load();
            status.textContent = `${agent.name}: ${verb === 'suspend' ? 'suspended' : 'resumed'}`;
          } catch (error) {
            if (!onUnauthorized(error)) status.textContent = error.message;
            button.disabled = false;
          }
        });
        cells.push(el('td', {}, button));
      } else if (session.role === 'operator') {
        cells.push(el('td', {}));
      }
      body.append(el('tr', { 'data-agent': agent.name }, cells));
    }
    clear(quotas).append(el('h2', {}, 'Quotas by capability'),
      el('table', {}, el('thead', {}, el('tr', {}, ['capability', 'memory', 'cpus', 'pids', 'timeout (ms)', 'egress', 'concurrency'].map((h) => el('th', { scope: 'col' }, h)))),
        el('tbody', {}, Object.entries(answer.quotas || {}).map(([name, q]) => el('tr', {},
          el('td', {}, name), el('td', {}, q.memory_bytes), el('td', {}, q.cpus), el('td', {}, q.pids), el('td', {}, q.timeout_ms),
          el('td', {}, String(q.egress)), el('td', {}, q.concurrency || 'max_jails'))))));
  }).catch((error) => { if (!onUnauthorized(error)) status.textContent = error.message; });
  load();
  return null;
}

// 60 bars, one a minute, oldest first; the numbers are also in the canvas's label for screen readers.
function chart(perMinute, name) {
  const canvas = el('canvas', { width: 180, height: 32, role: 'img',
    'aria-label': `${name}: calls per minute over the last hour, most ${Math.max(0, ...perMinute)}, now ${perMinute[59] ?? 0}` });
  const context = canvas.getContext('2d');
  const most = Math.max(1, ...perMinute);
  context.fillStyle = '#0b5cad';
  perMinute.forEach((count, i) => {
    const height = Math.round((count / most) * 30);
    if (count) context.fillRect(i * 3, 32 - Math.max(1, height), 2, Math.max(1, height));
  });
  context.fillStyle = '#d0d7de';
  context.fillRect(0, 31, 180, 1);
  return canvas;
}
