#!/usr/bin/python3
"""A minimal MCP backend whose tool definitions are read from a JSON file at every tools/list (so a test
can change a description after approval: a rug pull). JSON-RPC answers are JSON bodies (Streamable HTTP
allows them); notifications get 202. Prints {"port": N} on stdout, then serves 127.0.0.1 until killed.

usage: mutable_backend.py TOOLS_FILE     (TOOLS_FILE holds {"tools": [MCP Tool objects]})"""
import http.server
import json
import socketserver
import sys

TOOLS_FILE = sys.argv[1]


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        message = json.loads(self.rfile.read(length) or b"{}")
        if "id" not in message:
            self.send_response(202)
            self.end_headers()
            return
        method = message.get("method")
        if method == "initialize":
            result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                      "serverInfo": {"name": "mutable", "version": "1"}}
        elif method == "tools/list":
            with open(TOOLS_FILE, encoding="utf-8") as tools:
                result = json.load(tools)
        elif method == "tools/call":
            params = message.get("params", {})
            result = {"content": [{"type": "text", "text": "called " + params.get("name", "") + " with "
                                   + json.dumps(params.get("arguments", {}), sort_keys=True)}]}
        else:
            result = {}
        body = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


server = Server(("127.0.0.1", 0), Handler)
print(json.dumps({"port": server.server_address[1]}), flush=True)
server.serve_forever()
