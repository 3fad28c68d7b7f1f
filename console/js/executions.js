// Executions: the search (agent, time range, exit status, denials, redactions; kept in the URL) and
// one execution's timeline (decision -> jail -> output chunks (redacted) -> kernel denials ->
// redactions -> end) with the code to replay, and the inclusion proof of any of its events checked
// in the page (proof.js).
import { api } from './api.js';
import { clear, el, longText, time } from './dom.js';
import { navigate, onUnauthorized } from './app.js';
import { keyId, verifyProof } from './proof.js';

const SEARCH = ['agent', 'since', 'until', 'exit'];

export function executionsView(container, parts, params) {
  if (parts[0]) return timeline(container, parts[0]);
  const inputs = {};
  const form = el('form', { class: 'filters', role: 'search' },
    SEARCH.map((name) => {
      inputs[name] = el('input', { id: `search-${name}`, name, value: params.get(name) || '', size: 18,
        placeholder: name === 'exit' ? '0 or nonzero' : name === 'agent' ? '' : '2026-12-02T10:00:00Z' });
      return el('label', { for: `search-${name}` }, name, inputs[name]);
    }),
    ['denials', 'redactions'].map((name) => {
      inputs[name] = el('input', { id: `search-${name}`, type: 'checkbox', name, checked: params.get(name) === '1' });
      return el('label', { for: `search-${name}` }, `with ${name}`, inputs[name]);
    }),
    el('button', { type: 'submit' }, 'Search'));
  const status = el('p', { id: 'search-status', class: 'muted' }, 'searching…');
  const body = el('tbody', { id: 'search-rows' });
  container.append(el('h1', {}, 'Executions'), form, status,
    el('table', {}, el('thead', {}, el('tr', {}, ['end', 'execution', 'agent', 'tool', 'exit', 'duration (ms)', 'kernel denials', 'redactions']
      .map((h) => el('th', { scope: 'col' }, h)))), body));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const query = new URLSearchParams();
    for (const name of SEARCH) if (inputs[name].value.trim()) query.set(name, inputs[name].value.trim());
    for (const name of ['denials', 'redactions']) if (inputs[name].checked) query.set(name, '1');
    navigate(`/console/executions${query.toString() ? `?${query}` : ''}`);
  });
  const query = new URLSearchParams();
  for (const name of [...SEARCH, 'denials', 'redactions']) if (params.get(name)) query.set(name, params.get(name));
  const started = performance.now();
  api(`executions?${query}`).then((answer) => {
    status.textContent = `${answer.executions.length} executions (newest first), ${Math.round(performance.now() - started)} ms`;
    for (const e of answer.executions) {
      const tr = el('tr', { class: 'clickable', tabindex: 0, 'data-exec': e.exec_id },
        el('td', {}, time(e.time)), el('td', {}, e.exec_id), el('td', {}, e.agent ?? ''), el('td', {}, e.tool ?? ''),
        el('td', {}, e.exit_code ?? ''), el('td', {}, e.duration_ms ?? ''), el('td', {}, e.denials), el('td', {}, e.redactions));
      const open = () => navigate(`/console/executions/${encodeURIComponent(e.exec_id)}`);
      tr.addEventListener('click', open);
      tr.addEventListener('keydown', (key) => { if (key.key === 'Enter') open(); });
      body.append(tr);
    }
  }).catch((error) => { if (!onUnauthorized(error)) status.textContent = error.message; });
  return null;
}

const KIND = {
  'authz.decision': 'decision', 'exec.start': 'start', 'exec.jail': 'jail', 'exec.output': 'output',
  'exec.denial': 'kernel denial', 'exec.redaction': 'redaction', 'exec.end': 'end',
};

function detail(event) {
  switch (event.type) {
    case 'authz.decision':
      return [el('span', { class: event.decision === 'deny' ? 'deny' : 'allow' }, event.decision), ' ',
        `by ${(event.determining || []).join(', ') || 'no policy'} (rules v${event.policy_version ?? '?'}) for ${event.agent ?? ''} on ${event.mcp_tool ?? event.tool ?? ''}`];
    case 'exec.start':
      return [`${event.language ?? (event.argv ? 'argv' : '')} in ${event.image ?? ''}`];
    case 'exec.jail':
      return [`jail ${event.jail_id ?? ''}, kernel layer ${event.kernel ?? ''}`];
    case 'exec.output':
      return [`${event.stream} at ${event.offset_ms} ms (redacted)`, longText(event.data ?? '')];
    case 'exec.denial':
      return [el('span', { class: 'deny' }, 'denied'), ` ${event.action ?? event.hook ?? ''} ${event.object ?? ''} at ${event.offset_ms ?? '?'} ms (${event.reason ?? ''}${event.determining?.length ? `: ${event.determining.join(', ')}` : ''})`];
    case 'exec.redaction':
      return [`${event.count} value(s) of ${event.field} redacted by ${event.detector}`];
    case 'exec.end':
      return [`exit ${event.exit_code ?? event.error ?? ''}${event.signal ? `, signal ${event.signal}` : ''}${event.timed_out ? ', timed out' : ''} after ${event.duration_ms} ms; ${event.denials ?? 0} kernel denial(s)`];
    default:
      return [event.type];
  }
}

