// Test harness for domed: start a private domed (loopback, random free port, its own state, journal and
// control socket in a temp dir), drive the `dome` CLI against it, and connect the official MCP
// TypeScript SDK client over Streamable HTTP.
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import crypto from 'node:crypto';

export const ROOT = process.env.DOME_ROOT || path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../..');
export const BUILD = process.env.DOME_BUILD || path.join(ROOT, 'build');
export const SHARED = process.env.DOME_SHARED || path.join(ROOT, '../shared');
const SDK = path.join(ROOT, 'tests/node/node_modules/@modelcontextprotocol/sdk/dist/esm');
export const { Client } = await import(`${SDK}/client/index.js`);
export const { StreamableHTTPClientTransport } = await import(`${SDK}/client/streamableHttp.js`);

// ---- the audit sweep: every tools/call a suite sends through fetch (the SDK's transport and raw fetch) is
// noted with the answer it got; Domed.stop() checks, before the journal goes, that each call answered with
// a JSON-RPC result (a tool ran or refused it) has its record: an event whose request_id is the id's JSON
// text (or request_id_sha256 its digest, for a long id). Calls refused at HTTP after authentication
// (401, 403, 429) must be matched by refusal events (auth.failed, session.refused, call.rejected; an
// aggregated one counts `count`). The findings go to $DOME_SWEEP_LOG (tests/run sums them).
const SENT = [];
const realFetch = globalThis.fetch;
function toolCallIds(body) {
  if (typeof body !== 'string') return [];
  let message;
  try { message = JSON.parse(body); } catch { return []; }
  return (Array.isArray(message) ? message : [message])
    .filter((m) => m && m.method === 'tools/call' && m.id !== undefined && m.id !== null).map((m) => m.id);
}
function resultIds(text) { // ids answered with a result, from a JSON body or an SSE stream
  const ids = new Set();
  const take = (m) => { if (m && m.id !== undefined && m.result !== undefined) ids.add(JSON.stringify(m.id)); };
  const parse = (t) => { try { const v = JSON.parse(t); (Array.isArray(v) ? v : [v]).forEach(take); } catch { /* not JSON */ } };
  if (/^\s*[[{]/.test(text)) parse(text);
  for (const line of text.split('\n')) if (line.startsWith('data:')) parse(line.slice(5).trim());
  return ids;
}
globalThis.fetch = async (input, init = {}) => {
  const ids = (init.method || 'GET').toUpperCase() === 'POST' ? toolCallIds(init.body) : [];
  const response = await realFetch(input, init);
  if (ids.length) {
    const url = new URL(typeof input === 'string' || input instanceof URL ? input : input.url);
    const entry = { port: Number(url.port), ids, status: response.status, answered: new Set() };
    entry.done = Promise.resolve();
    if (response.status === 200 && response.body) {
      // read the copy as it comes, so that what arrived counts even if the stream never ends
      const reader = response.clone().body.getReader();
      const decoder = new TextDecoder();
      let text = '';
      entry.done = (async () => {
        try {
          for (;;) {
            const { done, value } = await reader.read();
            if (done) break;
            text += decoder.decode(value, { stream: true });
            entry.answered = resultIds(text);
          }
        } catch { /* the connection went: what arrived stands */ }
      })();
    }
    SENT.push(entry);
  }
  return response;
};

function sweep(domed) {
  const mine = SENT.filter((e) => domed.ports.has(e.port));
  if (!mine.length || !process.env.DOME_SWEEP_LOG) return;
  let events = [];
  try { events = journalEvents(domed); } catch { /* no journal: every answered call is then missing */ }
  const recorded = new Set();
  let refusals = 0;
  for (const e of events) {
    if (typeof e.request_id === 'string') recorded.add(e.request_id);
    if (typeof e.request_id_sha256 === 'string') recorded.add(`sha256:${e.request_id_sha256}`);
    if (['auth.failed', 'session.refused', 'call.rejected'].includes(e.type)) refusals += Number(e.count) || 1;
  }
  const missing = [];
  let checked = 0;
  let refused = 0;
  for (const e of mine) {
    if ([401, 403, 429].includes(e.status)) { refused += e.ids.length; continue; }
    for (const id of e.ids) {
      const text = JSON.stringify(id);
      if (!e.answered.has(text)) continue;
      checked++;
      const digest = crypto.createHash('sha256').update(text).digest('hex');
      if (!recorded.has(text) && !recorded.has(`sha256:${digest}`)) missing.push(text.slice(0, 80));
    }
  }
  const line = { suite: path.relative(ROOT, process.argv[1] || '?'), checked, missing, refused, refusals };
  if (refused > refusals) line.unrecorded_refusals = refused - refusals;
  fs.appendFileSync(process.env.DOME_SWEEP_LOG, JSON.stringify(line) + '\n');
  for (let i = SENT.length - 1; i >= 0; i--) if (domed.ports.has(SENT[i].port)) SENT.splice(i, 1);
}

let passed = 0;
let failed = 0;
export function check(condition, name, detail) {
  if (condition) {
    passed++;
    console.log(`ok - ${name}`);
  } else {
    failed++;
    console.log(`FAIL - ${name}${detail !== undefined ? `: ${typeof detail === 'string' ? detail : JSON.stringify(detail)}` : ''}`);
  }
  return condition;
}
export function finish(skipped = 0) { // skipped: checks not run (each said why on a `skipped: ` line)
  console.log(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`);
  process.exitCode = failed ? 1 : 0;
}

export class Domed {
  constructor(extraArgs = []) {
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dome-mcp-'));
    this.socket = path.join(this.dir, 'control.sock');
    // DOME_TEST_POOL_SIZE (tests/run --pool-size N): every private domed runs with that pool_size unless the
    // suite sets its own; unset, domed's default (the number of CPUs) applies.
    const pool = process.env.DOME_TEST_POOL_SIZE && !extraArgs.includes('--pool-size')
      ? ['--pool-size', process.env.DOME_TEST_POOL_SIZE] : [];
    // DOME_TEST_SESSION_POOL_SIZE (tests/run's `session-pool-off/` pass): the same for session_pool_size
    if (process.env.DOME_TEST_SESSION_POOL_SIZE && !extraArgs.includes('--session-pool-size'))
      pool.push('--session-pool-size', process.env.DOME_TEST_SESSION_POOL_SIZE);
    this.args = ['--listen', '127.0.0.1:0', '--state-dir', path.join(this.dir, 'state'), '--journal-dir',
      path.join(this.dir, 'journal'), '--control-socket', this.socket, ...pool, ...extraArgs];
    this.log = '';
    this.ports = new Set();
  }

  async start() {
    this.process = spawn(path.join(BUILD, 'domed'), this.args, { stdio: ['ignore', 'ignore', 'pipe'] });
    this.exited = new Promise((resolve) => this.process.on('exit', (code, signal) => resolve({ code, signal })));
    this.process.stderr.on('data', (chunk) => { this.log += chunk; });
    const deadline = Date.now() + 10000;
    while (Date.now() < deadline) {
      const match = /msg=listening .* listen=([0-9.]+):(\d+) /.exec(this.log);
      if (match) {
        this.port = Number(match[2]);
        this.ports.add(this.port);
        this.url = `http://127.0.0.1:${this.port}/mcp`;
        return this;
      }
      if (this.process.exitCode !== null) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`domed did not start:\n${this.log}`);
  }

  dome(...args) {
    return execFileSync(path.join(BUILD, 'dome'), args, {
      env: { ...process.env, DOME_CONTROL_SOCKET: this.socket }, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'],
    });
  }

  domeStatus(...args) { // -> {status, stdout, stderr} without throwing
    try {
      return { status: 0, stdout: this.dome(...args), stderr: '' };
    } catch (e) {
      return { status: e.status, stdout: String(e.stdout), stderr: String(e.stderr) };
    }
  }

  register(name, capabilities) {
    const out = this.dome('agents', 'register', '--name', name, '--capabilities', capabilities);
    const token = /^Token: (\S+)$/m.exec(out);
    if (!token) throw new Error(`no token in: ${out}`);
    return token[1];
  }

  // An SDK client of this domed. { sweep: false } (benchmarks): its transport uses the plain fetch, so the
  // audit sweep's copy and parse of every answer stays out of the figures (its calls are then not swept).
  async client(token, headers = {}, { sweep = true } = {}) {
    const transport = new StreamableHTTPClientTransport(new URL(this.url), {
      requestInit: { headers: { Authorization: `Bearer ${token}`, ...headers } },
      ...(sweep ? {} : { fetch: realFetch }),
    });
    const client = new Client({ name: 'dome-tests', version: '1.0.0' });
    await client.connect(transport);
    client.transportRef = transport;
    return client;
  }

  async stop() {
    if (this.process && this.process.exitCode === null) {
      this.process.kill('SIGTERM');
      const timer = setTimeout(() => this.process.kill('SIGKILL'), 20000);
      this.result = await this.exited;
      clearTimeout(timer);
    }
    await endPasta(this.dir);
    // answers still being read (a cancelled call's stream may never end) are judged by what arrived in 2 s
    await Promise.race([Promise.all(SENT.filter((e) => this.ports.has(e.port)).map((e) => e.done)),
      new Promise((resolve) => setTimeout(resolve, 2000))]);
    sweep(this);
    fs.rmSync(this.dir, { recursive: true, force: true });
    return this.result;
  }
}

