// The console's JSON API (/console/api/): the session cookie goes with every request (same origin);
// mutating requests carry the CSRF token the login or /session answered.
let csrf = '';
export function setCsrf(token) { csrf = token || ''; }

export class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

export async function api(path, { method = 'GET', body } = {}) {
  const headers = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (method !== 'GET') headers['X-CSRF-Token'] = csrf;
  const response = await fetch(`/console/api/${path}`, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: 'same-origin',
  });
  let answer = null;
  try { answer = await response.json(); } catch { answer = null; }
  if (!response.ok) throw new ApiError(response.status, answer?.error || `HTTP ${response.status}`);
  return answer;
}
