#!/usr/bin/env node
// The official MCP TypeScript SDK's client (Client + StreamableHTTPClientTransport) timing `ping` and
// `tools/list` against several Streamable HTTP endpoints in one run, interleaved (scripts/bench-mcp-peer).
//
//   node tests/bench/mcp-sdk-client.mjs CALLS ROUNDS NAME URL TOKEN [NAME URL TOKEN ...]
//
// One initialized session per endpoint (a bearer token in every request), requests sequential. After 20
// warm-up requests of each method on each endpoint, ROUNDS rounds: in each, for each method, CALLS/ROUNDS
// requests to each endpoint in turn, the order of the endpoints rotated from round to round so that none
// is always first. Prints one JSON line per endpoint and method on stdout: name, method, calls, p50_ms,
// p90_ms, p99_ms, and bytes (the size of the answer's result as JSON, tools/list's content). Exit status
// 0; 1 with a message on stderr when a session cannot be set up or a request fails; 2 on bad usage.
import path from 'node:path';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { performance } from 'node:perf_hooks';

const ROOT = process.env.DOME_ROOT || path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const require = createRequire(path.join(ROOT, 'tests/node/package.json'));
const load = (name) => import(pathToFileURL(require.resolve(name)).href);
const { Client } = await load('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = await load('@modelcontextprotocol/sdk/client/streamableHttp.js');

const [calls, rounds] = process.argv.slice(2, 4).map(Number);
const specs = process.argv.slice(4);
if (!(calls >= 1) || !(rounds >= 1) || specs.length < 3 || specs.length % 3 !== 0) {
  process.stderr.write('usage: mcp-sdk-client.mjs CALLS ROUNDS NAME URL TOKEN [NAME URL TOKEN ...]\n');
  process.exit(2);
}
const targets = [];
for (let i = 0; i < specs.length; i += 3) targets.push({ name: specs[i], url: specs[i + 1], token: specs[i + 2] });

const methods = {
  ping: (client) => client.ping(),
  'tools/list': (client) => client.listTools(),
};
try {
  for (const t of targets) {
    t.transport = new StreamableHTTPClientTransport(new URL(t.url), {
      requestInit: { headers: { Authorization: `Bearer ${t.token}` } },
    });
    t.client = new Client({ name: 'dome-bench-sdk-client', version: '1.0.0' });
    await t.client.connect(t.transport);
    t.samples = {};
    t.bytes = {};
    for (const [method, call] of Object.entries(methods)) {
      t.samples[method] = [];
      for (let i = 0; i < 20; i++) t.bytes[method] = JSON.stringify(await call(t.client)).length;
    }
  }
  const perRound = Math.max(1, Math.round(calls / rounds));
  for (let round = 0; round < rounds; round++) {
    for (const [method, call] of Object.entries(methods)) {
      for (let k = 0; k < targets.length; k++) {
        const t = targets[(round + k) % targets.length];
        for (let i = 0; i < perRound; i++) {
          const start = performance.now();
          await call(t.client);
          t.samples[method].push(performance.now() - start);
        }
      }
    }
  }
} catch (error) {
  process.stderr.write(`mcp-sdk-client: ${error.message || error}\n`);
  process.exit(1);
}
const quantile = (sorted, q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
for (const t of targets) {
  for (const method of Object.keys(methods)) {
    const sorted = t.samples[method].slice().sort((a, b) => a - b);
    const figure = (q) => Number(quantile(sorted, q).toFixed(3));
    process.stdout.write(`${JSON.stringify({
      name: t.name, method, calls: sorted.length, p50_ms: figure(0.5), p90_ms: figure(0.9), p99_ms: figure(0.99),
      bytes: t.bytes[method],
    })}\n`);
  }
  await t.client.close().catch(() => {});
}
process.exit(0);