async function journalKey() {
  const pinned = localStorage.getItem('dome-journal-key');
  if (pinned) return { key: pinned, pinned: true };
  return { key: (await api('journal-key')).public_key, pinned: false };
}

function proofControls(container) {
  const keyLine = el('p', { id: 'journal-key', class: 'muted' }, 'journal key: loading…');
  const pin = el('input', { id: 'pin-key', size: 66, placeholder: '64 hex digits (signing.pub)', value: localStorage.getItem('dome-journal-key') || '' });
  const pinButton = el('button', { type: 'button' }, 'Pin key');
  pinButton.addEventListener('click', () => {
    if (pin.value.trim()) localStorage.setItem('dome-journal-key', pin.value.trim()); else localStorage.removeItem('dome-journal-key');
    describeKey();
  });
  const describeKey = () => journalKey().then(async ({ key, pinned }) => {
    keyLine.textContent = `journal key ${await keyId(key)} (${pinned ? 'pinned in this browser' : 'as domed serves it: pin the key you trust'})`;
  }).catch((error) => { keyLine.textContent = `journal key: ${error.message}`; });
  describeKey();
  const pasted = el('textarea', { id: 'proof-input', 'aria-label': 'Inclusion proof (JSON)' });
  const pastedResult = el('p', { id: 'proof-input-result', role: 'status' });
  const check = el('button', { type: 'button', id: 'proof-input-check' }, 'Verify pasted proof');
  check.addEventListener('click', async () => {
    let proof;
    try { proof = JSON.parse(pasted.value); } catch (error) { pastedResult.textContent = `not JSON: ${error.message}`; return; }
    show(pastedResult, await verifyProof(proof, (await journalKey()).key));
  });
  container.append(el('h2', {}, 'Inclusion proofs'), keyLine,
    el('label', { for: 'pin-key' }, 'Trusted journal public key '), pin, ' ', pinButton,
    el('p', {}, 'Paste a proof (', el('code', {}, 'dome audit prove SEQ'), ' or the one a Verify button fetched) to check it here:'),
    pasted, check, pastedResult);
  return pasted;
}

function mark(node, kind) {
  node.classList.remove('ok', 'error', 'muted');
  node.classList.add(kind);
}

function show(node, result) {
  mark(node, result.ok ? 'ok' : 'error');
  node.textContent = result.ok
    ? `verified: event #${result.seq} is in the journal (tree size ${result.treeSize}, signed by key ${result.keyId})`
    : `FAILED: ${result.reason}`;
}

function timeline(container, execId) {
  const heading = el('h1', {}, 'Execution ', el('code', {}, execId));
  const status = el('p', { class: 'muted' }, 'loading…');
  const list = el('ol', { class: 'timeline', id: 'timeline' });
  const code = el('section', { id: 'replay' });
  container.append(heading, status, list, code);
  const pasted = proofControls(container);
  api(`executions/${encodeURIComponent(execId)}`).then((answer) => {
    status.textContent = `${answer.events.length} events`;
    for (const event of answer.events) {
      const result = el('span', { class: 'proof-result', role: 'status' });
      const verify = el('button', { type: 'button', class: 'verify', 'data-seq': event.seq }, 'Verify proof');
      verify.addEventListener('click', async () => {
        mark(result, 'muted');
        result.textContent = 'checking…';
        try {
          const proof = await api(`proof?seq=${event.seq}`);
          pasted.value = JSON.stringify(proof, null, 2);
          show(result, await verifyProof(proof, (await journalKey()).key));
        } catch (error) {
          if (!onUnauthorized(error)) { mark(result, 'error'); result.textContent = error.message; }
        }
      });
      list.append(el('li', { 'data-type': event.type, 'data-seq': event.seq },
        el('span', { class: 'kind' }, KIND[event.type] ?? event.type), ' ', el('span', { class: 'muted' }, `#${event.seq} ${time(event.time)} `),
        ...detail(event), ' ', verify, ' ', result));
    }
    const start = answer.events.find((e) => e.type === 'exec.start');
    if (start) {
      clear(code).append(el('h2', {}, 'Code (as recorded for replay)'),
        start.code !== undefined ? longText(start.code) : el('p', { class: 'muted' }, start.code_stored ? `stored in the blob store (${start.code_bytes} bytes, sha256 ${start.code_sha256})` : 'no code recorded'),
        el('p', {}, 'Replay with ', el('code', {}, `dome audit replay ${execId}`), ' (add --rerun to run it again).'));
    }
  }).catch((error) => { if (!onUnauthorized(error)) status.textContent = error.message; });
  return null;
}
