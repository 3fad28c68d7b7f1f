// A loopback HTTP proxy that adds `Authorization: Bearer <token>` to every request and forwards it to
// domed, streaming the answer back. The MCP conformance suite has no way to send a bearer token; domed
// requires one on every request.
import http from 'node:http';

export function startAuthProxy(targetPort, token) {
  const server = http.createServer((request, response) => {
    const headers = { ...request.headers, authorization: `Bearer ${token}`, host: `127.0.0.1:${targetPort}` };
    const upstream = http.request({ host: '127.0.0.1', port: targetPort, method: request.method, path: request.url, headers }, (answer) => {
      response.writeHead(answer.statusCode, answer.headers);
      answer.pipe(response);
    });
    upstream.on('error', () => { response.destroy(); });
    request.pipe(upstream);
    response.on('close', () => upstream.destroy());
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}
