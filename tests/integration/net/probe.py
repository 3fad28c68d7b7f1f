#!/usr/bin/env python3
"""Checks run INSIDE a jail-like namespace by test_net. Each argument is one check
   NAME=KIND:ARGS and prints "ok - NAME" or "not ok - NAME: detail":
     http:URL:TEXT          GET URL answers TEXT (within SUCCEED_WITHIN_S, as banner)
     refused:HOST:PORT      a TCP connect fails within 3 s (no route, rejected, or timed out)
     banner:HOST:PORT:TEXT  a TCP connect succeeds and the first line read is TEXT
                            (HOST may be [IPV6]; http URLs take [IPV6] as usual)
     resolve:NAME:ADDRESS   getaddrinfo(NAME) gives ADDRESS (through /etc/resolv.conf)
     noresolve:NAME:SECONDS getaddrinfo(NAME) fails within SECONDS
     dnsfail:SERVER         a direct UDP query to SERVER:53 gets no answer within 2 s
     resolvconf:TEXT        /etc/resolv.conf's nameserver lines are exactly TEXT (comma-separated)"""
import socket, struct, sys, time, urllib.request

# What must succeed may take long on a loaded machine (a user-mode path is a process that must be
# scheduled); what must fail is judged within 3 s.
SUCCEED_WITHIN_S = 15

def hostport(args):
    """HOST:REST or [IPV6]:REST -> (host, rest)"""
    if args.startswith("["):
        host, rest = args[1:].split("]:", 1)
        return host, rest
    return args.split(":", 1)

def check(kind, args):
    if kind == "http":
        url, text = args.rsplit(":", 1)
        body = urllib.request.urlopen(url, timeout=SUCCEED_WITHIN_S).read().decode()
        return body == text, "got %r" % body[:80]
    if kind == "refused":
        host, port = hostport(args)
        s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        s.settimeout(3)
        try:
            s.connect((host, int(port)))
            return False, "connected"
        except OSError as e:
            return True, str(e)
        finally:
            s.close()
    if kind == "banner":
        host, rest = hostport(args)
        port, text = rest.split(":", 1)
        with socket.create_connection((host, int(port)), timeout=SUCCEED_WITHIN_S) as s:
            line = s.makefile("rb").readline().decode().strip()
        return line == text, "got %r" % line[:80]
    if kind == "resolve":
        name, address = args.split(":")
        got = sorted({a[4][0] for a in socket.getaddrinfo(name, 443, socket.AF_INET, socket.SOCK_STREAM)})
        return got == [address], "got %s" % got
    if kind == "noresolve":
        name, seconds = args.split(":")
        start = time.monotonic()
        try:
            got = socket.getaddrinfo(name, 443, socket.AF_INET)
            return False, "resolved to %s" % got[0][4][0]
        except socket.gaierror as e:
            took = time.monotonic() - start
            return took < float(seconds), "%s after %.2f s" % (e, took)
    if kind == "dnsfail":
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(2)
        query = struct.pack("!HHHHHH", 7, 0x0100, 1, 0, 0, 0) + b"\x06mirror\x04test\x00\x00\x01\x00\x01"
        try:
            s.sendto(query, (args, 53))
            s.recvfrom(512)
            return False, "answered"
        except OSError as e:
            return True, str(e)
    if kind == "resolvconf":
        servers = [l.split()[1] for l in open("/etc/resolv.conf") if l.startswith("nameserver")]
        return servers == [x for x in args.split(",") if x], "got %s" % servers
    return False, "unknown check kind " + kind

failed = 0
for arg in sys.argv[1:]:
    name, spec = arg.split("=", 1)
    kind, args = spec.split(":", 1)
    try:
        good, detail = check(kind, args)
    except Exception as e:  # a failing check, never a crash of the probe
        good, detail = False, "%s: %s" % (type(e).__name__, e)
    print(("ok - %s (%s)" if good else "not ok - %s: %s") % (name, detail), flush=True)
    failed += not good
sys.exit(1 if failed else 0)