// Whether process `pid` runs (a zombie or a gone pid does not).
export function processAlive(pid) {
  try { return !/^\d+ \(.*\) Z/.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8')); } catch { return false; }
}

// A private domed's directory may only go with its pasta gone: one that domed started (domed-net/pasta.pid,
// still holding domed-net/pasta.log open) gets 2 s to end after domed's exit, then SIGKILL, so that no
// pasta outlives the test however its domed ended.
export async function endPasta(dir) {
  const net = path.join(dir, 'domed-net');
  let pid = 0;
  try { pid = Number(fs.readFileSync(path.join(net, 'pasta.pid'), 'utf8').trim()); } catch { return; }
  const ours = () => {
    try {
      return fs.readdirSync(`/proc/${pid}/fd`).some((fd) => {
        try { return fs.readlinkSync(`/proc/${pid}/fd/${fd}`) === path.join(net, 'pasta.log'); } catch { return false; }
      });
    } catch { return false; }
  };
  for (let waited = 0; waited < 2000 && pid > 1 && processAlive(pid) && ours(); waited += 50)
    await new Promise((resolve) => setTimeout(resolve, 50));
  if (pid > 1 && processAlive(pid) && ours()) process.kill(pid, 'SIGKILL');
}

// Journal events of a domed, read as an operator reads them: `dome audit export DIR` (supervisor/audit/
// reader.c), which takes the active segment's open frame up to its last complete line. (zstdcat, which
// the journal's format also serves, fails on a block still being appended and then drops up to 128 KiB of
// what it had decoded: a live journal read that way loses its newest events.)
export function journalEvents(domed) {
  const text = execFileSync(path.join(BUILD, 'dome'), ['audit', 'export', path.join(domed.dir, 'journal'), '--format', 'ndjson'], {
    encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 1 << 28,
  });
  const events = [];
  for (const line of text.split('\n')) if (line.trim()) events.push(JSON.parse(line));
  return events;
}

// The jail cgroups of process `owner` (jail_run names them jail-<pid>-<seq>) beneath the cgroups of
// process `pid` (v1 memory and pids controllers and the cgroup2 hierarchy). Only `owner`'s: other jails
// on a shared host (other domeds, `dome run`) live beside them.
/* The jail leaves of `owner` once at most `most` remain, or those left after `ms` (a jail's leaf is removed
 * by the call that ran it, which may still be finishing when an event or a cancellation is observed). */
export async function settledLeaves(pid, owner = pid, most = 0, ms = 5000) {
  const deadline = Date.now() + ms;
  let leaves = cgroupLeaves(pid, owner);
  while (leaves.length > most && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    leaves = cgroupLeaves(pid, owner);
  }
  return leaves;
}

// The first line of the program a prepared jail's waiting Python interpreter runs (supervisor/jail/
// module.mk puts it before python_bootstrap.py): its /proc/PID/cmdline says what it is.
export const WAITING_INTERPRETER = '#dome: a prepared interpreter waiting for its call';

const readProc = (pid, file) => { try { return fs.readFileSync(`/proc/${pid}/${file}`, 'utf8'); } catch { return null; } };

// Whether the leaf holds only a jail of domed's pool waiting for its call: either one still being set up,
// whose processes are copies of domed not yet renamed `init` (the jail's init takes that name before the
// program exists), or one whose init waits beside a Python interpreter started in advance
// (WAITING_INTERPRETER). Such leaves are domed's pool, not leftovers; they go when domed drains its pool
// on SIGTERM.
// An interpreter that took its call keeps that command line, but it closes the call's stream (fd 3) and
// the jail's control socket (fd 4), both sockets, before the code runs; while it waits it holds both.
function waitingStreams(pid) {
  const link = (fd) => { try { return fs.readlinkSync(`/proc/${pid}/fd/${fd}`); } catch { return ''; } };
  return link(3).startsWith('socket:') && link(4).startsWith('socket:');
}

export function waitingJail(dir) {
  let pids = [];
  try { pids = fs.readFileSync(path.join(dir, 'cgroup.procs'), 'utf8').trim().split('\n').filter(Boolean); } catch { return false; }
  if (pids.length === 0) return false;
  const kinds = pids.map((p) => {
    const comm = (readProc(p, 'comm') ?? '').trim();
    if (comm === 'domed') return 'copy';
    if ((readProc(p, 'cmdline') ?? '').includes(WAITING_INTERPRETER) && waitingStreams(p)) return 'interpreter';
    return comm === 'init' ? 'init' : 'program';
  });
  return kinds.every((k) => k === 'copy') || (kinds.includes('interpreter') && !kinds.includes('program') && !kinds.includes('copy'));
}

// Whether process `pid` is domed's jail spawner (supervisor/jail/spawner.c: forked at start-up, it clones
// the jails and lives as long as domed; it names itself `dome-spawner`, the jails it clones take domed's
// name back).
export function spawnerProcess(pid) {
  return (readProc(pid, 'comm') ?? '').trim() === 'dome-spawner';
}

// Whether process `pid` belongs to a jail of domed's pool that waits for its call (waitingJail of its leaf,
// found through its pids or cgroup2 line of /proc/PID/cgroup).
export function waitingProcess(pid) {
  if ((readProc(pid, 'comm') ?? '').trim() === 'domed') return true;
  for (const line of (readProc(pid, 'cgroup') ?? '').trim().split('\n')) {
    const [, controllers, relative] = line.split(':');
    if (relative === undefined || !relative.includes('/jail-')) continue;
    const mount = controllers === '' ? (fs.existsSync('/sys/fs/cgroup/unified') ? '/sys/fs/cgroup/unified' : '/sys/fs/cgroup')
      : controllers.includes('pids') ? '/sys/fs/cgroup/pids' : null;
    if (mount) return waitingJail(path.join(mount, relative));
  }
  return false;
}

// The cgroup leaves of `owner`'s jails beneath `pid`'s cgroups, without the jails of its pool that wait for
// a call (waitingJail).
export function cgroupLeaves(pid, owner = pid) {
  const leaves = [];
  let lines = [];
  try { lines = fs.readFileSync(`/proc/${pid}/cgroup`, 'utf8').trim().split('\n'); } catch { return leaves; }
  for (const line of lines) {
    const [, controllers, relative] = line.split(':');
    const mount = controllers === '' ? (fs.existsSync('/sys/fs/cgroup/unified') ? '/sys/fs/cgroup/unified' : '/sys/fs/cgroup')
      : controllers.includes('memory') ? '/sys/fs/cgroup/memory' : controllers.includes('pids') ? '/sys/fs/cgroup/pids' : null;
    if (!mount) continue;
    const base = path.join(mount, relative);
    try {
      for (const dir of [base, path.join(base, "dome")]) {
        let entries = [];
        try { entries = fs.readdirSync(dir, { withFileTypes: true }); } catch { continue; }
        for (const entry of entries)
          if (entry.isDirectory() && entry.name.startsWith(`jail-${owner}-`) && !waitingJail(path.join(dir, entry.name)))
            leaves.push(path.join(dir, entry.name));
      }
    } catch { /* not mounted */ }
  }
  return leaves;
}

export function openFds(pid) {
  try { return fs.readdirSync(`/proc/${pid}/fd`).length; } catch { return -1; }
}

export function rssKiB(pid) {
  try { return Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1]); } catch { return -1; }
}

