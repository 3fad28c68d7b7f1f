#!/usr/bin/env python3
"""Peer services of the jail-networking suite, run inside a test-made namespace:
   http ADDR PORT TEXT      — HTTP server answering TEXT (and /big: N MiB of zeros given by ?mib=N)
   tcp ADDR PORT BANNER     — an SSH-like TCP port: sends BANNER and closes
   dns ADDR ANSWER          — UDP resolver on ADDR:53 answering every A query with ANSWER
ADDR may be IPv6 (http, tcp). Prints "ready" on stdout once listening."""
import http.server, socket, socketserver, struct, sys, threading

def http_main(addr, port, text):
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = text.encode()
            if self.path.startswith("/big"):
                mib = int(self.path.split("mib=")[1]) if "mib=" in self.path else 16
                self.send_response(200)
                self.send_header("Content-Length", str(mib << 20))
                self.end_headers()
                chunk = b"\0" * (1 << 20)
                for _ in range(mib):
                    self.wfile.write(chunk)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        def log_message(self, *a):
            pass
    class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True
        allow_reuse_address = True
        address_family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    server = Server((addr, int(port)), Handler)
    print("ready", flush=True)
    server.serve_forever()

def tcp_main(addr, port, banner):
    s = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, int(port)))
    s.listen(16)
    print("ready", flush=True)
    while True:
        c, _ = s.accept()
        c.sendall(banner.encode() + b"\r\n")
        c.close()

def dns_main(addr, answer):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((addr, 53))
    print("ready", flush=True)
    ip = socket.inet_aton(answer)
    while True:
        q, client = s.recvfrom(512)
        if len(q) < 12:
            continue
        ident, = struct.unpack("!H", q[:2])
        # question: name labels until 0, then qtype, qclass
        i = 12
        while i < len(q) and q[i] != 0:
            i += q[i] + 1
        question = q[12:i + 5]
        qtype = struct.unpack("!H", q[i + 1:i + 3])[0] if i + 3 <= len(q) else 0
        if qtype == 1:
            header = struct.pack("!HHHHHH", ident, 0x8180, 1, 1, 0, 0)
            rr = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 60, 4) + ip
        else:  # no AAAA etc.: NOERROR, no answer
            header = struct.pack("!HHHHHH", ident, 0x8180, 1, 0, 0, 0)
            rr = b""
        s.sendto(header + question + rr, client)

if __name__ == "__main__":
    kind, args = sys.argv[1], sys.argv[2:]
    {"http": http_main, "tcp": tcp_main, "dns": dns_main}[kind](*args)
