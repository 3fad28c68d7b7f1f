// Jail networking through a running domed (run by test_domed_net inside its simulated host namespace, so
// that domed, its pasta and this MCP client live there and the peers are namespaces the suite made).
// Rules permit code-exec-agent tcp 10.1.2.3:443 and udp 10.1.2.53:53 (net:send and net:connect: glibc's
// resolver connects its UDP socket); the quota allows egress and, through
// DOMED_EGRESS_QUOTA, a byte quota per jail. Prints `N passed, N failed`.
import fs from 'node:fs';
import path from 'node:path';
import { Domed, RULES, check, endPasta, finish, journalEvents, processAlive } from '../../mcp/lib/harness.mjs';

// The suite's choices arrive as environment variables and reach domed as its configuration flags.
const quota = Number(process.env.DOMED_EGRESS_QUOTA || 0);
const netArgs = ['--egress-quota', String(quota), '--net-tcp-relay', process.env.DOMED_NET_TCP_RELAY === '1' ? 'true' : 'false'];
const domed = await new Domed(netArgs).start();
const stateDir = path.join(domed.dir, 'domed-net');
const netFiles = () => { try { return fs.readdirSync(stateDir); } catch { return []; } };
try {
  const rulesFile = path.join(domed.dir, 'rules.cedar');
  fs.writeFileSync(rulesFile, `${RULES}
@id("mirror-443")
permit (principal == Dome::Agent::"code-exec-agent", action == Dome::Action::"net:connect", resource)
when { context.dst_ip == ip("10.1.2.3") && context.dst_port == 443 && context.protocol == "tcp" };
@id("resolver")
permit (principal == Dome::Agent::"code-exec-agent",
        action in [Dome::Action::"net:send", Dome::Action::"net:connect"], resource)
when { context.dst_ip == ip("10.1.2.53") && context.dst_port == 53 && context.protocol == "udp" };
@id("mirror6-443")
permit (principal == Dome::Agent::"code-exec-agent", action == Dome::Action::"net:connect", resource)
when { context.dst_ip == ip("fd10:1:2::3") && context.dst_port == 443 && context.protocol == "tcp" };
@id("other-calls")
permit (principal == Dome::Agent::"other-agent", action == Dome::Action::"mcp:call",
        resource == Dome::MCPTool::"code-sandbox");
@id("other-discover")
permit (principal == Dome::Agent::"other-agent", action == Dome::Action::"mcp:discover", resource);
`);
  let r = domed.domeStatus('rules', 'apply', rulesFile, '--name', 'mirror');
  check(r.status === 0, 'rules permitting 10.1.2.3:443 and the resolver 10.1.2.53 applied', r.stderr);
  const token = domed.register('code-exec-agent', 'code-execution');
  const otherToken = domed.register('other-agent', 'code-execution');
  const probe = {
    language: 'python',
    code: `
import socket, urllib.request
def tcp(host, port):
    s = socket.socket(); s.settimeout(3)
    try:
        s.connect((host, port)); return "connected"
    except OSError as e:
        return "refused errno=%d" % e.errno
    finally:
        s.close()
try:
    print("mirror:", urllib.request.urlopen("http://10.1.2.3:443/", timeout=3).read().decode())
except Exception as e:
    print("mirror: failed", e)
try:
    print("mirror6:", urllib.request.urlopen("http://[fd10:1:2::3]:443/", timeout=3).read().decode())
except Exception as e:
    print("mirror6: failed", e)
def tcp6(host, port):
    s = socket.socket(socket.AF_INET6); s.settimeout(3)
    try:
        s.connect((host, port)); return "connected"
    except OSError as e:
        return "refused errno=%d" % e.errno
    finally:
        s.close()
print("other6:", tcp6("fd10:1:2::4", 443))
print("port22:", tcp("10.1.2.3", 22))
print("other443:", tcp("10.1.2.4", 443))
try:
    print("resolve:", socket.getaddrinfo("mirror.test", 443, socket.AF_INET)[0][4][0])
except Exception as e:
    print("resolve: failed", e)
print("resolv.conf:", ",".join(l.split()[1] for l in open("/etc/resolv.conf") if l.startswith("nameserver")))
`,
  };

  // 1. egress denied by the quota: no path at all
  let client = await domed.client(token);
  let result = await client.callTool({ name: 'execute_code', arguments: probe });
  let sc = result.structuredContent ?? {};
  check(/mirror: failed/.test(sc.stdout) && sc.network?.egress === false,
    'quota egress deny: the permitted peer is unreachable and no path is built', sc.stdout ?? result.content?.[0]?.text);
  domed.dome('quotas', 'set', '--capability', 'code-execution', '--egress', 'allow');

  // 2. the permitted peer, the refusals, the resolver
  result = await client.callTool({ name: 'execute_code', arguments: probe });
  sc = result.structuredContent ?? {};
  const out = sc.stdout ?? '';
  check(!result.isError && /^mirror: dome-peer-ok$/m.test(out), 'a jail permitted 10.1.2.3:443 gets data from it', out || result.content?.[0]?.text);
  check(/^mirror6: dome-peer6-ok$/m.test(out), 'IPv6: a jail permitted [fd10:1:2::3]:443 gets data from it', out);
  check(/^other6: refused errno=1$/m.test(out), 'IPv6: [fd10:1:2::4]:443 refused by policy (EPERM)', out);
  check(/^port22: refused errno=1$/m.test(out), '10.1.2.3:22 refused by policy (EPERM)', out);
  check(/^other443: refused errno=1$/m.test(out), '10.1.2.4:443 refused by policy (EPERM)', out);
  const denials = sc.denials ?? [];
  check(denials.some((d) => d.hook === 'connect4' && d.object === '10.1.2.3:22' && d.action === 'net:connect'),
    'denial event for 10.1.2.3:22', denials);
  check(denials.some((d) => d.hook === 'connect4' && d.object === '10.1.2.4:443'), 'denial event for 10.1.2.4:443', denials);
  check(denials.some((d) => d.hook === 'connect6' && /fd10:1:2::4\]?:443$/.test(d.object)), 'IPv6: denial event for [fd10:1:2::4]:443', denials);
  check(/^resolve: 10\.1\.2\.3$/m.test(out) && /^resolv\.conf: 10\.1\.2\.53$/m.test(out),
    'names resolve through the permitted resolver only (resolv.conf names it alone)', out);
  const net = sc.network ?? {};
  check(net.egress === true && net.mode === 'user' && /^100\.6[4-9]|^100\.[7-9]\d|^100\.1[01]\d|^100\.12[0-7]/.test(net.address ?? ''),
    'result.network: user-mode path with a pool address', net);
  check(net.connections >= 2 && net.egress_bytes > 0 && net.ingress_bytes > 100,
    'result.network counts the flows (HTTP + DNS) and bytes both ways', net);
  check(net.quota_bytes === quota && net.quota_exceeded === false, 'result.network shows the byte quota, not exceeded', net);
  const end = journalEvents(domed).filter((e) => e.type === 'exec.end').at(-1);
  check(end?.network?.egress === true && end.network.connections === net.connections, 'exec.end journals the same network figures', end?.network);
  const jailDenials = journalEvents(domed).filter((e) => e.type === 'exec.denial' && e.object === '10.1.2.4:443');
  check(jailDenials.length >= 1, 'exec.denial journalled for 10.1.2.4:443');
  check(!netFiles().some((f) => f.startsWith('slot-')), 'no slot left after the jail ended', netFiles());

  // 2b. concurrent jails with egress each get their own path (own address), all reach the peer
  const concurrent = await Promise.all([0, 1, 2].map(async () => {
    const c = await domed.client(token);
    const res = await c.callTool({ name: 'execute_code', arguments: { language: 'sh', code: 'sleep 0.5; curl -s --max-time 3 http://10.1.2.3:443/' } });
    await c.close();
    return res.structuredContent ?? {};
  }));
  const addresses = new Set(concurrent.map((c) => c.network?.address));
  check(concurrent.every((c) => c.stdout === 'dome-peer-ok') && addresses.size >= 2,
    '3 calls at once (max_jails 2 on 2 CPUs: 2 jails overlap): each reaches the peer, overlapping jails through their own addresses', concurrent.map((c) => [c.stdout, c.network]));
  check(!netFiles().some((f) => f.startsWith('slot-')), 'no slot left after the concurrent jails', netFiles());

  // 3. another agent whose rules permit nothing beyond loopback: no path
  const other = await domed.client(otherToken);
  result = await other.callTool({ name: 'execute_code', arguments: probe });
  sc = result.structuredContent ?? {};
  check(/mirror: failed/.test(sc.stdout) && sc.network?.egress === false && !sc.network?.error,
    'an agent without network rules gets no path', sc.stdout ?? result.content?.[0]?.text);
  await other.close();

  // 4. the byte quota cuts a large download
  if (quota > 0) {
    result = await client.callTool({
      name: 'execute_code',
      arguments: {
        language: 'sh',
        code: 'curl -s --max-time 8 -o /workspace/big http://10.1.2.3:443/big?mib=8; echo rc=$?; stat -c size=%s /workspace/big',
        timeout_s: 15,
      },
    });
    sc = result.structuredContent ?? {};
    const size = Number(/size=(\d+)/.exec(sc.stdout ?? '')?.[1] ?? -1);
    check(size >= 0 && size <= quota && size > quota / 2 && !/rc=0/.test(sc.stdout),
      `the egress byte quota (${quota} bytes) cuts an 8 MiB download`, sc.stdout ?? result.content?.[0]?.text);
    check(sc.network?.quota_exceeded === true, 'result.network says the quota ran out', sc.network);
  }

  // 4b. a byte quota of the capability (dome quotas set --egress-bytes) replaces egress_quota for its jails
  const capabilityQuota = 1200000;
  r = domed.domeStatus('quotas', 'set', '--capability', 'code-execution', '--egress-bytes', 'lots');
  check(r.status === 125 && /--egress-bytes/.test(r.stderr), 'quotas set --egress-bytes: a bad size is refused, naming the flag', r);
  r = domed.domeStatus('quotas', 'set', '--capability', 'code-execution', '--egress-bytes', String(capabilityQuota));
  check(r.status === 0 && /"egress_bytes":1200000/.test(r.stdout), 'quotas set --egress-bytes 1200000 for code-execution', r);
  r = domed.domeStatus('quotas', 'list');
  check(r.status === 0 && /^code-execution\s.*\sallow\s+1200000(\s|$)/m.test(r.stdout), 'quotas list shows the capability\'s egress bytes', r.stdout);
  const download = {
    language: 'sh',
    code: 'curl -s --max-time 5 -o /workspace/big http://10.1.2.3:443/big?mib=8; echo rc=$?; stat -c size=%s /workspace/big',
    timeout_s: 12,
  };
  result = await client.callTool({ name: 'execute_code', arguments: download });
  sc = result.structuredContent ?? {};
  let size = Number(/size=(\d+)/.exec(sc.stdout ?? '')?.[1] ?? -1);
  check(size > capabilityQuota / 2 && size <= capabilityQuota && !/rc=0/.test(sc.stdout),
    `the capability's quota (${capabilityQuota} bytes, not egress_quota ${quota}) cuts an 8 MiB download (got ${size})`, sc.stdout ?? result.content?.[0]?.text);
  check(sc.network?.quota_bytes === capabilityQuota && sc.network?.quota_exceeded === true,
    'result.network shows the capability\'s quota, run out', sc.network);
  // another capability keeps the configuration's quota; 0 gives this one back to it
  r = domed.domeStatus('quotas', 'set', '--capability', 'code-execution', '--egress-bytes', '0');
  check(r.status === 0 && /"egress_bytes":0/.test(r.stdout), 'quotas set --egress-bytes 0: back to egress_quota', r);
  r = domed.domeStatus('quotas', 'list');
  check(/^code-execution\s.*\sallow\s+config(\s|$)/m.test(r.stdout), 'quotas list says the configuration\'s quota applies', r.stdout);
  result = await client.callTool({ name: 'execute_code', arguments: { language: 'sh', code: 'curl -s --max-time 3 http://10.1.2.3:443/' } });
  sc = result.structuredContent ?? {};
  check(sc.stdout === 'dome-peer-ok' && sc.network?.quota_bytes === quota, 'then the jail gets egress_quota again', sc.network);

  // 5. /metrics
  const metrics = await (await fetch(`http://127.0.0.1:${domed.port}/metrics`)).text();
  const value = (name) => Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(metrics)?.[1] ?? -1);
  check(value('dome_egress_jails_total') >= 2 && value('dome_egress_connections_total') >= 2
    && value('dome_egress_bytes_total') > 0 && value('dome_ingress_bytes_total') > 100,
    '/metrics: egress jails, connections and bytes', metrics.split('\n').filter((l) => l.startsWith('dome_egress') || l.startsWith('dome_ingress')));
  if (quota > 0) check(value('dome_egress_quota_exceeded_total') >= 1, '/metrics: quota cuts counted');
  await client.close();
} finally {
  for (const line of domed.log.split('\n')) if (/component=net /.test(line)) console.log(`  domed: ${line}`);
  const pasta = netFiles().includes('pasta.pid') ? fs.readFileSync(path.join(stateDir, 'pasta.pid'), 'utf8').trim() : '';
  const stopped = await domed.stop();
  check(stopped?.code === 0, 'domed stopped cleanly', stopped);
  check(!pasta || !fs.existsSync(`/proc/${pasta}/cmdline`) || !fs.readFileSync(`/proc/${pasta}/cmdline`, 'utf8').includes('pasta'),
    'domed shut its pasta down', pasta);
}

