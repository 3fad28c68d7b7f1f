// Rules: the stored versions, the line diff between two of them, the simulation of a candidate
// (pasted or uploaded) against the recorded requests: its DecisionDiffs (`dome rules simulate`), and the
// shadow report when a shadow version runs beside the active one (`dome rules shadow`: the summary
// domed keeps, its flips by tool, agent and policy, and its latest DecisionDiffs, in the same rows).
import { api } from './api.js';
import { clear, el, time } from './dom.js';
import { navigate, onUnauthorized } from './app.js';

// Longest-common-subsequence line diff (bounded: rules files are small; beyond 4000 lines each, the
// texts are shown side by side instead).
function diffLines(a, b) {
  if (a.length > 4000 || b.length > 4000) return null;
  const table = Array.from({ length: a.length + 1 }, () => new Uint16Array(b.length + 1));
  for (let i = a.length - 1; i >= 0; i--)
    for (let j = b.length - 1; j >= 0; j--)
      table[i][j] = a[i] === b[j] ? table[i + 1][j + 1] + 1 : Math.max(table[i + 1][j], table[i][j + 1]);
  const out = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    if (i < a.length && j < b.length && a[i] === b[j]) { out.push([' ', a[i]]); i++; j++; }
    else if (j < b.length && (i === a.length || table[i][j + 1] >= table[i + 1][j])) out.push(['+', b[j++]]);
    else out.push(['-', a[i++]]);
  }
  return out;
}

export function rulesView(container, parts, params) {
  const status = el('p', { class: 'muted', role: 'status' }, 'loading…');
  const body = el('tbody', { id: 'rules-rows' });
  const diff = el('section', { id: 'rules-diff' });
  container.append(el('h1', {}, 'Rules'), status,
    el('table', {}, el('thead', {}, el('tr', {}, ['version', 'name', 'created', 'active', 'bytes'].map((h) => el('th', { scope: 'col' }, h)))), body),
    shadowReport(), diff, simulation());
  api('rules').then(async (answer) => {
    status.textContent = `${answer.versions.length} versions`;
    for (const v of answer.versions)
      body.append(el('tr', {}, el('td', {}, v.version), el('td', {}, v.name), el('td', {}, v.created ? time(new Date(v.created * 1000).toISOString()) : ''),
        el('td', {}, v.active ? 'active' : ''), el('td', {}, v.bytes)));
    const numbers = answer.versions.map((v) => v.version);
    if (numbers.length < 1) return;
    const from = Number(params.get('from')) || numbers[Math.max(0, numbers.length - 2)];
    const to = Number(params.get('to')) || numbers[numbers.length - 1];
    const pick = (id, value) => el('select', { id }, numbers.map((n) => el('option', { value: n, selected: n === value }, `v${n}`)));
    const fromSelect = pick('diff-from', from);
    const toSelect = pick('diff-to', to);
    const show = el('button', { type: 'button' }, 'Diff');
    show.addEventListener('click', () => navigate(`/console/rules?from=${fromSelect.value}&to=${toSelect.value}`));
    const [a, b] = await Promise.all([api(`rules/${from}`), api(`rules/${to}`)]);
    const lines = diffLines(a.text.split('\n'), b.text.split('\n'));
    clear(diff).append(el('h2', {}, `Diff v${from} → v${to}`),
      el('p', {}, el('label', { for: 'diff-from' }, 'from '), fromSelect, ' ', el('label', { for: 'diff-to' }, 'to '), toSelect, ' ', show),
      lines ? el('pre', { id: 'diff-text', tabindex: 0 }, lines.map(([mark, text]) => el('div', { class: mark === '+' ? 'diff-add' : mark === '-' ? 'diff-del' : '' }, `${mark} ${text}`)))
        : el('div', {}, el('pre', { tabindex: 0 }, a.text), el('pre', { tabindex: 0 }, b.text)));
  }).catch((error) => { if (!onUnauthorized(error)) status.textContent = error.message; });
  return null;
}

const DIFF_COLUMNS = ['seq', 'time', 'type', 'agent', 'action', 'resource', 'change', 'was', 'now'];