// The seed's four rules for code-exec-agent: ../shared/seed/code-exec-rules.cedar when it is there, otherwise
// the repository's copy, the part of docs/examples/code-exec-rules.cedar before its jail rules (that file
// begins with the seed's rules verbatim; scripts/seed-walkthrough checks it against ../shared).
export function seedRules() {
  const seed = path.join(SHARED, 'seed/code-exec-rules.cedar');
  if (fs.existsSync(seed)) return fs.readFileSync(seed, 'utf8');
  const example = fs.readFileSync(path.join(ROOT, 'docs/examples/code-exec-rules.cedar'), 'utf8');
  const end = example.indexOf('// ---- Jail rules');
  if (end < 0) throw new Error('docs/examples/code-exec-rules.cedar: no "// ---- Jail rules" line ends the seed\'s rules');
  return example.slice(0, end).trimEnd() + '\n';
}
export const RULES = seedRules();

// A suite that needs PART of ../shared (e.g. 'agent-tasks') and finds it absent says so once, counts itself
// skipped (tests/run) and ends; returns the part's path when it is present.
export function sharedOrSkip(part) {
  const dir = path.join(SHARED, part);
  if (fs.existsSync(dir)) return dir;
  console.log(`skipped: ../shared/${part} not present (${dir})`);
  console.log('0 passed, 0 failed, 1 skipped');
  process.exit(0);
}
