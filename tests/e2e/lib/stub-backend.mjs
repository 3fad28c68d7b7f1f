// A stub MCP backend for the seed walkthrough: the official TypeScript SDK's MCP server over Streamable
// HTTP (stateless) on 127.0.0.1, standing in for the production-deploy or database-write tool the seed's
// policy forbids. Every tools/call that reaches it is appended to CALLS_FILE as one JSON line, so the
// walkthrough can prove that a denied call never reached the backend.
//
// usage: node stub-backend.mjs NAME CALLS_FILE     prints {"name": NAME, "port": N} on stdout when ready
// Tools: production-deploy → deploy {service, version}; database-write → write {table, row}; others → run {}.
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';

const ROOT = process.env.DOME_ROOT || path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../..');
const MODULES = path.join(ROOT, 'tests/node/node_modules');
const { McpServer } = await import(`${MODULES}/@modelcontextprotocol/sdk/dist/esm/server/mcp.js`);
const { StreamableHTTPServerTransport } = await import(
  `${MODULES}/@modelcontextprotocol/sdk/dist/esm/server/streamableHttp.js`);
const { z } = await import(`${MODULES}/zod/index.js`);

const [name, callsFile] = process.argv.slice(2);
if (!name || !callsFile) {
  console.error('usage: node stub-backend.mjs NAME CALLS_FILE');
  process.exit(2);
}

function record(tool, args) {
  fs.appendFileSync(callsFile, `${JSON.stringify({ backend: name, tool, args, time: new Date().toISOString() })}\n`);
}

function makeServer() {
  const server = new McpServer({ name: `stub-${name}`, version: '1.0.0' });
  if (name === 'production-deploy') {
    server.registerTool('deploy', {
      description: 'Deploy a service version to production',
      inputSchema: { service: z.string(), version: z.string() },
    }, async (args) => {
      record('deploy', args);
      return { content: [{ type: 'text', text: `deployed ${args.service}@${args.version}` }] };
    });
  } else if (name === 'database-write') {
    server.registerTool('write', {
      description: 'Insert a row into a production table',
      inputSchema: { table: z.string(), row: z.record(z.string(), z.any()) },
    }, async (args) => {
      record('write', args);
      return { content: [{ type: 'text', text: `1 row written to ${args.table}` }] };
    });
  } else {
    server.registerTool('run', { description: 'Do something' }, async () => {
      record('run', {});
      return { content: [{ type: 'text', text: 'ran' }] };
    });
  }
  return server;
}

const httpServer = http.createServer(async (request, response) => {
  if (!request.url.startsWith('/mcp')) {
    response.writeHead(404).end();
    return;
  }
  if (request.method !== 'POST') {
    response.writeHead(405, { Allow: 'POST' }).end();
    return;
  }
  const chunks = [];
  for await (const chunk of request) chunks.push(chunk);
  let body;
  try {
    body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    response.writeHead(400).end();
    return;
  }
  const server = makeServer();
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  response.on('close', () => {
    transport.close();
    server.close();
  });
  await server.connect(transport);
  await transport.handleRequest(request, response, body);
});

httpServer.listen(0, '127.0.0.1', () => {
  console.log(JSON.stringify({ name, port: httpServer.address().port }));
});
for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => httpServer.close(() => process.exit(0)));