// 6. a crashed domed: the kernel ends its pasta with it (parent-death signal), and the next one (same
// control socket, so the same state directory) removes the files it left
const crashed = await new Domed(netArgs).start();
const crashedNet = path.join(crashed.dir, 'domed-net');
let successor = null;
try {
  crashed.dome('quotas', 'set', '--capability', 'code-execution', '--egress', 'allow');
  const rulesFile = path.join(crashed.dir, 'rules.cedar');
  fs.writeFileSync(rulesFile, `${RULES}
@id("mirror-443")
permit (principal == Dome::Agent::"code-exec-agent", action == Dome::Action::"net:connect", resource)
when { context.dst_ip == ip("10.1.2.3") && context.dst_port == 443 && context.protocol == "tcp" };
`);
  crashed.dome('rules', 'apply', rulesFile, '--name', 'mirror');
  const client = await crashed.client(crashed.register('code-exec-agent', 'code-execution'));
  client.callTool({ name: 'execute_code', arguments: { language: 'sh', code: 'sleep 30' } }).catch(() => {});
  let slot = false;
  for (let i = 0; i < 100 && !slot; i++) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    try { slot = fs.readdirSync(crashedNet).some((f) => f.startsWith('slot-')); } catch { /* not yet */ }
  }
  const pasta = fs.readFileSync(path.join(crashedNet, 'pasta.pid'), 'utf8').trim();
  check(slot && fs.existsSync(`/proc/${pasta}`), 'crash: a jail with egress running, its pasta alive (precondition)', pasta);
  const killed = Date.now();
  crashed.process.kill('SIGKILL');
  await crashed.exited;
  let gone = false;
  while (!gone && Date.now() - killed < 1000) {
    gone = !processAlive(pasta);
    if (!gone) await new Promise((resolve) => setTimeout(resolve, 20));
  }
  check(gone, `crash: pasta ended with the SIGKILLed domed within 1 s (${Date.now() - killed} ms)`, pasta);
  check(fs.readdirSync(crashedNet).some((f) => f === 'pasta.pid'), 'crash: the killed domed left its files (precondition)', fs.readdirSync(crashedNet));
  successor = await new Domed([...netArgs, '--control-socket', crashed.socket, '--state-dir', path.join(crashed.dir, 'state'),
    '--journal-dir', path.join(crashed.dir, 'journal')]).start();
  check(!fs.readdirSync(crashedNet).some((f) => f.startsWith('slot-') || f.startsWith('pasta.')), 'restart: no slot or pasta file left', fs.readdirSync(crashedNet));
  client.close().catch(() => {});
} finally {
  if (successor) await successor.stop();
  crashed.process.kill('SIGKILL');
  await crashed.exited;
  await endPasta(crashed.dir);
  fs.rmSync(crashed.dir, { recursive: true, force: true });
}
finish();