// One DecisionDiff row, of a simulation (time RFC 3339, change given) or of the shadow (time in Unix
// seconds, the change read from the old decision, the live request's type).
function diffRow(d) {
  const change = d.change ?? (d.old?.decision === 'allow' ? 'allow_to_deny' : 'deny_to_allow');
  const when = typeof d.time === 'number' ? new Date(d.time * 1000).toISOString() : d.time;
  return el('tr', { 'data-seq': d.seq, 'data-change': change },
    el('td', {}, d.seq), el('td', {}, time(when)), el('td', {}, d.type ?? 'authz.shadow'), el('td', {}, d.agent ?? ''), el('td', {}, d.action),
    el('td', {}, d.mcp_tool ? `${d.resource} (${d.mcp_tool})` : d.resource), el('td', { class: change === 'allow_to_deny' ? 'deny' : 'allow' }, change.replace(/_/g, ' ')),
    el('td', {}, `${d.old?.decision} (${(d.old?.determining || []).join(', ') || 'none'})`),
    el('td', {}, `${d.new?.decision} (${(d.new?.determining || []).join(', ') || 'none'})`));
}

function flipTable(id, title, rows) {
  return el('table', { id }, el('caption', {}, `flips by ${title}`),
    el('thead', {}, el('tr', {}, [title, 'allow → deny', 'deny → allow'].map((h) => el('th', { scope: 'col' }, h)))),
    el('tbody', {}, Object.entries(rows || {}).map(([name, n]) => el('tr', { 'data-name': name },
      el('td', {}, name), el('td', { class: 'to-deny' }, n.allow_to_deny), el('td', { class: 'to-allow' }, n.deny_to_allow)))));
}

function shadowReport() {
  const section = el('section', { id: 'rules-shadow' });
  api('rules/shadow').then((report) => {
    if (!report.shadow) {
      section.append(el('h2', {}, 'Shadow rules'), el('p', { id: 'shadow-summary', class: 'muted' },
        'no shadow rules (dome rules apply FILE --name N --shadow)'));
      return;
    }
    const s = report.summary;
    const since = new Date(report.shadow.since * 1000).toISOString();
    section.append(el('h2', {}, `Shadow rules: ${report.shadow.name} (v${report.shadow.version})`),
      el('p', { id: 'shadow-summary', role: 'status' },
        `since ${time(since)}: ${s.evaluated} live requests evaluated under both versions: ${s.unchanged} unchanged, ${s.allow_to_deny} allow → deny, ${s.deny_to_allow} deny → allow, ${s.errors} errors`),
      el('div', { class: 'flips' }, flipTable('shadow-by-tool', 'tool', report.by_tool), flipTable('shadow-by-agent', 'agent', report.by_agent),
        flipTable('shadow-by-policy', 'policy', report.by_policy)),
      el('h3', {}, report.diffs_truncated ? `The latest ${report.diffs.length} DecisionDiffs` : 'DecisionDiffs'),
      el('table', {}, el('thead', {}, el('tr', {}, DIFF_COLUMNS.map((h) => el('th', { scope: 'col' }, h)))),
        el('tbody', { id: 'shadow-rows' }, report.diffs.map(diffRow))));
  }).catch((error) => { if (!onUnauthorized(error)) section.append(el('p', { class: 'error' }, error.message)); });
  return section;
}

function simulation() {
  const candidate = el('textarea', { id: 'candidate', 'aria-label': 'Candidate rules (Cedar)', spellcheck: 'false' });
  const upload = el('input', { id: 'candidate-file', type: 'file', accept: '.cedar,text/plain' });
  upload.addEventListener('change', async () => { if (upload.files[0]) candidate.value = await upload.files[0].text(); });
  const run = el('button', { type: 'button', id: 'simulate' }, 'Simulate against history');
  const summary = el('p', { id: 'simulate-summary', role: 'status' });
  const body = el('tbody', { id: 'simulate-rows' });
  run.addEventListener('click', async () => {
    summary.textContent = 'simulating…';
    clear(body);
    try {
      const report = await api('rules/simulate', { method: 'POST', body: { text: candidate.value } });
      const s = report.summary;
      summary.textContent = `${s.evaluated} recorded requests evaluated: ${s.unchanged} unchanged, ${s.allow_to_deny} allow → deny, ${s.deny_to_allow} deny → allow, ${s.errors} errors` +
        (report.diffs_truncated ? ` (showing the first ${report.diffs.length} DecisionDiffs)` : '');
      for (const d of report.diffs) body.append(diffRow(d));
    } catch (error) {
      if (!onUnauthorized(error)) summary.textContent = error.message;
    }
  });
  return el('section', { id: 'rules-simulate' }, el('h2', {}, 'Simulate a candidate'),
    el('p', {}, el('label', { for: 'candidate' }, 'Paste Cedar rules, or '), el('label', { for: 'candidate-file' }, 'upload a file: '), upload),
    candidate, el('p', {}, run), summary,
    el('table', {}, el('thead', {}, el('tr', {}, DIFF_COLUMNS.map((h) => el('th', { scope: 'col' }, h)))), body));
}
