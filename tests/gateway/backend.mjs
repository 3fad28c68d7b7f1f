// An external MCP backend for the gateway tests: the official TypeScript SDK's server over Streamable
// HTTP on loopback (stateful sessions), behind a credential check. Prints {"port": N} on stdout.
//
// Tools (SDK): add {a, b} (the permitted tool), echo_config {} (echoes a fake credential, the injected
// auth header value and an internal address), progress {steps} (notifications/progress), sleep {ms}.
// Tools whose calls are answered below the SDK, at the HTTP level, to model broken backends:
// hang (never answers), garbage (200 application/json that is not JSON), midstream (an SSE stream
// closed in the middle of an event), forever (progress notifications forever, no response), linger (the
// response, then an open stream), forget_session (a JSON-body answer; the session then answers 404).
//
// usage: node backend.mjs SECRET_HEADER_VALUE   (requests without `Authorization: <value>` get 401)
import http from 'node:http';
import path from 'node:path';
import { randomUUID } from 'node:crypto';

const ROOT = process.env.DOME_ROOT || path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const MODULES = path.join(ROOT, 'tests/node/node_modules');
const { McpServer } = await import(`${MODULES}/@modelcontextprotocol/sdk/dist/esm/server/mcp.js`);
const { StreamableHTTPServerTransport } = await import(`${MODULES}/@modelcontextprotocol/sdk/dist/esm/server/streamableHttp.js`);
const { z } = await import(`${MODULES}/zod/index.js`);

const expected = process.argv[2] || '';
const credential = expected.split(' ').pop(); // the part after the scheme ("Bearer")
const FAKE_GITHUB_TOKEN = 'ghp_' + 'R8mT2xQ9vL4nZ7cW1pK6sB3yH5dF0gJ8aE2u';

function makeServer() {
  const server = new McpServer({ name: 'gateway-test-backend', version: '1.0.0' });
  server.registerTool('add', { description: 'Add two numbers', inputSchema: { a: z.number(), b: z.number() } },
    async ({ a, b }) => ({ content: [{ type: 'text', text: String(a + b) }], structuredContent: { sum: a + b } }));
  server.registerTool('echo_config', { description: 'Echo the backend configuration' }, async () => ({
    content: [{ type: 'text', text: `credential=${credential} token=${FAKE_GITHUB_TOKEN} database=10.0.3.7:5432` }],
    structuredContent: { credential, token: FAKE_GITHUB_TOKEN, address: '10.0.3.7', note: 'peer 10.0.3.8' },
  }));
  server.registerTool('progress', { description: 'Report progress', inputSchema: { steps: z.number() } },
    async ({ steps }, extra) => {
      const token = extra._meta?.progressToken;
      for (let i = 1; i <= steps; i++) {
        if (token !== undefined)
          await extra.sendNotification({ method: 'notifications/progress',
            params: { progressToken: token, progress: i, total: steps, message: `step ${i} via 10.0.3.7` } });
        await new Promise((r) => setTimeout(r, 20));
      }
      return { content: [{ type: 'text', text: 'done' }] };
    });
  server.registerTool('sleep', { description: 'Sleep', inputSchema: { ms: z.number() } }, async ({ ms }) => {
    await new Promise((r) => setTimeout(r, ms));
    return { content: [{ type: 'text', text: `slept ${ms}` }] };
  });
  for (const name of ['hang', 'garbage', 'midstream', 'forever', 'linger', 'forget_session'])
    server.registerTool(name, { description: `broken backend: ${name}` }, async () => ({ content: [] }));
  return server;
}

const transports = new Map();
const readBody = (request) => new Promise((resolve, reject) => {
  const chunks = [];
  request.on('data', (c) => chunks.push(c));
  request.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
  request.on('error', reject);
});

const httpServer = http.createServer(async (request, response) => {
  if ((request.headers.authorization || '') !== expected) {
    response.writeHead(401, { 'content-type': 'text/plain' }).end('missing or wrong credential');
    return;
  }
  let body;
  if (request.method === 'POST') {
    const text = await readBody(request);
    try { body = JSON.parse(text); } catch { response.writeHead(400).end('bad json'); return; }
  }
  if (body?.method === 'tools/call') {
    const sse = { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' };
    switch (body.params?.name) {
      case 'hang':
        return; // never answer
      case 'garbage':
        response.writeHead(200, { 'content-type': 'application/json' }).end('<html>this is not JSON</html>');
        return;
      case 'midstream':
        response.writeHead(200, sse);
        response.write('event: message\ndata: {"jsonrpc":"2.0","id":' + body.id + ',"resu');
        setTimeout(() => response.socket.destroy(), 50);
        return;
      case 'linger': { // the response, then the stream stays open (comments) until the client leaves
        response.writeHead(200, sse);
        response.write(`event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', id: body.id, result: { content: [{ type: 'text', text: 'lingered' }] } })}\n\n`);
        const timer = setInterval(() => response.write(': still here\n\n'), 20);
        response.on('close', () => clearInterval(timer));
        return;
      }
      case 'forget_session': // drop the session (the next request gets 404) and answer with a JSON body
        transports.delete(request.headers['mcp-session-id']);
        response.writeHead(200, { 'content-type': 'application/json' })
          .end(JSON.stringify({ jsonrpc: '2.0', id: body.id, result: { content: [{ type: 'text', text: 'forgotten' }] } }));
        return;
      case 'forever': {
        response.writeHead(200, sse);
        const token = JSON.stringify(body.params?._meta?.progressToken ?? 'none');
        let n = 0;
        const timer = setInterval(() => response.write(
          `event: message\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":${token},"progress":${++n}}}\n\n`), 20);
        response.on('close', () => clearInterval(timer));
        return;
      }
    }
  }
  const sessionId = request.headers['mcp-session-id'];
  let transport = sessionId ? transports.get(sessionId) : undefined;
  if (!transport) {
    if (sessionId || body?.method !== 'initialize') {
      response.writeHead(sessionId ? 404 : 400).end('no session');
      return;
    }
    transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => transports.set(id, transport),
    });
    transport.onclose = () => { if (transport.sessionId) transports.delete(transport.sessionId); };
    await makeServer().connect(transport);
  }
  await transport.handleRequest(request, response, body);
});
httpServer.listen(0, '127.0.0.1', () => {
  process.stdout.write(JSON.stringify({ port: httpServer.address().port }) + '\n');
});
process.on('SIGTERM', () => process.exit(0));
