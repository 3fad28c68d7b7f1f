#!/usr/bin/env node
// The peer of scripts/bench-mcp-peer: the official MCP TypeScript SDK's own server (McpServer +
// StreamableHTTPServerTransport, stateful: one transport and session per initialize) on loopback, with one
// registered tool shaped like dome's execute_code (the same input and output schema, title, description
// length and annotations, as supervisor/domed/tool_schema.c builds them) so that tools/list answers
// comparable content. Never runs anything: a tools/call answers a fixed result.
//
//   node tests/bench/mcp-sdk-peer.mjs [TOKEN]
//
// Listens on 127.0.0.1, a free port, and prints `listening PORT` on stdout once ready. Two endpoints:
// /mcp answers each POST with application/json (enableJsonResponse, as domed answers ping and tools/list)
// and /mcp-sse with an SSE stream per POST (the transport's default). With TOKEN, a request without
// `Authorization: Bearer TOKEN` gets 401, so that the peer also checks a bearer token as domed does.
// Ends on SIGTERM or SIGINT, closing its sessions. Uses only the tests' node_modules (tests/node).
import http from 'node:http';
import crypto from 'node:crypto';
import path from 'node:path';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

const ROOT = process.env.DOME_ROOT || path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const MODULES = path.join(ROOT, 'tests/node/package.json');
const require = createRequire(MODULES);
const load = (name) => import(pathToFileURL(require.resolve(name)).href);
const { McpServer } = await load('@modelcontextprotocol/sdk/server/mcp.js');
const { StreamableHTTPServerTransport } = await load('@modelcontextprotocol/sdk/server/streamableHttp.js');
const { isInitializeRequest } = await load('@modelcontextprotocol/sdk/types.js');
const { z } = await load('zod');

const token = process.argv[2] || '';
const string = z.string();
const stringMap = z.record(z.string());

// dome's execute_code input schema (domed_execute_code_input_schema) and output schema, in zod
const inputSchema = {
  language: z.enum(['python', 'bash', 'sh', 'javascript'])
    .describe("interpreter: python (Debian's python3), bash, sh or javascript (Debian's nodejs)"),
  code: z.string().describe('the program text'),
  stdin: z.string().optional().describe('bytes given on standard input'),
  files: stringMap.optional()
    .describe("files placed in /workspace (the program's working directory) before the run: relative path -> content"),
  env: stringMap.optional().describe("environment variables for the program: non-secret, shown in output as printed (the " +
    "operator's secrets are injected by the tool and redacted)"),
  timeout_s: z.number().int().min(1).max(86400).optional()
    .describe('wall-clock limit in whole seconds, 1 to 86400 (clamped by the quota)'),
};
const outputSchema = {
  stdout: string, stderr: string, exit_code: z.number().int(), signal: z.number().int(), timed_out: z.boolean(),
  oom_killed: z.boolean(), duration_ms: z.number().int(), output_paths: z.array(string), env_vars: stringMap,
  truncated: z.boolean(), denials: z.array(z.any()).optional(), redactions: z.array(z.any()),
  network: z.object({
    egress: z.boolean(), mode: string.optional(), address: string.optional(), egress_bytes: z.number().int().optional(),
    ingress_bytes: z.number().int().optional(), connections: z.number().int().optional(),
    refused: z.number().int().optional(), quota_bytes: z.number().int().optional(),
    quota_exceeded: z.boolean().optional(), error: string.optional(),
  }).optional(),
  pids_limited: z.boolean().optional(), limits: z.object({}).passthrough().optional(),
};
// the same text as dome's (tool_description, default quota)
const description = 'Run a Python, bash, sh or JavaScript (Node.js) program in a fresh, isolated sandbox. Limits: ' +
  '512 MiB memory, 1 CPU, 64 processes, 30 s wall clock (timeout_s may lower it), 64 MiB for /workspace and /tmp; ' +
  'stdout and stderr are shown up to 64 KiB each (the rest is replaced by a `[... truncated: ...]` line; 1 MiB per ' +
  'stream is kept). The program starts in /workspace (HOME=/workspace), where `files` are placed. Nothing is kept ' +
  'between calls: every call gets a new sandbox, and its files and processes are gone when it ends. No network ' +
  "unless the operator's rules permit a destination. Output is redacted: credentials and the tool's secret values " +
  'in every field, sensitive data and PII in the fields the operator classified so; `env` values are yours and are ' +
  'not treated as secrets. A program ended by a limit gets a line on stderr naming it (`dome: killed: timeout ' +
  '(limit 10 s)`, out of memory, pids).';

function newServer() {
  const server = new McpServer({ name: 'sdk-peer', version: '1.0.0' });
  server.registerTool('execute_code', {
    title: 'Execute code', description, inputSchema, outputSchema,
    annotations: { readOnlyHint: false, destructiveHint: false, openWorldHint: false },
  }, async () => {
    const result = { stdout: '1\n', stderr: '', exit_code: 0, signal: 0, timed_out: false, oom_killed: false,
      duration_ms: 0, output_paths: [], env_vars: {}, truncated: false, redactions: [] };
    return { content: [{ type: 'text', text: JSON.stringify(result) }], structuredContent: result };
  });
  return server;
}

const transports = new Map(); // session id -> transport
const readBody = (req) => new Promise((resolve, reject) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
  req.on('error', reject);
});
const fail = (res, status, message) => {
  res.writeHead(status, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message }, id: null }));
};

const httpServer = http.createServer(async (req, res) => {
  try {
    const url = new URL(req.url, 'http://127.0.0.1');
    if (url.pathname !== '/mcp' && url.pathname !== '/mcp-sse') return fail(res, 404, 'not found');
    if (token && req.headers.authorization !== `Bearer ${token}`) return fail(res, 401, 'unauthorized');
    const id = req.headers['mcp-session-id'];
    let body;
    if (req.method === 'POST') {
      const text = await readBody(req);
      try { body = JSON.parse(text); } catch { return fail(res, 400, 'parse error'); }
    }
    let transport = id ? transports.get(id) : undefined;
    if (!transport) {
      if (id || req.method !== 'POST' || !isInitializeRequest(body)) return fail(res, id ? 404 : 400, 'no session');
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => crypto.randomUUID(),
        enableJsonResponse: url.pathname === '/mcp',
        onsessioninitialized: (sid) => transports.set(sid, transport),
      });
      transport.onclose = () => { if (transport.sessionId) transports.delete(transport.sessionId); };
      await newServer().connect(transport);
    }
    await transport.handleRequest(req, res, body);
  } catch (error) {
    if (!res.headersSent) fail(res, 500, String(error));
  }
});
httpServer.listen(0, '127.0.0.1', () => {
  process.stdout.write(`listening ${httpServer.address().port}\n`);
});
const stop = async () => {
  for (const transport of transports.values()) await transport.close().catch(() => {});
  httpServer.close();
  httpServer.closeAllConnections?.();
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
