// The console's page: login, the session, and the router of the views (each view a URL under
// /console/ that can be shared: /console/live?agent=x, /console/executions/<id>, ...).
import { api, setCsrf } from './api.js';
import { clear, el } from './dom.js';
import { liveView } from './live.js';
import { executionsView } from './executions.js';
import { agentsView } from './agents.js';
import { rulesView } from './rules.js';
import { overviewView } from './overview.js';
import { anomaliesView } from './anomalies.js';

const views = { overview: overviewView, live: liveView, executions: executionsView, agents: agentsView, rules: rulesView, anomalies: anomaliesView };
export const session = { operator: '', role: '' };
let stopCurrent = null;

function showLogin(message = '') {
  document.getElementById('login').hidden = false;
  document.getElementById('nav').hidden = true;
  document.getElementById('logout').hidden = true;
  document.getElementById('who').textContent = '';
  document.getElementById('login-error').textContent = message;
  clear(document.getElementById('view'));
}

function loggedIn(answer) {
  session.operator = answer.operator;
  session.role = answer.role;
  setCsrf(answer.csrf);
  document.getElementById('login').hidden = true;
  document.getElementById('nav').hidden = false;
  document.getElementById('logout').hidden = false;
  document.getElementById('who').textContent = `${answer.operator} (${answer.role})`;
  document.body.dataset.role = answer.role;
}

export function navigate(url) {
  history.pushState(null, '', url);
  route();
}

export function route() {
  if (stopCurrent) stopCurrent();
  stopCurrent = null;
  const parts = location.pathname.replace(/^\/console\/?/, '').split('/').filter(Boolean).map(decodeURIComponent);
  const name = views[parts[0]] ? parts[0] : 'live';
  if (!views[parts[0]] && location.pathname !== `/console/${name}`) history.replaceState(null, '', `/console/${name}`);
  for (const link of document.querySelectorAll('#nav a'))
    if (link.dataset.view === name) link.setAttribute('aria-current', 'page'); else link.removeAttribute('aria-current');
  const container = clear(document.getElementById('view'));
  document.body.dataset.view = name;
  document.title = `dome console: ${name}`;
  stopCurrent = views[name](container, parts.slice(1), new URLSearchParams(location.search)) || null;
}

export function onUnauthorized(error) {
  if (error?.status === 401) { showLogin('Your session ended: log in again.'); return true; }
  return false;
}

async function start() {
  document.getElementById('login-form').addEventListener('submit', async (event) => {
    event.preventDefault();
    const input = document.getElementById('login-token');
    try {
      loggedIn(await api('login', { method: 'POST', body: { token: input.value.trim() } }));
      input.value = '';
      route();
    } catch (error) {
      document.getElementById('login-error').textContent = error.message;
    }
  });
  document.getElementById('logout').addEventListener('click', async () => {
    try { await api('logout', { method: 'POST' }); } catch { /* ended already */ }
    if (stopCurrent) stopCurrent();
    showLogin('Logged out.');
  });
  document.getElementById('nav').addEventListener('click', (event) => {
    const link = event.target.closest('a');
    if (!link || event.ctrlKey || event.metaKey || event.shiftKey) return;
    event.preventDefault();
    navigate(link.getAttribute('href'));
  });
  window.addEventListener('popstate', route);
  try {
    loggedIn(await api('session'));
    route();
  } catch {
    showLogin();
  }
}

if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
else start();

export { el };
