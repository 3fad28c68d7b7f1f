// Shared by the console suites: a private domed (tests/mcp/lib/harness.mjs) with operators, logins
// and the console's HTTP API from node.
import { Domed, journalEvents } from '../mcp/lib/harness.mjs';

export { Domed, journalEvents };

export function addOperator(domed, name, role) {
  const out = domed.dome('operators', 'add', '--name', name, '--role', role);
  const token = /^Token: (\S+)$/m.exec(out);
  if (!token) throw new Error(`no token in: ${out}`);
  return token[1];
}

export function consoleUrl(domed, path = '') {
  return `http://127.0.0.1:${domed.port}/console${path}`;
}

// POST /console/api/login -> {status, cookie (name=value), csrf, setCookie (the whole header), body}
export async function login(domed, token, base = consoleUrl(domed)) {
  const response = await fetch(`${base}/api/login`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ token }),
  });
  const setCookie = response.headers.get('set-cookie') || '';
  const body = await response.json().catch(() => null);
  return { status: response.status, setCookie, cookie: setCookie.split(';')[0], csrf: body?.csrf, body, headers: response.headers };
}

export async function request(domed, path, { method = 'GET', cookie, csrf, body, headers = {} } = {}) {
  const all = { ...headers };
  if (cookie) all.Cookie = cookie;
  if (csrf) all['X-CSRF-Token'] = csrf;
  if (body !== undefined) all['Content-Type'] = 'application/json';
  const response = await fetch(consoleUrl(domed, path), { method, headers: all, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await response.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: response.status, headers: response.headers, text, json };
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
