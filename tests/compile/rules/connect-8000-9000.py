import socket
servers = []
for port in (8000, 9000):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port)); s.listen(1); servers.append(s)
for port in (8000, 9000):
    c = socket.socket()
    try:
        c.connect(("127.0.0.1", port)); print(port, "connected")
    except OSError as e:
        print(port, "refused", e.errno)
