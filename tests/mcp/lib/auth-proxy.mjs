// A loopback HTTP proxy that adds `Authorization: Bearer <token>` to every request and forwards it to
// domed, streaming the answer back. The MCP conformance suite has no way to send a bearer token; domed
// requires one on every request. `toolNames` ({asked: exposed}) renames the tool of a POSTed tools/call:
// the suite calls fixture tools by bare names, while domed exposes a gateway backend's tool `t` of
// backend `b` only as `b.t`.
import http from 'node:http';

export function startAuthProxy(targetPort, token, toolNames = {}) {
  const server = http.createServer(async (request, response) => {
    const headers = { ...request.headers, authorization: `Bearer ${token}`, host: `127.0.0.1:${targetPort}` };
    let body = null;
    if (request.method === 'POST' && Object.keys(toolNames).length > 0) {
      const chunks = [];
      for await (const chunk of request) chunks.push(chunk);
      body = Buffer.concat(chunks);
      try {
        const message = JSON.parse(body.toString('utf8'));
        const name = message?.method === 'tools/call' ? message.params?.name : undefined;
        if (typeof name === 'string' && Object.hasOwn(toolNames, name)) {
          message.params.name = toolNames[name];
          body = Buffer.from(JSON.stringify(message));
        }
      } catch { /* not JSON: forwarded as it came, domed answers it */ }
      headers['content-length'] = String(body.length);
      delete headers['transfer-encoding'];
    }
    const upstream = http.request({ host: '127.0.0.1', port: targetPort, method: request.method, path: request.url, headers }, (answer) => {
      response.writeHead(answer.statusCode, answer.headers);
      answer.pipe(response);
    });
    upstream.on('error', () => { response.destroy(); });
    if (body) upstream.end(body);
    else request.pipe(upstream);
    response.on('close', () => upstream.destroy());
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}
